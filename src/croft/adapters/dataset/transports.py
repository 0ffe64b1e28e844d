"""The two HTTP clients behind `croft.adapters.dataset.fetch.Transport`.

`HttpClientTransport` (a collector reached directly, `croft collect --url`): the standard library's
`http.client`, one connection kept while the server keeps it, each body read by `readinto1` straight
into the caller's buffer: one `recv_into` per read, no bytes object per chunk, no HTTP parser in
Python per chunk. Profiled on three local collectors, httpx spent most of the copy in h11's event
loop over 64 KiB chunks and in the bytes it made of each (benchmarks/collect.py).

`HttpxTransport` (the API server's pod proxy): the httpx client `Kube.http` builds with the
kubeconfig's credentials; each chunk is copied into the caller's buffer.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from croft.adapters.dataset.fetch import Reply, TransportError, TransportTimeout

if TYPE_CHECKING:
    import httpx


def _cause(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _ClientReply:
    """An `http.client` response; see `Reply`."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self._response = response
        self.status = response.status
        self.finished = False

    def header(self, name: str) -> str:
        return self._response.getheader(name, "") or ""

    def read_into(self, buffer: memoryview) -> int:
        response = self._response
        try:
            if response.chunked or response.length is None or response.fp is None:
                # A chunked body, or one that ends when the connection closes (a proxy's): rare,
                # read as bytes and copied.
                chunk = response.read1(len(buffer))
                buffer[: len(chunk)] = chunk
                n = len(chunk)
            else:
                # What `HTTPResponse.read1` does, into `buffer` (it has no `readinto1`).
                want = min(len(buffer), response.length)
                n = response.fp.readinto1(buffer[:want]) if want else 0
                if want and not n:
                    raise TransportError(
                        f"the connection closed {response.length} bytes before the body's end"
                    )
                response.length -= n
        except TimeoutError as exc:
            raise TransportTimeout(f"timed out: {_cause(exc)}") from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise TransportError(_cause(exc)) from exc
        if not n:
            self.finished = True
        return n

    def text(self, limit_bytes: int) -> str:
        try:
            return self._response.read(limit_bytes).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise TransportError(_cause(exc)) from exc


class HttpClientTransport:
    """A collector at `base_url` (`http://host:port[/prefix]`, or https with the system's CAs),
    every socket operation limited to `timeout_s` seconds. Not for concurrent use: one per node."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._connection: http.client.HTTPConnection | None = None
        self._prefix = ""

    @contextmanager
    def get(self, path: str, headers: Mapping[str, str], left_s: float | None) -> Iterator[Reply]:
        timeout_s = self._timeout_s if left_s is None else min(self._timeout_s, left_s)
        response = self._send(path, headers, timeout_s)
        reply = _ClientReply(response)
        try:
            yield reply
        finally:
            if reply.finished and not response.will_close:
                response.close()  # the connection carries the next request
            else:
                self.close()  # the rest of the body is not wanted: the connection cannot be reused

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _send(self, path: str, headers: Mapping[str, str], timeout_s: float) -> http.client.HTTPResponse:
        # A kept connection the server closed meanwhile fails on first use: that is retried once,
        # on a new connection (a GET changes nothing).
        for attempt in (0, 1):
            reused = self._connection is not None
            try:
                connection = self._connected(timeout_s)
                connection.request("GET", self._prefix + path, headers=dict(headers))
                return connection.getresponse()
            except TimeoutError as exc:
                self.close()
                raise TransportTimeout(f"timed out: {_cause(exc)}") from exc
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if not reused or attempt:
                    raise TransportError(_cause(exc)) from exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self.close()
                raise TransportError(_cause(exc)) from exc
        raise AssertionError("unreachable")

    def _connected(self, timeout_s: float) -> http.client.HTTPConnection:
        if self._connection is None:
            parts = urlsplit(self._base_url)
            host, port = parts.hostname or "", parts.port  # ValueError: a port that is no number
            self._prefix = parts.path.rstrip("/")
            if parts.scheme == "https":
                context = ssl.create_default_context()
                self._connection = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=context)
            else:
                self._connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
        self._connection.timeout = timeout_s
        if self._connection.sock is not None:
            self._connection.sock.settimeout(timeout_s)
        return self._connection


class _HttpxReply:
    """An httpx streamed response; see `Reply`."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self._chunks = response.iter_raw()
        self._pending = memoryview(b"")

    def header(self, name: str) -> str:
        return str(self._response.headers.get(name, ""))

    def read_into(self, buffer: memoryview) -> int:
        import httpx

        if not self._pending:
            try:
                self._pending = memoryview(next(self._chunks, b""))
            except httpx.TimeoutException as exc:
                raise TransportTimeout(_cause(exc)) from exc
            except httpx.HTTPError as exc:
                raise TransportError(_cause(exc)) from exc
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def text(self, limit_bytes: int) -> str:
        import httpx

        try:
            self._response.read()
        except httpx.HTTPError as exc:
            raise TransportError(_cause(exc)) from exc
        return self._response.content[:limit_bytes].decode("utf-8", "replace")


class HttpxTransport:
    """Requests through an httpx client (its base URL, credentials and timeouts), each timeout capped
    by the deadline's seconds left."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client

    @contextmanager
    def get(self, path: str, headers: Mapping[str, str], left_s: float | None) -> Iterator[Reply]:
        import httpx

        timeout = self._client.timeout
        if left_s is not None:
            parts = {k: min(v, left_s) if v is not None else left_s for k, v in timeout.as_dict().items()}
            timeout = httpx.Timeout(**parts)
        try:
            with self._client.stream("GET", path, headers=dict(headers), timeout=timeout) as response:
                yield _HttpxReply(response)
        except httpx.TimeoutException as exc:
            raise TransportTimeout(_cause(exc)) from exc
        except httpx.HTTPError as exc:
            raise TransportError(_cause(exc)) from exc
