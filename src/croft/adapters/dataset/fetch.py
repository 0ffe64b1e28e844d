"""The client side of the collector's dataset endpoint: the index and byte ranges of one file, straight
from a collector (`http://host:9464`) or through the API server's pod proxy
(`https://api/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy`). Every byte of every body received is
counted in `moved_bytes`.

The HTTP client is a small port, `Transport` (see `croft.adapters.dataset.transports`): HTTP/1.1 on
a plain socket for a collector reached directly, which reads each body into one reused buffer; httpx
for the API server's proxy, which needs its credentials.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol
from urllib.parse import quote

MAX_INDEX_BYTES = 16 << 20  # an index lists a node's files, ~100 bytes each: 16 MiB is ~160,000 of them
# The most one network read puts in the buffer. Measured on three local collectors (client CPU per
# 275 MB: 64 KiB 0.22-0.33 s, 128 KiB 0.29-0.82 s, 1 MiB 0.64-0.78 s): a buffer the next write reads
# back while still in the CPU's cache beats fewer, larger calls.
READ_BYTES = 64 << 10


class FetchError(Exception):
    """A request that failed; the message is one sentence."""


class CollectorGone(FetchError):
    """The collector (or the proxy before it) did not answer, or a body ended early."""


class FileGone(FetchError):
    """The file is not on the node any more (compressed or deleted since the index): HTTP 404."""


class FileShrank(FetchError):
    """The file ends before the range asked for now (HTTP 416, or a 206 cut short at its end): it
    was replaced by a shorter one (a rotation) since the index."""


def _clipped(content_range: str, start: int, end: int) -> bool:
    """Whether a 206's Content-Range answers bytes `start`..`end` cut short at the file's end:
    `bytes <start>-<last>/<size>` with last < end and size = last + 1 (RFC 9110, 14.1.2)."""
    unit, _, spec = content_range.partition(" ")
    first, _, rest = spec.partition("-")
    last, _, size = rest.partition("/")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and size.isdigit()):
        return False
    return int(first) == start and int(last) < end and int(size) == int(last) + 1


class OutOfTime(FetchError):
    """The whole collect ran past its deadline, or was stopped."""


class TransportError(Exception):
    """The HTTP client could not connect, send or read; the message is the cause in a few words."""


class TransportTimeout(TransportError):
    """The HTTP client waited longer than its timeout."""


class Reply(Protocol):
    """One answer being read."""

    status: int

    def header(self, name: str) -> str:
        """The header's value (`name` in lower case), "" when absent."""
        ...

    def read_into(self, buffer: memoryview) -> int:
        """Put the next bytes of the body at the start of `buffer` (one network read at most); 0 at
        the body's end. Raises `TransportError` when the body ends before its declared length."""
        ...

    def text(self, limit_bytes: int) -> str:
        """Up to `limit_bytes` of the rest of the body, decoded leniently (for error messages)."""
        ...


class Transport(Protocol):
    """GET one path of a collector's endpoint; `left_s` (seconds, or None) caps every timeout."""

    def get(
        self, path: str, headers: Mapping[str, str], left_s: float | None
    ) -> AbstractContextManager[Reply]: ...


class Deadline:
    """The monotonic instant by which the whole collect must be done (`seconds` after it is made);
    `None` seconds: no deadline. `stop()` makes it pass now (an interrupted collect)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._at = None if seconds is None else time.monotonic() + seconds
        self.stopped = False

    def left_s(self) -> float | None:
        """Seconds left (never below 0), or None without a deadline."""
        if self.stopped:
            return 0.0
        return None if self._at is None else max(self._at - time.monotonic(), 0.0)

    def passed(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0

    def stop(self) -> None:
        self.stopped = True


NO_DEADLINE = Deadline(None)


class HttpDatasetSource:
    """One collector's dataset endpoint under `base` (a URL path prefix for `transport`).

    Bodies are asked for and accepted only as identity (`Accept-Encoding: identity`): the bytes of
    a range are the file's bytes, stored as they come. The index is read up to `MAX_INDEX_BYTES`;
    every read stops at `deadline`. Chunks are views of one buffer, valid until the next chunk."""

    def __init__(
        self,
        transport: Transport,
        base: str,
        what: str,
        deadline: Deadline = NO_DEADLINE,
        max_index_bytes: int = MAX_INDEX_BYTES,
    ) -> None:
        self._transport = transport
        self._base = base.rstrip("/")
        self.what = what  # names the collector in errors, e.g. "pod croft/croft-collector-x7k2p"
        self.moved_bytes = 0
        self._deadline = deadline
        self._max_index_bytes = max_index_bytes
        self._buffer = memoryview(bytearray(READ_BYTES))

    def index(self) -> bytes:
        """The endpoint's index (JSON bytes)."""
        with self._get("/dataset/", {}) as reply:
            if reply.status != 200:
                raise self._status_error(reply, "the dataset index")
            too_big = FetchError(
                f"{self.what}'s dataset index is larger than {self._max_index_bytes} bytes, "
                "more than any collector's index; check what answers at that address"
            )
            declared = reply.header("content-length")
            if declared.isdigit() and int(declared) > self._max_index_bytes:
                raise too_big
            body = bytearray()
            for chunk in self._counted(reply):
                body += chunk
                if len(body) > self._max_index_bytes:
                    raise too_big
            return bytes(body)

    @contextmanager
    def byte_range(self, name: str, start: int, end: int) -> Iterator[Iterator[memoryview]]:
        """Bytes `start`..`end` (inclusive) of `name`, as chunks; the whole body or `CollectorGone`."""
        headers = {"Range": f"bytes={start}-{end}"}
        with self._get(f"/dataset/{quote(name, safe='')}", headers) as reply:
            if reply.status == 404:
                raise FileGone(f"{name} is no longer on {self.what}")
            if reply.status == 416:
                raise FileShrank(f"{name} on {self.what} is shorter than {start + 1} bytes now")
            if reply.status == 206:
                answered = reply.header("content-range")
                if _clipped(answered, start, end):
                    # The file ends before `end` now (rotated into a segment, a shorter one in its
                    # place, since the index): changed meanwhile, as a 416 says.
                    raise FileShrank(f"{name} on {self.what} is shorter than {end + 1} bytes now")
                if not answered.startswith(f"bytes {start}-{end}/"):
                    raise CollectorGone(f"{self.what} answered {name} with another range than asked")
            elif reply.status != 200 or start != 0:
                raise self._status_error(reply, name)
            yield self._exactly(reply, name, end - start + 1)

    def _exactly(self, reply: Reply, name: str, length: int) -> Iterator[memoryview]:
        got = 0
        for chunk in self._counted(reply):
            take = chunk[: length - got]
            got += len(take)
            if take:
                yield take
            if got >= length:
                return
        raise CollectorGone(f"{self.what} stopped sending {name} after {got} of {length} bytes")

    def _counted(self, reply: Reply) -> Iterator[memoryview]:
        """The body's bytes as they arrive (each network read, so a trickle still meets the
        deadline check)."""
        while True:
            try:
                n = reply.read_into(self._buffer)
            except TransportTimeout as exc:
                self._check_deadline()
                raise CollectorGone(f"{self.what} went away mid-transfer ({exc})") from exc
            except TransportError as exc:
                raise CollectorGone(f"{self.what} went away mid-transfer ({exc})") from exc
            if not n:
                return
            self.moved_bytes += n
            self._check_deadline()
            yield self._buffer[:n]

    def _check_deadline(self) -> None:
        if self._deadline.stopped:
            raise OutOfTime(f"croft collect was interrupted while reading {self.what}")
        if self._deadline.passed():
            raise OutOfTime(
                f"croft collect ran past its --deadline of {self._deadline.seconds:g} s while reading "
                f"{self.what}; give a larger --deadline or check the network"
            )

    @contextmanager
    def _get(self, path: str, headers: dict[str, str]) -> Iterator[Reply]:
        self._check_deadline()
        headers = {**headers, "Accept-Encoding": "identity"}
        try:
            with self._transport.get(self._base + path, headers, self._deadline.left_s()) as reply:
                encoding = reply.header("content-encoding").strip().lower()
                if encoding not in ("", "identity"):
                    raise CollectorGone(
                        f"{self.what} answered {path.rpartition('/')[2] or 'the dataset index'} with "
                        f"Content-Encoding {encoding[:40]!r}, which croft asked not to get (identity only)"
                    )
                yield reply
        except TransportTimeout as exc:
            self._check_deadline()
            raise CollectorGone(f"cannot reach {self.what} ({exc})") from exc
        except TransportError as exc:
            raise CollectorGone(f"cannot reach {self.what} ({exc})") from exc

    def _status_error(self, reply: Reply, what: str) -> FetchError:
        try:
            text = reply.text(4096).strip()
        except TransportError:
            text = ""
        first = text.splitlines()[0][:300] if text else ""
        if reply.status in (401, 403, 503) and first.startswith("croft: "):
            # the collector's own refusal (croft run --auth kubernetes): it says why and what to do
            return FetchError(f"{self.what} refused reading {what}: {first.removeprefix('croft: ')}")
        if reply.status in (401, 403):
            return FetchError(
                f"the Kubernetes API denied reading {what} of {self.what} (HTTP {reply.status}): "
                "bind the Role croft-collect to your user (see deploy/kubernetes/collector.yaml)"
            )
        return CollectorGone(f"{self.what} answered {what} with HTTP {reply.status} {first}".rstrip())
