"""The client side of the collector's dataset endpoint, over httpx: the index and byte ranges of one
file, straight from a collector (`http://host:9464`) or through the API server's pod proxy
(`https://api/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy`). Every byte of every body received is
counted in `moved_bytes`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import httpx

MAX_INDEX_BYTES = 16 << 20  # an index lists a node's files, ~100 bytes each: 16 MiB is ~160,000 of them


class FetchError(Exception):
    """A request that failed; the message is one sentence."""


class CollectorGone(FetchError):
    """The collector (or the proxy before it) did not answer, or a body ended early."""


class FileGone(FetchError):
    """The file is not on the node any more (compressed or deleted since the index): HTTP 404."""


class FileShrank(FetchError):
    """The range starts past the file's end now (HTTP 416): the file was replaced by a shorter one."""


class OutOfTime(FetchError):
    """The whole collect ran past its deadline."""


class Deadline:
    """The monotonic instant by which the whole collect must be done (`seconds` after it is made);
    `None` seconds: no deadline."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._at = None if seconds is None else time.monotonic() + seconds

    def left_s(self) -> float | None:
        """Seconds left (never below 0), or None without a deadline."""
        return None if self._at is None else max(self._at - time.monotonic(), 0.0)

    def passed(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0


NO_DEADLINE = Deadline(None)


class HttpDatasetSource:
    """One collector's dataset endpoint under `base` (a URL path prefix on `http`'s base URL).

    Bodies are asked for and accepted only as identity (`Accept-Encoding: identity`): the bytes of
    a range are the file's bytes, stored as they come. The index is read up to `MAX_INDEX_BYTES`;
    every read stops at `deadline`."""

    def __init__(
        self,
        http: httpx.Client,
        base: str,
        what: str,
        deadline: Deadline = NO_DEADLINE,
        max_index_bytes: int = MAX_INDEX_BYTES,
    ) -> None:
        self._http = http
        self._base = base.rstrip("/")
        self.what = what  # names the collector in errors, e.g. "pod croft/croft-collector-x7k2p"
        self.moved_bytes = 0
        self._deadline = deadline
        self._max_index_bytes = max_index_bytes

    def index(self) -> bytes:
        """The endpoint's index (JSON bytes)."""
        with self._get("/dataset/", {}) as response:
            if response.status_code != 200:
                raise self._status_error(response, "the dataset index")
            too_big = FetchError(
                f"{self.what}'s dataset index is larger than {self._max_index_bytes} bytes, "
                "more than any collector's index; check what answers at that address"
            )
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max_index_bytes:
                raise too_big
            body = bytearray()
            for chunk in self._counted(response):
                body += chunk
                if len(body) > self._max_index_bytes:
                    raise too_big
            return bytes(body)

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
        """The body's bytes as they arrive (each network read, so a trickle still meets the
        deadline check)."""
        try:
            for chunk in response.iter_raw():
                self.moved_bytes += len(chunk)
                self._check_deadline()
                yield chunk
        except httpx.TimeoutException as exc:
            self._check_deadline()
            raise CollectorGone(f"{self.what} went away mid-transfer ({_cause(exc)})") from exc
        except httpx.HTTPError as exc:
            raise CollectorGone(f"{self.what} went away mid-transfer ({_cause(exc)})") from exc

    def _check_deadline(self) -> None:
        if self._deadline.passed():
            raise OutOfTime(
                f"croft collect ran past its --deadline of {self._deadline.seconds:g} s while reading "
                f"{self.what}; give a larger --deadline or check the network"
            )

    @contextmanager
    def _get(self, path: str, headers: dict[str, str]) -> Iterator[httpx.Response]:
        self._check_deadline()
        headers = {**headers, "Accept-Encoding": "identity"}
        left = self._deadline.left_s()
        timeout = self._http.timeout
        if left is not None:
            parts = {k: min(v, left) if v is not None else left for k, v in timeout.as_dict().items()}
            timeout = httpx.Timeout(**parts)
        try:
            with self._http.stream("GET", self._base + path, headers=headers, timeout=timeout) as response:
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise CollectorGone(
                        f"{self.what} answered {path.rpartition('/')[2] or 'the dataset index'} with "
                        f"Content-Encoding {encoding[:40]!r}, which croft asked not to get (identity only)"
                    )
                yield response
        except httpx.TimeoutException as exc:
            self._check_deadline()
            raise CollectorGone(f"cannot reach {self.what} ({_cause(exc)})") from exc
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
