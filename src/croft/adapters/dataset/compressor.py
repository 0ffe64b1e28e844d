"""Closed segments compressed with zstd on a thread of their own, so a poll never waits on it.

A segment is compressed to a hidden temporary name, its summary appended
(`croft.adapters.dataset.summaries`), synced, renamed to `<segment>.jsonl.zst` (the
plain file's mtime carried over, so retention still sees when its newest row was written), and only
then is the plain copy removed. A failure (disk full, I/O error) removes the temporary, leaves the
plain segment where it was and is reported; the writer submits it again later.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path

import zstandard

from croft.adapters.dataset.disk import OS_DISK, Disk, fsync_directory, write_all
from croft.adapters.dataset.summaries import frame_bytes, summarize
from croft.domain.dataset.rotation import Naming, SegmentName

LOG = logging.getLogger("croft.dataset")

# Chosen by `benchmarks/rotation.py`: level 3 gives 14.6x on the generated mix (20x on rows recorded
# on a real host) at ~450 MB/s of one core, so a 1 GiB segment takes ~3 s and a backlog after an
# outage clears fast. Level 6 gives 17.5x for 3.5x the CPU, level 9 19x for 4.5x, 19 23x for 300x.
ZSTD_LEVEL = 3
CHUNK_BYTES = 1 << 20
# The compression thread runs at the lowest CPU priority: it has an hour before the next segment
# closes, the poll thread has 2 s.
COMPRESSION_NICE = 19


class Stopped(Exception):
    """Compression was asked to stop; the plain segment is left for the next run."""


def compress_segment(
    directory: Path,
    naming: Naming,
    segment: SegmentName,
    level: int = ZSTD_LEVEL,
    should_stop: Callable[[], bool] = lambda: False,
    disk: Disk = OS_DISK,
    summaries: bool = True,
) -> int:
    """Compress one closed segment in place, its summary appended (`summaries`); returns the
    compressed size in bytes.

    Raises `FileNotFoundError` when the plain segment is gone, `Stopped` when `should_stop()` turned
    true, `OSError`/`zstandard.ZstdError` on failure; in every case no temporary is left behind and
    the plain segment is untouched."""
    plain = directory / naming.plain(segment)
    temporary = directory / naming.temporary(segment)
    final = directory / naming.compressed(segment)
    with plain.open("rb") as src:
        facts = os.fstat(src.fileno())
        try:
            dst = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                # The frame records the plain size and a checksum: a start-up check and the readers
                # can tell a complete compressed segment from a damaged one.
                cobj = zstandard.ZstdCompressor(level=level, write_checksum=True).compressobj(
                    size=facts.st_size
                )
                crc, size = 0, 0
                while chunk := src.read(CHUNK_BYTES):
                    if should_stop():
                        raise Stopped(naming.plain(segment))
                    out = cobj.compress(chunk)
                    crc, size = zlib.crc32(out, crc), size + len(out)
                    write_all(disk, dst, out)
                out = cobj.flush()
                crc, size = zlib.crc32(out, crc), size + len(out)
                write_all(disk, dst, out)
                if summaries:
                    # The segment's summary, in a skippable frame after the data (readers that
                    # stop after the first frame, and zstd -dc, never see it).
                    state = _summary_state(plain)
                    if should_stop():
                        raise Stopped(naming.plain(segment))
                    if state is not None:
                        write_all(disk, dst, frame_bytes(state, size, crc))
                disk.fsync(dst)
            finally:
                os.close(dst)
            os.utime(temporary, ns=(facts.st_atime_ns, facts.st_mtime_ns))
            disk.replace(temporary, final)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
    size = final.stat().st_size
    fsync_directory(directory)
    plain.unlink()
    fsync_directory(directory)
    return size


def _summary_state(plain: Path) -> dict[str, object] | None:
    """The plain segment's summary state; None (the segment is written without one, and readers
    scan it) when it cannot be read to the end."""
    try:
        return summarize(plain, compressed=False)
    except (OSError, ValueError) as exc:
        LOG.warning("could not summarize %s (%s); it is written without a summary", plain.name, exc)
        return None


def compressed_matches(compressed: Path, plain_size: int) -> bool:
    """Whether a compressed segment's frame says it holds `plain_size` bytes (start-up check of a
    compressed file found beside its plain copy). False for a file that is not a zstd frame."""
    try:
        with compressed.open("rb") as f:
            header = f.read(18)
        return bool(zstandard.frame_content_size(header) == plain_size)
    except (OSError, zstandard.ZstdError):
        return False


class SegmentCompressor:
    """A bounded queue of closed segments and the one thread that compresses them.

    `submit` never blocks: a full queue refuses, and the writer submits the segment again at its
    next look at the directory. `discard` and the thread's claim of a segment take the same lock, so
    retention never deletes the segment being compressed. `start()` runs the thread; without it
    (tests), `run_pending()` compresses the queue on the caller's thread."""

    def __init__(
        self,
        directory: Path,
        naming: Naming,
        *,
        level: int = ZSTD_LEVEL,
        capacity: int = 16,
        nice: int = COMPRESSION_NICE,
        disk: Disk = OS_DISK,
    ) -> None:
        self._directory = directory
        self._disk = disk
        self._naming = naming
        self._level = level
        self._capacity = capacity
        self._nice = nice
        self._cond = threading.Condition()
        self._queue: deque[SegmentName] = deque()
        self._busy: SegmentName | None = None
        self._stopping = False
        self._draining = False
        self._failed: list[SegmentName] = []
        self._news = False
        self._thread: threading.Thread | None = None
        self.compressed = 0
        self.failures = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="croft-compress", daemon=True)
        self._thread.start()

    def submit(self, segment: SegmentName) -> bool:
        """Queue `segment`; False when the queue is full (or it is already queued or busy)."""
        with self._cond:
            if segment == self._busy or segment in self._queue or len(self._queue) >= self._capacity:
                return False
            self._queue.append(segment)
            self._cond.notify()
            return True

    def discard(self, segment: SegmentName) -> bool:
        """Take `segment` out of the queue so it may be deleted; False while it is being compressed."""
        with self._cond:
            if segment == self._busy:
                return False
            with contextlib.suppress(ValueError):
                self._queue.remove(segment)
            return True

    def busy(self) -> SegmentName | None:
        with self._cond:
            return self._busy

    def waiting(self) -> int:
        """Segments queued or being compressed."""
        with self._cond:
            return len(self._queue) + (self._busy is not None)

    def take_news(self) -> tuple[bool, tuple[SegmentName, ...]]:
        """(whether anything finished since the last call, the segments that failed since then)."""
        with self._cond:
            news, failed = self._news, tuple(self._failed)
            self._news, self._failed = False, []
            return news, failed

    def run_pending(self) -> None:
        """Compress every queued segment on the caller's thread (for a writer without the thread)."""
        while self._claim(wait=False):
            self._compress_claimed()

    def stop(self, drain_s: float = 0.0) -> None:
        """Stop the thread: what is queued still gets up to `drain_s` seconds, then a compression
        in progress is abandoned (its plain segment stays for the next run)."""
        with self._cond:
            self._draining = True
            self._cond.notify_all()
        if self._thread is not None and drain_s > 0:
            self._thread.join(drain_s)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10.0)

    def _claim(self, *, wait: bool) -> bool:
        with self._cond:
            while wait and not self._queue and not self._stopping and not self._draining:
                self._cond.wait()
            if self._stopping or not self._queue:
                return False
            self._busy = self._queue.popleft()
            return True

    def _compress_claimed(self) -> None:
        segment = self._busy
        assert segment is not None
        name = self._naming.plain(segment)
        done = failed = False
        try:
            size = compress_segment(
                self._directory, self._naming, segment, self._level, lambda: self._stopping, self._disk
            )
            done = True
            LOG.info("compressed %s to %d bytes", name, size)
        except (FileNotFoundError, Stopped):
            pass  # deleted meanwhile, or shutting down: nothing to report
        except (OSError, zstandard.ZstdError) as exc:
            failed = True
            LOG.warning("could not compress %s (%s); the plain segment stays and is retried", name, exc)
        with self._cond:
            self._busy = None
            self._news = True
            self.compressed += done
            self.failures += failed
            if failed:
                self._failed.append(segment)

    def _run(self) -> None:
        with contextlib.suppress(OSError):
            # Linux keeps a nice value per thread: this lowers only the compression thread.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._nice)
        while self._claim(wait=True):
            self._compress_claimed()
