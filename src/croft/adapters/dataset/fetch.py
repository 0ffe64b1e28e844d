"""The client side of the collector's dataset endpoint, over httpx: the index and byte ranges of one
file, straight from a collector (`http://host:9464`) or through the API server's pod proxy
(`https://api/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy`). Every byte of every body received is
counted in `moved_bytes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import httpx

CHUNK_BYTES = 1 << 20


class FetchError(Exception):
    """A request that failed; the message is one sentence."""


class CollectorGone(FetchError):
    """The collector (or the proxy before it) did not answer, or a body ended early."""


class FileGone(FetchError):
    """The file is not on the node any more (compressed or deleted since the index): HTTP 404."""


class FileShrank(FetchError):
    """The range starts past the file's end now (HTTP 416): the file was replaced by a shorter one."""


class HttpDatasetSource:
    """One collector's dataset endpoint under `base` (a URL path prefix on `http`'s base URL)."""

    def __init__(self, http: httpx.Client, base: str, what: str) -> None:
        self._http = http
        self._base = base.rstrip("/")
        self.what = what  # names the collector in errors, e.g. "pod croft/croft-collector-x7k2p"
        self.moved_bytes = 0

    def index(self) -> bytes:
        """The endpoint's index (JSON bytes)."""
        with self._get("/dataset/", {}) as response:
            if response.status_code != 200:
                raise self._status_error(response, "the dataset index")
            return b"".join(self._counted(response))

    @contextmanager
    def byte_range(self, name: str, start: int, end: int) -> Iterator[Iterator[bytes]]:
        """Bytes `start`..`end` (inclusive) of `name`, as chunks; the whole body or `CollectorGone`."""
        headers = {"Range": f"bytes={start}-{end}"}
        with self._get(f"/dataset/{quote(name, safe='')}", headers) as response:
            if response.status_code == 404:
                raise FileGone(f"{name} is no longer on {self.what}")
            if response.status_code == 416:
                raise FileShrank(f"{name} on {self.what} is shorter than {start + 1} bytes now")
            if response.status_code == 206:
                expected = f"bytes {start}-{end}/"
                if not response.headers.get("content-range", "").startswith(expected):
                    raise CollectorGone(f"{self.what} answered {name} with another range than asked")
            elif response.status_code != 200 or start != 0:
                raise self._status_error(response, name)
            yield self._exactly(response, name, end - start + 1)

    def _exactly(self, response: httpx.Response, name: str, length: int) -> Iterator[bytes]:
        got = 0
        for chunk in self._counted(response):
            take = chunk[: length - got]
            got += len(take)
            if take:
                yield take
            if got >= length:
                return
        raise CollectorGone(f"{self.what} stopped sending {name} after {got} of {length} bytes")

    def _counted(self, response: httpx.Response) -> Iterator[bytes]:
        try:
            for chunk in response.iter_raw(CHUNK_BYTES):
                self.moved_bytes += len(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            raise CollectorGone(f"{self.what} went away mid-transfer ({_cause(exc)})") from exc

    @contextmanager
    def _get(self, path: str, headers: dict[str, str]) -> Iterator[httpx.Response]:
        try:
            with self._http.stream("GET", self._base + path, headers=headers) as response:
                yield response
        except httpx.HTTPError as exc:
            raise CollectorGone(f"cannot reach {self.what} ({_cause(exc)})") from exc

    def _status_error(self, response: httpx.Response, what: str) -> FetchError:
        response.read()
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        if response.status_code in (401, 403):
            return FetchError(
                f"the Kubernetes API denied reading {what} of {self.what} (HTTP {response.status_code}): "
                "bind the Role croft-collect to your user (see deploy/kubernetes/collector.yaml)"
            )
        return CollectorGone(f"{self.what} answered {what} with HTTP {response.status_code} {text}".rstrip())


def _cause(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
