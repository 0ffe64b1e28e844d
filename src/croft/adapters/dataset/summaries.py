"""Segment summaries on disk: computing one from a segment's lines, appending it to the segment as a
zstd skippable frame (`croft.domain.dataset.segments`), finding and checking it, and `croft index`.

A summary is trusted only when the file's bytes before its frame have the size and CRC-32 it names
(reading a compressed segment to check it costs a few milliseconds per 100 MB; decompressing it
would cost a second). A segment without a trusted summary is scanned, as before.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from croft.adapters.dataset.disk import OS_DISK, Disk, fsync_directory, write_all
from croft.adapters.dataset.files import (
    Damaged,
    DatasetFile,
    Lines,
    Part,
    TooLong,
    find_files,
    read_part,
    shown,
)
from croft.domain.dataset.containers import ContainersAccumulator
from croft.domain.dataset.poll_groups import FRAME_HEADER_BYTES, Index, PollGroups, decode_body, decode_index
from croft.domain.dataset.segments import (
    FILE_NODE,
    FOOTER_BYTES,
    VERSION,
    SegmentSummary,
    decode,
    encode,
    figures_frame_opens,
    frame_start,
    state_of,
)
from croft.domain.dataset.skips import TOO_LONG
from croft.domain.dataset.summary import StatsAccumulator

if TYPE_CHECKING:
    from croft.adapters.dataset.live_memory import LiveMemory

CHECK_READ_BYTES = 1 << 20  # cache-sized
SUMMARY_READ_BYTES = 32 << 10  # a plain segment decoded a block at a time: ~0.3 ms holding the GIL
POOL_CHECK_BYTES = 16 << 20  # compressed bytes to check below which a second thread costs more than it saves


def summarize(path: Path, compressed: bool) -> dict[str, object] | None:
    """The summary state of every line of the file `path` (plain, or zstd: all its frames), or
    None when it cannot be summarized exactly (it is damaged, a sum is not finite).

    On the collector this runs on the compression thread beside the poll thread: a plain file is
    decoded in small blocks, the GIL given up after each, so that a poll never waits long."""
    from croft.domain.dataset.lines import decode_block, last_line, view

    part = Part(DatasetFile(path, FILE_NODE, compressed, path.stat().st_size))
    stats, containers, cgroups = StatsAccumulator(syscalls=True), ContainersAccumulator(), set[str]()
    groups = PollGroups()
    skipped = Counter[str]()
    name = shown(path)
    for item in read_part(part, plain_bytes=SUMMARY_READ_BYTES):
        if isinstance(item, TooLong):
            stats.skips.line(name, TOO_LONG)
            continue
        if isinstance(item, Damaged):
            stats.skips.damaged(name, item.reason, item.whole)
            continue
        if isinstance(item, Lines):
            views = decode_block(item.data, item.start, item.stop, skipped)
        else:
            found = last_line(view(item.line))
            if isinstance(found, str):
                skipped[found] += 1
                continue
            views = [found]
        stats.add(FILE_NODE, views)
        containers.add(FILE_NODE, views)
        groups.add(FILE_NODE, views)
        cgroups.update(v.process.cgroup for v in views)
        time.sleep(0)  # let a waiting poll thread take the GIL now
    for kind, count in skipped.items():
        stats.skips.line(name, kind, count)
    return state_of(stats, containers, cgroups, groups)


def frame_bytes(state: dict[str, object], data_bytes: int, crc32: int) -> bytes:
    return encode(SegmentSummary(data_bytes, crc32, dict(state)))


def load(f: DatasetFile) -> SegmentSummary | None:
    """The trusted summary of the zstd file `f`, or None (no summary, or one that does not match
    the bytes before it)."""
    summary = read_frame(f)
    return summary if summary is not None and data_crc(f.path, summary.data_bytes) == summary.crc32 else None


def load_all(
    files: Sequence[DatasetFile], workers: int, pool_bytes: int = POOL_CHECK_BYTES
) -> list[SegmentSummary | None]:
    """`load` of each of `files`; the checksums on `workers` threads when they are many bytes (the
    frames themselves are read here: small). zlib.crc32 and readinto let go of the GIL, so threads
    run the checks side by side without a process pool's start (multiprocessing's imports, forks).
    With `remembered_checks` on (the croft commands), a file whose check passed before and whose
    identity, size, mtime and ctime are unchanged since is not read again."""
    frames = [read_frame(f) for f in files]
    memory = _memory[0] if _memory else None
    keys = [
        None if s is None or memory is None else memory.key(f.path, s)
        for f, s in zip(files, frames, strict=True)
    ]
    known = [key is not None and memory is not None and key in memory.passed for key in keys]
    checks = [
        (f.path, s.data_bytes)
        for f, s, seen in zip(files, frames, known, strict=True)
        if s is not None and not seen
    ]
    if workers > 1 and len(checks) > 1 and sum(size for _, size in checks) >= pool_bytes:
        results = _on_threads(checks, min(workers, len(checks)))
    else:
        results = [_data_crc(check) for check in checks]
    crcs = iter(results)
    trusted: list[SegmentSummary | None] = []
    for s, key, seen in zip(frames, keys, known, strict=True):
        if s is None or (not seen and next(crcs) != s.crc32):
            trusted.append(None)
            continue
        trusted.append(s)
        if memory is not None and key is not None and not seen:
            memory.passed_now(key)
    if memory is not None:
        memory.save()
    return trusted


class CheckMemory:
    """The trust checks that passed, by the file's device, inode, size, mtime and ctime and the
    summary's data size and CRC-32 (`key`), kept in one small file. Any write to a file (or utime,
    or rename over it) gives it a new ctime, which the kernel sets and no one can set back, so a
    remembered check holds only for the bytes it read. A check is remembered only for a file whose
    ctime is older than the check by `RACY_NS`: a write in the same clock tick as the last one
    would leave the ctime as it was (git's racily clean index entries)."""

    RACY_NS = 2_000_000_000
    LIMIT = 100_000  # entries kept, the newest

    def __init__(self, path: Path, now_ns: int) -> None:
        self.path = path
        self.now_ns = now_ns  # before any check of this process began
        self._passed: dict[tuple[int, ...], int] | None = None
        self.added = False

    @property
    def passed(self) -> dict[tuple[int, ...], int]:
        """The checks that passed, by key: read from the file when first asked for (a dataset
        whose segments the merged summaries answer never asks)."""
        if self._passed is None:
            self._passed = {}
            try:
                import orjson

                for entry in orjson.loads(self.path.read_bytes()):
                    *key, at = entry
                    self._passed[tuple(int(k) for k in key)] = int(at)
            except (OSError, ValueError, TypeError):
                self._passed = {}  # none yet, or unreadable: every file is checked
        return self._passed

    @staticmethod
    def key(path: Path, summary: SegmentSummary) -> tuple[int, ...] | None:
        try:
            facts = path.stat()
        except OSError:
            return None
        return (
            facts.st_dev,
            facts.st_ino,
            facts.st_size,
            facts.st_mtime_ns,
            facts.st_ctime_ns,
            summary.data_bytes,
            summary.crc32,
        )

    def passed_now(self, key: tuple[int, ...]) -> None:
        if key[4] < self.now_ns - self.RACY_NS:
            self.passed[key] = self.now_ns
            self.added = True

    def save(self) -> None:
        if not self.added:
            return
        import orjson

        newest = sorted(self.passed.items(), key=lambda item: item[1])[-self.LIMIT :]
        body = orjson.dumps([[*key, at] for key, at in newest])
        replace_quietly(self.path, body)
        self.added = False


_memory: list[CheckMemory] = []


def remembered_checks(now_ns: int, path: Path | None = None) -> CheckMemory:
    """Remember passed trust checks in `path` (default: $CROFT_CACHE_DIR, else $XDG_CACHE_HOME/croft
    or ~/.cache/croft, then trusted-summaries.json) for every later `load_all` of this process;
    `now_ns`: the time now (unix ns), before any check."""
    if path is None:
        base = os.environ.get("CROFT_CACHE_DIR")
        cache = os.environ.get("XDG_CACHE_HOME")
        folder = Path(base) if base else (Path(cache) if cache else Path("~/.cache").expanduser()) / "croft"
        path = folder / "trusted-summaries.json"
    _memory[:] = [CheckMemory(path, now_ns)]
    return _memory[0]


def live_memory() -> LiveMemory | None:
    """The remembered totals of plain files (`croft.adapters.dataset.live_memory`), kept beside the
    remembered checks while `remembered_checks` is on; else None."""
    if not _memory:
        return None
    from croft.adapters.dataset.live_memory import FILE_NAME, LiveMemory

    if not _live or _live[0].path != _memory[0].path.with_name(FILE_NAME):
        _live[:] = [LiveMemory(_memory[0].path.with_name(FILE_NAME), _memory[0].now_ns)]
    return _live[0]


_live: list[LiveMemory] = []


def _on_threads(checks: list[tuple[Path, int]], workers: int) -> list[int | None]:
    """`_data_crc` of each check, on `workers` threads taking the next one in turn."""
    from croft.adapters.threads import InOrder  # here: a dataset with little to check needs none

    pool = InOrder([(_data_crc, check) for check in checks], workers, name="croft-check")
    try:
        return [pool.result(at) for at in range(len(checks))]
    finally:
        pool.join()


def read_frame(f: DatasetFile) -> SegmentSummary | None:
    """The summary frame at the end of the zstd file `f`, unchecked against its data; None when
    there is none, or when the per-poll figures' frame it names does not open where it says
    (`segments.figures_frame_opens`: a scan reads damage there)."""
    if not f.compressed or f.problem is not None or f.size_bytes < FOOTER_BYTES:
        return None
    try:
        with f.path.open("rb") as src:
            size = src.seek(0, os.SEEK_END)
            src.seek(size - FOOTER_BYTES)
            start = frame_start(src.read(FOOTER_BYTES))
            if start is None or start >= size:
                return None
            src.seek(start)
            summary = decode(src.read(size - start), start)
            if summary is None or summary.profile is None:
                return summary
            src.seek(summary.data_bytes)
            return summary if figures_frame_opens(src.read(FRAME_HEADER_BYTES), summary) else None
    except OSError:
        return None


def read_index(f: DatasetFile, summary: SegmentSummary) -> Index | None:
    """The index of the per-poll figures of the trusted `summary` of `f`; None when it has none,
    or when the file no longer holds the index the summary names."""
    if summary.profile is None:
        return None
    frame_bytes, index_bytes, crc32 = summary.profile
    raw = _read_at(f.path, summary.data_bytes + FRAME_HEADER_BYTES, index_bytes)
    return None if raw is None else decode_index(raw, crc32, frame_bytes)


def read_group(f: DatasetFile, summary: SegmentSummary, entry: list[object]) -> dict[str, object] | None:
    """The body of the group `entry` of `f`'s index; None when the file no longer holds it."""
    offset, length, crc32 = entry[4], entry[5], entry[6]
    assert isinstance(offset, int) and isinstance(length, int) and isinstance(crc32, int)
    raw = _read_at(f.path, summary.data_bytes + offset, length)
    return None if raw is None else decode_body(raw, crc32)


def _read_at(path: Path, offset: int, length: int) -> bytes | None:
    try:
        with path.open("rb") as src:
            src.seek(offset)
            raw = src.read(length)
    except OSError:
        return None
    return raw if len(raw) == length else None


def _data_crc(check: tuple[Path, int]) -> int | None:
    return data_crc(*check)


def data_crc(path: Path, data_bytes: int) -> int | None:
    """CRC-32 of the first `data_bytes` of `path`; None when it is shorter or cannot be read."""
    try:
        with path.open("rb") as src:
            crc, left, buffer = 0, data_bytes, bytearray(CHECK_READ_BYTES)  # one buffer, reused
            with memoryview(buffer) as view:
                while left > 0:
                    got = src.readinto(view[: min(CHECK_READ_BYTES, left)])
                    if not got:
                        return None
                    crc = zlib.crc32(view[:got], crc)
                    left -= got
    except OSError:
        return None
    return crc


@attrs.frozen
class Indexed:
    """What `index` did: segments given a summary, ones that had a trusted one, ones it could not
    summarize (damaged: named with why)."""

    written: int
    present: int
    failed: tuple[str, ...]


def index(path: Path, disk: Disk = OS_DISK) -> Indexed:
    """Append a summary to every zstd segment of the dataset at `path` that has no trusted one of
    this version; a trusted one of an older version is replaced (the data before it kept, the
    summary written anew). Each is rewritten through a hidden copy renamed into place (a crash
    leaves the old segment whole), with its mtime kept (retention's clock)."""
    written = present = 0
    failed: list[str] = []
    for f in find_files(path):
        if not f.compressed or f.problem is not None:
            continue
        old = load(f)
        if old is not None and old.state.get("version", VERSION) == VERSION:
            present += 1
            continue
        state = summarize(f.path, compressed=True)
        if state is None:
            failed.append(shown(f.path))
            continue
        _append_copy(f.path, state, disk, None if old is None else old.data_bytes)
        written += 1
    return Indexed(written, present, tuple(failed))


def _append_copy(path: Path, state: dict[str, object], disk: Disk, data_bytes: int | None = None) -> None:
    """Rewrite `path` as its first `data_bytes` (default: all of it) and a summary of `state`."""
    temporary = path.with_name(f".{path.name}.index")
    facts = path.stat()
    crc, size = 0, 0
    left = facts.st_size if data_bytes is None else data_bytes
    try:
        with path.open("rb") as src:
            dst = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                while left > 0 and (chunk := src.read(min(CHECK_READ_BYTES, left))):
                    left -= len(chunk)
                    crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                    write_all(disk, dst, chunk)
                write_all(disk, dst, frame_bytes(state, size, crc))
                disk.fsync(dst)
            finally:
                os.close(dst)
        os.utime(temporary, ns=(facts.st_atime_ns, facts.st_mtime_ns))
        disk.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    fsync_directory(path.parent)


def replace_quietly(path: Path, body: bytes) -> None:
    """`path` replaced by `body` through a temporary file beside it (readers see the old file or the
    new one); a memory that cannot be written is only a memory, so an OSError leaves it as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(body)
        temporary.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
