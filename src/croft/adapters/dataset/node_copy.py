"""Carrying out one node's copy plan (`croft.domain.dataset.transfer`) in `<out>/<node>/`.

A segment (and a first copy of the live file) is written to a hidden `.<name>.part`, fsynced, and
renamed into place, the directory fsynced after; an interrupted copy leaves the part file, which the
next collect continues with a Range request. The live copy is extended in place with whole lines
only, so at every instant it is a prefix of the node's file that croft stats reads without a torn
line. Each continuation first fetches again the last `OVERLAP_BYTES` it holds and compares them: a
node whose live file was replaced (the collector restarted and rotated) is copied from the start.
Landed files get the node's mtime, so an unchanged live file costs no request.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

import attrs

from croft.adapters.dataset.disk import OS_DISK, Disk, fsync_directory, write_all
from croft.adapters.dataset.fetch import FileGone, FileShrank
from croft.domain.dataset.http import BadIndex, Index, decode_index
from croft.domain.dataset.naming import Naming
from croft.domain.dataset.transfer import (
    Fetch,
    LocalFile,
    index_problem,
    part_name,
    plan_node,
    saved_name,
    segment_candidates,
)

_READ_BYTES = 1 << 20
# A chunk of a body: a view of the source's buffer is valid only until the next chunk is asked for.
Chunk = bytes | memoryview
_P = ParamSpec("_P")
_R = TypeVar("_R")


class Source(Protocol):
    """A collector's dataset endpoint (see `croft.adapters.dataset.fetch.HttpDatasetSource`)."""

    what: str
    moved_bytes: int

    def index(self) -> bytes: ...

    def byte_range(
        self, name: str, start: int, end: int
    ) -> contextlib.AbstractContextManager[Iterator[Chunk]]: ...


class NotContinued(Exception):
    """The node's file no longer begins with the local copy (or got shorter than it)."""


class RefusedNode(Exception):
    """The collector's index cannot be used at all; the message says why."""


class LocalWriteError(Exception):
    """The local copy could not be written (disk full, I/O error, something in the way); the message
    is one sentence. What landed before stays, whole; nothing torn is left under a final name."""


@attrs.define
class NodeResult:
    """What one node's copy did: files landed or extended, payload bytes written, notes for the user."""

    files: int = 0
    bytes_written: int = 0
    unchanged: int = 0
    refused: list[tuple[str, str]] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)


def local_files(directory: Path) -> list[LocalFile]:
    """The regular files directly in `directory` (symlinks and directories ignored)."""
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                found.append(LocalFile(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
    return found


class NodeCopy:
    """Copies one node's dataset from `source` into `directory` (created if needed, never through a
    symlink). `on_plan(total)` is told the payload bytes the plan wants, `on_bytes(n)` each that
    arrives (a progress bar)."""

    def __init__(
        self,
        source: Source,
        directory: Path,
        on_bytes: Callable[[int], None] = lambda _: None,
        on_plan: Callable[[int], None] = lambda _: None,
        disk: Disk = OS_DISK,
    ) -> None:
        self._source = source
        self._dir = directory
        self._disk = disk
        self._on_bytes = on_bytes
        self._on_plan = on_plan
        self.result = NodeResult()

    def run(self) -> NodeResult:
        """Plan and copy; raises `RefusedNode`, `LocalWriteError` when the local copy cannot be
        written, or `FetchError` when the collector goes away (what landed stays, part files are
        continued next time)."""
        try:
            index = decode_index(self._source.index())
        except BadIndex as exc:
            raise RefusedNode(str(exc)) from None
        if (problem := index_problem(index)) is not None:
            raise RefusedNode(f"refused its dataset index: {problem}")
        if self._dir.is_symlink():
            raise RefusedNode(f"{self._dir} is a symlink; croft collect writes only into real directories")
        try:
            return self._copy(index)
        except OSError as exc:
            raise LocalWriteError(local_write_sentence(exc, self._dir)) from None

    def _copy(self, index: Index) -> NodeResult:
        self._dir.mkdir(parents=True, exist_ok=True)
        naming = index.naming
        plan = plan_node(index, local_files(self._dir))
        self.result.unchanged = len(plan.unchanged)
        self.result.refused = list(plan.refused)
        self._on_plan(sum(f.size_bytes - f.have_bytes for f in plan.fetches))
        for stale in plan.stale_parts:
            (self._dir / stale).unlink(missing_ok=True)
        for fetch in plan.fetches:
            try:
                try:
                    self._fetch(fetch, naming)
                except NotContinued as exc:
                    if not fetch.live:
                        raise
                    self.result.notes.append(f"{fetch.name} {exc}: copied again from the start")
                    self._fetch(Fetch(fetch.name, fetch.size_bytes, fetch.mtime_ms, 0, live=True,
                                      replaces=fetch.name, why=str(exc)), naming)  # fmt: skip
            except FileGone:
                self.result.notes.append(f"{fetch.name} left the node meanwhile; the next collect catches up")
            except (FileShrank, NotContinued):
                (self._dir / part_name(fetch.name)).unlink(missing_ok=True)
                self.result.notes.append(
                    f"{fetch.name} changed on the node meanwhile; the next collect copies it"
                )
        return self.result

    # --- one file ---------------------------------------------------------------------------------

    def _fetch(self, fetch: Fetch, naming: Naming) -> None:
        if fetch.size_bytes == 0 and fetch.have_bytes == 0:
            chunks: contextlib.AbstractContextManager[Iterator[Chunk]] = contextlib.nullcontext(iter(()))
        else:
            start = fetch.have_bytes - fetch.overlap_bytes
            chunks = self._source.byte_range(fetch.name, start, fetch.size_bytes - 1)
        try:
            if fetch.into_part:
                self._into_part(fetch, chunks, naming)
            else:
                self._append(fetch, chunks)
        except FileShrank as exc:
            if fetch.have_bytes:
                raise NotContinued("got shorter than the local copy") from exc
            raise

    def _into_part(
        self, fetch: Fetch, chunks: contextlib.AbstractContextManager[Iterator[Chunk]], naming: Naming
    ) -> None:
        part = self._dir / part_name(fetch.name)
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, fetch.have_bytes)
            with chunks as stream:
                body = self._verified(stream, fetch, lambda k: os.pread(fd, k, fetch.have_bytes - k))
                offset = started = fetch.have_bytes
                for chunk in body:
                    _named(part, write_all, self._disk, fd, chunk, offset)
                    offset += len(chunk)
                    self._count(len(chunk))
                    if offset - started >= WRITEBACK_BYTES:
                        _start_writeback(fd, started, offset - started)
                        started = offset
            if fetch.live:  # whole lines only: a poll being written when the index was read waits
                os.ftruncate(fd, _whole_lines(fd, offset))
            try:
                _named(part, self._disk.fsync, fd)
            except OSError:
                # After a failed fsync the kernel may have dropped pages it could not write: what the
                # part holds is unknown, so it is not continued either.
                part.unlink(missing_ok=True)
                raise
        finally:
            os.close(fd)
        if fetch.replaces is not None:
            self._set_aside(fetch.replaces, naming)
        target = self._dir / fetch.name
        _named(target, self._disk.replace, part, target)
        os.utime(target, ns=(fetch.mtime_ms * 1_000_000, fetch.mtime_ms * 1_000_000), follow_symlinks=False)
        if fetch.supersedes is not None:
            (self._dir / fetch.supersedes).unlink(missing_ok=True)
        fsync_directory(self._dir)
        self.result.files += 1

    def _append(self, fetch: Fetch, chunks: contextlib.AbstractContextManager[Iterator[Chunk]]) -> None:
        target = self._dir / fetch.name
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size != fetch.have_bytes:
                raise NotContinued("changed locally while planned")
            carry, end = b"", size
            with chunks as stream:
                for chunk in self._verified(stream, fetch, lambda k: os.pread(fd, k, size - k)):
                    data = carry + chunk
                    cut = data.rfind(b"\n") + 1
                    if cut:
                        self._append_lines(target, fd, data[:cut], end)
                        end += cut
                        self._count(cut)
                    carry = data[cut:]
            _named(target, self._disk.fsync, fd)
        finally:
            os.close(fd)
        os.utime(target, ns=(fetch.mtime_ms * 1_000_000, fetch.mtime_ms * 1_000_000), follow_symlinks=False)
        self.result.files += 1

    def _append_lines(self, target: Path, fd: int, lines: bytes, size: int) -> None:
        """Append whole `lines` to the live copy of `size` bytes (O_APPEND: in order); a write that
        fails part way is cut off again, so the copy keeps ending on a whole line."""
        try:
            _named(target, write_all, self._disk, fd, lines)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError as cut:
                import logging  # a rare path: kept off collect's start

                logging.getLogger("croft.collect").warning(
                    "could not cut a torn write off %s: %s", target, cut.strerror
                )
            raise

    def _verified(
        self, stream: Iterator[Chunk], fetch: Fetch, local_tail: Callable[[int], bytes]
    ) -> Iterator[Chunk]:
        """The chunks after the overlap, once the overlap matched the local copy's last bytes."""
        k = fetch.overlap_bytes
        if not k:
            yield from stream
            return
        head = b""
        for chunk in stream:
            if len(head) < k:
                need = k - len(head)
                head += chunk[:need]
                chunk = chunk[need:]
                if len(head) == k and head != local_tail(k):
                    raise NotContinued("no longer continues the local copy")
            if chunk:
                yield chunk
        if len(head) < k:
            raise NotContinued("ended before the local copy's end")

    def _count(self, n: int) -> None:
        self.result.bytes_written += n
        self._on_bytes(n)

    # --- a replaced copy --------------------------------------------------------------------------

    def _set_aside(self, name: str, naming: Naming) -> None:
        """Before the copy `name` is replaced: drop it when a local segment begins with it (its rows
        are there), else keep it under a saved name. Never drops rows held nowhere else."""
        from croft.adapters.dataset.files import first_row_ms  # a rare path: kept off collect's start

        old = self._dir / name
        if not old.exists():
            return
        first = first_row_ms(old)
        others = [f.name for f in local_files(self._dir) if f.name != name]
        # By content: the segment's name says its first row's second only while the clock ran
        # forward, so every local segment may hold it (the likeliest first).
        for candidate in segment_candidates(-1 if first is None else first, others, naming):
            if _begins_with(self._dir / candidate, old):
                old.unlink()
                self.result.notes.append(f"the earlier copy of {name} is in {candidate}")
                return
        stamp_ms = first if first is not None else old.stat().st_mtime_ns // 1_000_000
        saved = saved_name(naming, stamp_ms, others)
        self._disk.replace(old, self._dir / saved)
        self.result.notes.append(f"the earlier copy of {name}, in no segment here, is kept as {saved}")


# Every WRITEBACK_BYTES a part file grows, the kernel is asked to start writing them to disk, so that
# the fsync before the rename finds little left to write: on benchmarks/collect.py's 275 MB the
# fsyncs took 0.28 s a collect (three nodes' sum) without it, 0.10 s with it.
WRITEBACK_BYTES = 4 << 20


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing `length` bytes at `offset` of `fd` to disk, without waiting. Linux's
    POSIX_FADV_DONTNEED starts the writeback of the range's dirty pages, then drops only pages that
    are clean already: the ones just written are dirty or being written, and stay cached. A hint:
    an error is ignored (a write error still comes from the fsync, which this does not consume)."""
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _named(path: Path, call: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """`call(...)`, with `path` put into an `OSError` that names no file (writes on a descriptor)."""
    try:
        return call(*args, **kwargs)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EISDIR: "a directory is in the way",
    errno.ENOTDIR: "a file is in the way of a directory",
    errno.ELOOP: "a symlink is in the way (or a loop of them)",
    errno.EIO: "an I/O error",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def local_write_sentence(exc: OSError, directory: Path) -> str:
    """One sentence for a local write that failed: where, and why in words."""
    where = exc.filename2 or exc.filename or directory  # a rename names its target second
    why = _WHY.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return f"cannot write {where}: {why}"


def _whole_lines(fd: int, size: int) -> int:
    """The size of the longest prefix of the first `size` bytes of `fd` that ends with a newline."""
    end = size
    while end > 0:
        start = max(end - _READ_BYTES, 0)
        block = os.pread(fd, end - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def _begins_with(segment: Path, prefix_file: Path) -> bool:
    """Whether the (plain or zstd) `segment`'s content begins with the whole of `prefix_file`."""
    from croft.adapters.dataset.files import Damaged, zstd_blocks

    blocks = zstd_blocks(segment) if segment.name.endswith(".zst") else _plain_blocks(segment)
    with prefix_file.open("rb") as want:
        for block in blocks:
            if isinstance(block, Damaged):
                return False
            expected = want.read(len(block))
            if expected != block[: len(expected)]:
                return False
            if len(expected) < len(block):
                return True  # the prefix ended inside this block
        return not want.read(1)


def _plain_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while block := f.read(_READ_BYTES):
            yield block
