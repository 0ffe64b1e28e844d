"""The dataset sink: the live file, its rotation into segments, compression and retention.

The collector calls `append(lines, now_ms, monotonic_ns)` once per poll with that poll's encoded rows
and `close()` at shutdown. Wall time (`now_ms`) names segments and dates files; every interval within
the run (rotation age, this run's segments' retention age, the housekeeping and retry schedules, the
once-a-minute warnings) is measured on the monotonic clock, so a wall clock that steps back or
forward neither delays rotation, nor silences warnings, nor deletes what this run just wrote.
Decisions come from `croft.domain.dataset.rotation`; this module gathers the facts (sizes, names,
mtimes), reads nothing but the directory and the live file's first line, and carries them out.

Durability (the fsync policy):
- each poll is one `write(2)` of whole lines to the live file (`O_APPEND`), never buffered in the
  process: once `append` returns, the rows survive a crash or `kill -9` of the collector. A write cut
  short (disk full, I/O error) is truncated away, so the file holds whole lines only, and a reader
  sees at most one torn last line, left by a kill in the middle of a write;
- the live file is not fsynced per poll (a sync every 2 s would put the disk's latency into every
  poll); the kernel writes it back within `vm.dirty_expire_centisecs` (30 s by default), which bounds
  what a power loss can take. `close()` syncs it;
- a compressed segment is fsynced before it is renamed into place, the directory after every rename
  and removal, and the plain copy is removed only after that.

One writer per directory: the writer holds the directory's lock (`croft.adapters.dataset.lock`)
from start to `close()`, so a second collector on the same directory refuses to start. Before each
poll's write it checks that its live file is still the file at its path (device and inode of its
fd against the path's): one renamed or deleted under it (by a person, or a collector that ignored
the lock) is logged, counted (`WriterCounters.live_files_lost`) and replaced by a new live file,
never written on while unlinked.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from pathlib import Path

import attrs

from croft.adapters.dataset.compressor import (
    ZSTD_LEVEL,
    SegmentCompressor,
    compressed_matches,
)
from croft.adapters.dataset.disk import OS_DISK, Disk, fsync_directory, write_all
from croft.adapters.dataset.files import first_row_ms, kind_of, shown
from croft.adapters.dataset.lock import DatasetLock
from croft.domain.dataset.rotation import (
    FileFact,
    Limits,
    LiveFile,
    Naming,
    Rotation,
    Segment,
    SegmentName,
    plan_recovery,
    plan_retention,
    plan_rotation,
    segments_on_disk,
)
from croft.errors import UserError

LOG = logging.getLogger("croft.dataset")

HOUSEKEEPING_MS = 60_000  # how often retention and compression retries look at the directory
RETRY_MS = 60_000  # a segment whose compression failed is tried again after this
LOG_EVERY_MS = 60_000  # at most one "dropping rows" line per minute
CLOSE_DRAIN_S = 10.0  # well inside the 30 s a SIGTERM'd pod gets before SIGKILL


@attrs.frozen
class WriterCounters:
    """What the writer did since it started, for /metrics."""

    rows_written: int
    rows_dropped: int
    write_failures: int
    segments_closed: int
    segments_compressed: int
    compression_failures: int
    compression_backlog: int
    segments_deleted: int
    bytes_deleted: int
    live_files_lost: int = 0
    """Times the live file was found renamed or deleted under the writer (see the module docstring)."""
    live_file_lost_ns: int | None = None
    """When that was last found (the poll's monotonic ns); None when never."""


def list_directory(directory: Path) -> list[FileFact]:
    """The regular files of `directory` with size and mtime; entries vanishing meanwhile are skipped."""
    facts = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    facts.append(FileFact(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
            except FileNotFoundError:
                continue
    return facts


def _open_live(path: Path) -> int:
    """The live file, opened to append (made when missing). O_NONBLOCK: a FIFO put there meanwhile
    fails at once (no reader) or is refused (fstat), instead of blocking the poll; a regular
    file ignores the flag. Raises OSError (EINVAL for anything but a regular file)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def _in_the_way(directory: Path) -> str | None:
    """What stops `directory` from being made: the first of it and its parents that exists and is
    not a directory (a symlink loop, a dangling symlink, a file), as a sentence; None when none."""
    for path in (*reversed(directory.parents), directory):
        kind = kind_of(path)
        if kind == "missing":
            return None
        if kind != "directory":
            return f"{shown(path)} {'is a file' if kind == 'file' else kind.partition(', not')[0]}"
    return None


class DatasetWriter:
    """Appends polls to `path` and keeps its directory rotated, compressed and within its limits.

    Raises `UserError` at start when the directory cannot be created or written. Never raises from
    `append`: what cannot be written is dropped and counted. `background=False` keeps compression on
    the caller's thread (`compress_now()`), for tests."""

    def __init__(
        self,
        path: Path,
        limits: Limits,
        *,
        level: int = ZSTD_LEVEL,
        background: bool = True,
        queue_capacity: int = 16,
        disk: Disk = OS_DISK,
        about: tuple[tuple[str, str], ...] = (),
        lock: DatasetLock | None = None,
    ) -> None:
        """`about`: what the collector was asked (`key=value` pairs), written in the directory's
        lock file for whoever finds it held (`croft.adapters.dataset.lock`); `lock`: the
        directory's lock, already taken (else it is taken here)."""
        self._path = path
        self._dir = path.parent
        self._limits = limits
        self._naming = Naming.for_live(path.name)
        self._disk = disk
        self._lock: DatasetLock | None = lock
        fd = self._open_at_start(about)
        self._fd: int | None = fd
        self.compressor = SegmentCompressor(
            self._dir, self._naming, level=level, capacity=queue_capacity, disk=disk
        )
        self._live = self._found_live(fd)
        self._known: tuple[Segment, ...] = ()
        self._retry_after: dict[SegmentName, int] = {}
        self._blocked: set[SegmentName] = set()
        self._last_write_ms: int | None = None
        self._last_write_ns: int | None = None  # monotonic
        self._closed_at_ns: dict[SegmentName, int] = {}  # this run's segments: their newest row, monotonic
        self._mono_ms = 0  # the current poll's monotonic time, ms
        self._next_housekeeping_ms: int | None = None
        self._last_drop_log_ms: int | None = None
        self._dropped_since_log = 0
        self._rows_written = self._rows_dropped = self._write_failures = 0
        self._closed = self._deleted = self._bytes_deleted = 0
        self._lost = 0
        self._lost_ns: int | None = None
        self._recover()
        if background:
            self.compressor.start()

    # --- the sink port -------------------------------------------------------------------------

    def append(self, lines: bytes, now_ms: int, monotonic_ns: int | None = None) -> int:
        """Write one poll's rows (whole lines, `\\n`-terminated) at poll time `now_ms` (unix ms) and
        `monotonic_ns` (CLOCK_MONOTONIC; None: taken to be `now_ms`, for callers with one clock);
        returns how many rows are in the live file now (0 when they were dropped)."""
        mono_ns = now_ms * 1_000_000 if monotonic_ns is None else monotonic_ns
        self._mono_ms = mono_ns // 1_000_000
        taken = [*self._blocked, *(s.name for s in self._known)]
        rotation = plan_rotation(self._live, now_ms, self._limits, taken, now_monotonic_ns=mono_ns)
        if rotation is not None:
            self._rotate(rotation, now_ms)
        self._check_live(mono_ns)
        written = self._write(lines, now_ms, mono_ns) if lines else 0
        news, failed = self.compressor.take_news()
        for segment in failed:
            self._retry_after[segment] = self._mono_ms + RETRY_MS
        if news or self._next_housekeeping_ms is None or self._mono_ms >= self._next_housekeeping_ms:
            self._housekeep(now_ms)
        return written

    def close(self) -> None:
        """Let queued compressions finish for up to CLOSE_DRAIN_S (what is left is compressed at the
        next start), sync the live file and close it."""
        self.compressor.stop(drain_s=CLOSE_DRAIN_S)
        if self._fd is not None:
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                LOG.warning("could not sync %s at close: %s", self._path, exc.strerror)
            os.close(self._fd)
            self._fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def counters(self) -> WriterCounters:
        return WriterCounters(
            rows_written=self._rows_written,
            rows_dropped=self._rows_dropped,
            write_failures=self._write_failures,
            segments_closed=self._closed,
            segments_compressed=self.compressor.compressed,
            compression_failures=self.compressor.failures,
            compression_backlog=sum(s.waiting for s in self._known),
            segments_deleted=self._deleted,
            bytes_deleted=self._bytes_deleted,
            live_files_lost=self._lost,
            live_file_lost_ns=self._lost_ns,
        )

    def compress_now(self) -> None:
        """Compress every queued segment on this thread (for a writer made with background=False)."""
        self.compressor.run_pending()

    # --- start ---------------------------------------------------------------------------------

    def _open_at_start(self, about: tuple[tuple[str, str], ...]) -> int:
        where = f"the dataset directory {shown(self._dir)}"
        fix = "choose another --dataset (DATASET_PATH) or make the directory writable"
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if (in_the_way := _in_the_way(self._dir)) is not None:
                fix = "choose another --dataset (DATASET_PATH) or fix that path"
            raise UserError(f"cannot create {where}: {in_the_way or exc.strerror}; {fix}") from exc
        kind = kind_of(self._path)
        if kind == "directory":
            raise UserError(
                f"--dataset {shown(self._path)} is a directory; give the live file's path, like "
                f"{shown(self._path / 'croft-dataset.jsonl')}"
            )
        if kind not in ("file", "missing", "is a dangling symlink"):
            # Never written into, and never renamed into a segment at rotation (/dev/null!).
            raise UserError(
                f"--dataset {shown(self._path)} {kind.partition(', not')[0]}, not a regular file; give "
                f"the live file's path, like {shown(self._dir / 'croft-dataset.jsonl')}"
            )
        if not os.access(self._dir, os.W_OK | os.X_OK):
            raise UserError(f"cannot write to {where}; {fix}")
        if self._lock is None:
            self._lock = DatasetLock.acquire(self._dir, about)
        try:
            return _open_live(self._path)
        except OSError as exc:
            self._lock.release()
            raise UserError(f"cannot open {shown(self._path)} for writing: {exc.strerror}; {fix}") from exc

    def _found_live(self, fd: int) -> LiveFile:
        """The live file open at `fd`, as found: one that holds rows holds an earlier writer's, and
        is closed at the next poll."""
        st = os.fstat(fd)
        first = first_row_ms(self._path) if st.st_size else None
        return LiveFile(
            st.st_size,
            st.st_mtime_ns // 1_000_000 if st.st_size and first is None else first,
            left_by_earlier_run=st.st_size > 0,
        )

    def _recover(self) -> None:
        segments = segments_on_disk(list_directory(self._dir), self._naming)
        complete = frozenset(
            s.name
            for s in segments
            if {"plain", "compressed"} <= s.kinds
            and compressed_matches(self._dir / self._naming.compressed(s.name), self._plain_size(s.name))
        )
        recovery = plan_recovery(segments, self._naming, complete)
        for name, why in recovery.remove:
            LOG.info("removing %s: %s", name, why)
            try:
                (self._dir / name).unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                LOG.warning("could not remove %s: %s", name, exc.strerror)
        for name, why in recovery.left_alone:
            LOG.warning("leaving %s alone: %s", name, why)
        self._known = segments_on_disk(list_directory(self._dir), self._naming)
        for segment in recovery.compress:
            self.compressor.submit(segment)

    def _plain_size(self, segment: SegmentName) -> int:
        try:
            return (self._dir / self._naming.plain(segment)).stat().st_size
        except OSError:
            return -1

    # --- each poll -----------------------------------------------------------------------------

    def _rotate(self, rotation: Rotation, now_ms: int) -> None:
        segment = rotation.segment
        names = (
            self._naming.plain(segment),
            self._naming.compressed(segment),
            self._naming.temporary(segment),
        )
        if any(os.path.lexists(self._dir / name) for name in names):
            # Something else holds this name (made since our last look, or not a file): never
            # overwrite it; the next poll picks the next name.
            self._blocked.add(segment)
            return
        try:
            self._disk.replace(self._path, self._dir / names[0])
        except OSError as exc:
            self._warn(f"could not close the live file as {names[0]} ({exc.strerror}); retrying")
            return
        LOG.info("closed %s as %s: %s", self._path.name, names[0], rotation.reason)
        if self._last_write_ms is not None:
            # Its mtime is its newest row's poll time, on the poll clock retention compares with.
            ns = self._last_write_ms * 1_000_000
            with contextlib.suppress(OSError):
                os.utime(self._dir / names[0], ns=(ns, ns))
        self._closed_at_ns[segment] = (
            self._last_write_ns if self._last_write_ns is not None else self._mono_ms * 1_000_000
        )
        self._closed += 1
        if self._fd is not None:
            os.close(self._fd)
        try:
            self._fd = _open_live(self._path)
        except OSError:
            self._fd = None  # the next write tries again, and drops its rows if it cannot
        self._live = LiveFile(0, None)
        self._last_write_ms = self._last_write_ns = None
        self._known = (*self._known, Segment(segment, (names[0],), 0, now_ms, kinds=frozenset({"plain"})))
        try:
            fsync_directory(self._dir)
        except OSError as exc:
            LOG.warning("could not sync %s: %s", self._dir, exc.strerror)
        self.compressor.submit(segment)
        self._next_housekeeping_ms = None

    def _check_live(self, mono_ns: int) -> None:
        """Start a new live file when the one open is no longer the file at its path."""
        if self._fd is None:
            return
        mine = os.fstat(self._fd)
        try:
            there = self._path.lstat()
        except FileNotFoundError:
            what = "renamed or deleted"
        except OSError:
            return  # cannot tell: the write goes on
        else:
            if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                return
            what = "replaced by another file"
        self._lost += 1
        self._lost_ns = mono_ns
        LOG.warning(
            "the live file %s was %s under this collector (another collector on this directory, or a "
            "person?): the rows written since it was last checked went with it; starting a new live "
            "file (%d times since start)",
            self._path,
            what,
            self._lost,
        )
        os.close(self._fd)
        try:
            self._fd = _open_live(self._path)
        except OSError:
            self._fd = None  # the write tries again, and drops its rows if it cannot
            self._live = LiveFile(0, None)
        else:
            self._live = self._found_live(self._fd)
        self._last_write_ms = self._last_write_ns = None

    def _write(self, lines: bytes, now_ms: int, mono_ns: int) -> int:
        rows = lines.count(b"\n")
        offset = self._live.size_bytes
        try:
            if self._fd is None:
                self._fd = _open_live(self._path)
            write_all(self._disk, self._fd, lines)
        except OSError as exc:
            self._write_failures += 1
            self._rows_dropped += rows
            self._dropped_since_log += rows
            if self._fd is not None:
                try:
                    os.ftruncate(self._fd, offset)  # whole lines only, even after a short write
                except OSError as trunc:
                    LOG.warning("could not cut a short write off %s: %s", self._path, trunc.strerror)
            why = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
            self._warn(f"dropping rows: {why} ({self._rows_dropped} dropped so far)")
            return 0
        if self._dropped_since_log:
            LOG.warning("writing %s again after dropping %d rows", self._path, self._dropped_since_log)
            self._dropped_since_log = 0
            self._last_drop_log_ms = None
        self._rows_written += rows
        self._last_write_ms, self._last_write_ns = now_ms, mono_ns
        if self._live.first_row_ms is None:
            self._live = attrs.evolve(self._live, first_row_ms=now_ms, first_row_monotonic_ns=mono_ns)
        self._live = attrs.evolve(self._live, size_bytes=offset + len(lines))
        return rows

    def _warn(self, message: str) -> None:
        """A warning about a failure that repeats every poll, at most once per LOG_EVERY_MS of the
        monotonic clock (wall time would go silent for as long as a step back)."""
        if self._last_drop_log_ms is None or self._mono_ms - self._last_drop_log_ms >= LOG_EVERY_MS:
            LOG.warning("%s", message)
            self._last_drop_log_ms = self._mono_ms

    def _housekeep(self, now_ms: int) -> None:
        """Retention, and compression of segments still plain, from a fresh look at the directory."""
        self._next_housekeeping_ms = self._mono_ms + HOUSEKEEPING_MS
        try:
            listing = list_directory(self._dir)
        except OSError as exc:
            LOG.warning("could not list %s: %s", self._dir, exc.strerror)
            return
        segments = segments_on_disk(listing, self._naming, self.compressor.busy())
        mono_ns = self._mono_ms * 1_000_000
        ages = {name: (mono_ns - at) // 1_000_000 for name, at in self._closed_at_ns.items()}
        just_written = max(self._closed_at_ns, default=None)
        plan = plan_retention(
            segments, now_ms, self._limits, live_bytes=self._live.size_bytes, ages_ms=ages, keep=just_written
        )
        gone: set[SegmentName] = set()
        for deletion in plan.delete:
            if not self.compressor.discard(deletion.segment):
                break  # it became busy since the listing: the next look goes on
            if not all(self._delete_file(name) for name in deletion.files):
                continue
            LOG.info("deleted segment %s: %s", ", ".join(deletion.files), deletion.reason)
            self._deleted += 1
            gone.add(deletion.segment)
        self._known = tuple(s for s in segments if s.name not in gone)
        for name in gone:
            self._closed_at_ns.pop(name, None)
        now = self._mono_ms
        self._retry_after = {k: v for k, v in self._retry_after.items() if v > now}
        for seg in self._known:
            if seg.waiting and not seg.busy and self._retry_after.get(seg.name, now) <= now:
                self.compressor.submit(seg.name)

    def _delete_file(self, name: str) -> bool:
        """Remove one file retention chose; True when it is gone."""
        try:
            size = (self._dir / name).stat().st_size
            (self._dir / name).unlink()
        except FileNotFoundError:
            return True
        except OSError as exc:
            LOG.warning("could not delete %s: %s", name, exc.strerror)
            return False
        self._bytes_deleted += size
        return True
