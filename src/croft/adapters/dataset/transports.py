"""The two HTTP clients behind `croft.adapters.dataset.fetch.Transport`.

`SocketTransport` (a collector reached directly, `croft collect --url`): HTTP/1.1 GETs written on a
socket by hand, one connection kept while the server keeps it, each body read by `readinto1`
straight into the caller's buffer: one `recv_into` per read, no bytes object per chunk, no HTTP
parser in Python per chunk. Profiled on three local collectors, httpx spent most of the copy in h11's
event loop over 64 KiB chunks and in the bytes it made of each (benchmarks/collect.py); the standard
library's `http.client` reads the same way but imports `email` (its header parser) and `ssl` at
start, about a tenth of `croft collect`'s start, so the little of HTTP/1.1 a GET needs is here:
status line, headers, a body of Content-Length bytes, chunked, or up to the connection's close. `ssl`
is imported for an https collector only.

`HttpxTransport` (the API server's pod proxy): the httpx client `Kube.http` builds with the
kubeconfig's credentials; each chunk is copied into the caller's buffer.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from io import BufferedReader
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from croft.adapters.dataset.fetch import Reply, TransportError, TransportTimeout

if TYPE_CHECKING:
    import httpx

MAX_LINE_BYTES = 65536  # a status, header or chunk-size line (http.client's limit)
MAX_HEADERS = 100


def _cause(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _Disconnected(TransportError):
    """The server closed the connection before answering (a kept connection it had closed)."""


class _SocketReply:
    """One response read from `reader` (the connection's buffered reader); see `Reply`."""

    def __init__(self, reader: BufferedReader) -> None:
        self._reader = reader
        while True:  # 1xx answers (100 Continue) come before the real one
            self.status, version = self._status_line()
            headers = self._headers()
            if not 100 <= self.status < 200:
                break
        self._headers_by_name = headers
        encoding = headers.get("transfer-encoding", "")
        self.chunked = encoding.lower() == "chunked"
        self._left: int | None = None  # body bytes left (of the current chunk, when chunked)
        if not self.chunked:
            declared = headers.get("content-length", "")
            self._left = int(declared) if declared.isdigit() else None
        if self.status in (204, 304):
            self._left, self.chunked = 0, False
        self.finished = self._left == 0
        connection = headers.get("connection", "").lower()
        if version == 11:
            self.will_close = "close" in connection
        else:
            self.will_close = "keep-alive" not in connection and "keep-alive" not in headers
        if self._left is None and not self.chunked:
            self.will_close = True  # the body ends when the connection does
        self._chunk_started = False

    def _line(self) -> bytes:
        line = self._reader.readline(MAX_LINE_BYTES + 1)
        if len(line) > MAX_LINE_BYTES:
            raise TransportError("the server sent a line longer than 65536 bytes")
        return line

    def _status_line(self) -> tuple[int, int]:
        line = self._line()
        if not line:
            raise _Disconnected("the server closed the connection without an answer")
        version, _, rest = line.decode("latin-1").partition(" ")
        code = rest[:3]
        if not (version.startswith("HTTP/1.") and code.isdigit() and rest[3:4] in ("", " ", "\r", "\n")):
            raise TransportError(f"the server's answer is not HTTP/1.x: {line[:40]!r}")
        return int(code), 10 if version == "HTTP/1.0" else 11

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        last = ""
        for _ in range(MAX_HEADERS + 1):
            line = self._line().decode("latin-1")
            if line in ("\r\n", "\n", ""):
                return headers
            if line[0] in " \t" and last:  # an obsolete folded continuation
                headers[last] += " " + line.strip()
                continue
            name, colon, value = line.partition(":")
            if colon:
                last = name.strip().lower()
                value = value.strip()
                headers[last] = f"{headers[last]}, {value}" if last in headers else value
        raise TransportError(f"the server sent more than {MAX_HEADERS} headers")

    def header(self, name: str) -> str:
        return self._headers_by_name.get(name, "")

    def read_into(self, buffer: memoryview) -> int:
        try:
            n = self._read_chunked(buffer) if self.chunked else self._read_plain(buffer)
        except TimeoutError as exc:
            raise TransportTimeout(f"timed out: {_cause(exc)}") from exc
        except (OSError, ValueError) as exc:
            raise TransportError(_cause(exc)) from exc
        if not n:
            self.finished = True
        return n

    def _read_plain(self, buffer: memoryview) -> int:
        if self._left is None:  # up to the connection's close
            return self._reader.readinto1(buffer)
        want = min(len(buffer), self._left)
        if not want:
            return 0
        n = self._reader.readinto1(buffer[:want])
        if not n:
            raise TransportError(f"the connection closed {self._left} bytes before the body's end")
        self._left -= n
        if not self._left:
            self.finished = True  # the whole body is read: the connection can carry the next request
        return n

    def _read_chunked(self, buffer: memoryview) -> int:
        if not self._left:
            if self._chunk_started:
                self._end_of_chunk()
            size_line = self._line()
            try:
                self._left = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise TransportError(f"a chunk of the body has a bad size line {size_line[:40]!r}") from None
            self._chunk_started = True
            if not self._left:  # the last chunk: its trailers, then the end
                self.chunked = False
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass
                return 0
        want = min(len(buffer), self._left)
        n = self._reader.readinto1(buffer[:want])
        if not n:
            raise TransportError("the connection closed inside a chunk of the body")
        self._left -= n
        return n

    def _end_of_chunk(self) -> None:
        if self._line() not in (b"\r\n", b"\n"):
            raise TransportError("a chunk of the body does not end where its size says")

    def text(self, limit_bytes: int) -> str:
        body = bytearray()
        buffer = memoryview(bytearray(min(max(limit_bytes, 1), 65536)))
        while len(body) < limit_bytes:
            n = self.read_into(buffer[: limit_bytes - len(body)])
            if not n:
                break
            body += buffer[:n]
        return body.decode("utf-8", "replace")


class SocketTransport:
    """A collector at `base_url` (`http://host:port[/prefix]`, or https with the system's CAs),
    every socket operation limited to `timeout_s` seconds. Not for concurrent use: one per node."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._socket: socket.socket | None = None
        self._reader: BufferedReader | None = None
        self._prefix = ""
        self._host_header = ""

    @contextmanager
    def get(self, path: str, headers: Mapping[str, str], left_s: float | None) -> Iterator[Reply]:
        timeout_s = self._timeout_s if left_s is None else min(self._timeout_s, left_s)
        reply = self._send(path, headers, timeout_s)
        try:
            yield reply
        finally:
            if not (reply.finished and not reply.will_close):
                self.close()  # the rest of the body is not wanted: the connection cannot be reused

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _send(self, path: str, headers: Mapping[str, str], timeout_s: float) -> _SocketReply:
        # A kept connection the server closed meanwhile fails on first use: that is retried once,
        # on a new connection (a GET changes nothing).
        for attempt in (0, 1):
            reused = self._socket is not None
            try:
                connection, reader = self._connected(timeout_s)
                connection.sendall(self._request(path, headers))
                return _SocketReply(reader)
            except TimeoutError as exc:
                self.close()
                raise TransportTimeout(f"timed out: {_cause(exc)}") from exc
            except (_Disconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if not reused or attempt:
                    raise TransportError(_cause(exc)) from exc
            except (OSError, TransportError, ValueError) as exc:
                self.close()
                raise TransportError(_cause(exc)) from exc
        raise AssertionError("unreachable")

    def _request(self, path: str, headers: Mapping[str, str]) -> bytes:
        target = self._prefix + path
        if any(c <= " " or c == "\x7f" for c in target):
            raise ValueError(f"the URL path {target!r:.80} holds a space or a control character")
        lines = [f"GET {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")

    def _connected(self, timeout_s: float) -> tuple[socket.socket, BufferedReader]:
        if self._socket is None or self._reader is None:
            parts = urlsplit(self._base_url)
            host, port = parts.hostname or "", parts.port  # ValueError: a port that is no number
            https = parts.scheme == "https"
            default_port = 443 if https else 80
            self._prefix = parts.path.rstrip("/")
            shown = f"[{host}]" if ":" in host else host
            self._host_header = shown if port in (None, default_port) else f"{shown}:{port}"
            connection = socket.create_connection((host, port or default_port), timeout_s)
            try:
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if https:
                    import ssl  # an https collector only: ssl is a tenth of collect's start

                    connection = ssl.create_default_context().wrap_socket(connection, server_hostname=host)
            except BaseException:
                connection.close()
                raise
            self._socket, self._reader = connection, connection.makefile("rb")
        self._socket.settimeout(timeout_s)
        return self._socket, self._reader


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
