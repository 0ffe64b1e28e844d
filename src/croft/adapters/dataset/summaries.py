"""Segment summaries on disk: computing one from a segment's lines, appending it to the segment as a
zstd skippable frame (`croft.domain.dataset.segments`), finding and checking it, and `croft index`.

The trust rule: a closed segment is immutable, so its summary is trusted when the file is still
the one the summary was written for, as far as its own bytes tell: the summary frame ends the file
and matches its own CRC-32, and the data (with the per-poll figures' frame, which opens where the
summary says) ends where that frame starts. Nothing of the data is read to trust it: an append or
a cut moves the end, and damage inside the data is what the zstd frames' own checksums and
`croft index --verify` find (it recomputes the CRC-32 the summary names of the data). A segment
without a trusted summary is scanned.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import attrs

from croft.adapters.dataset.disk import OS_DISK, Disk, fsync_directory, write_all
from croft.adapters.dataset.files import (
    DatasetFile,
    Part,
    find_files,
    row_batches,
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
from croft.domain.dataset.summary import StatsAccumulator

CHECK_READ_BYTES = 1 << 20  # cache-sized
SUMMARY_READ_BYTES = 32 << 10  # a plain segment decoded a block at a time: ~0.3 ms holding the GIL


def summarize(path: Path, compressed: bool) -> dict[str, object] | None:
    """The summary state of every line of the file `path` (plain, or zstd: all its frames), or
    None when it cannot be summarized exactly (it is damaged, a sum is not finite).

    On the collector this runs on the compression thread beside the poll thread: a plain file is
    decoded in small blocks, the GIL given up after each, so that a poll never waits long."""
    part = Part(DatasetFile(path, FILE_NODE, compressed, path.stat().st_size))
    stats, containers, cgroups = StatsAccumulator(syscalls=True), ContainersAccumulator(), set[str]()
    groups = PollGroups()
    for rows in row_batches(part, stats.skips, plain_bytes=SUMMARY_READ_BYTES):
        stats.add(FILE_NODE, rows)
        containers.add(FILE_NODE, rows)
        groups.add(FILE_NODE, rows)
        cgroups.update(row.process.cgroup for row in rows)
        time.sleep(0)  # let a waiting poll thread take the GIL now
    return state_of(stats, containers, cgroups, groups)


def frame_bytes(state: dict[str, object], data_bytes: int, crc32: int) -> bytes:
    return encode(SegmentSummary(data_bytes, crc32, dict(state)))


def load(f: DatasetFile) -> SegmentSummary | None:
    """The trusted summary of the zstd file `f` (the module's trust rule), or None."""
    return read_frame(f)


def load_all(files: Sequence[DatasetFile]) -> list[SegmentSummary | None]:
    """`load` of each of `files`."""
    return [load(f) for f in files]


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
    summarize (damaged: named), and with `verify` the ones whose data no longer matched their
    summary (named; summarized anew from what they hold now)."""

    written: int
    present: int
    failed: tuple[str, ...]
    mismatched: tuple[str, ...] = ()


def index(path: Path, disk: Disk = OS_DISK, verify: bool = False) -> Indexed:
    """Append a summary to every zstd segment of the dataset at `path` that has no trusted one of
    this version; a trusted one of an older version is replaced (the data before it kept, the
    summary written anew). With `verify`, every trusted summary is also checked against the
    CRC-32 of the data it names, and a segment whose data no longer matches is summarized anew
    from what it holds (so its damage is then reported as a scan reports it). Each is rewritten
    through a copy of its own renamed into place (a crash leaves the old segment whole; several
    runs at once each write their own copy), with its mtime kept (retention's clock). A segment
    that vanishes meanwhile (retention) is passed over."""
    written = present = 0
    failed: list[str] = []
    mismatched: list[str] = []
    for f in find_files(path):
        if not f.compressed or f.problem is not None:
            continue
        old = load(f)
        stale = old is not None and verify and data_crc(f.path, old.data_bytes) != old.crc32
        if old is not None and not stale and old.state.get("version", VERSION) == VERSION:
            present += 1
            continue
        try:
            if stale:
                mismatched.append(shown(f.path))
            state = summarize(f.path, compressed=True)
            if state is None:
                failed.append(shown(f.path))
                if stale and old is not None:  # its data only: a scan reports the damage
                    _append_copy(f.path, None, disk, old.data_bytes)
                continue
            _append_copy(f.path, state, disk, None if old is None else old.data_bytes)
        except FileNotFoundError:
            continue  # deleted by retention since it was listed
        written += 1
    return Indexed(written, present, tuple(failed), tuple(mismatched))


def _append_copy(
    path: Path, state: dict[str, object] | None, disk: Disk, data_bytes: int | None = None
) -> None:
    """Rewrite `path` as its first `data_bytes` (default: all of it) and a summary of `state`
    (None: none), through a hidden copy of this call's own."""
    facts = path.stat()
    crc, size = 0, 0
    left = facts.st_size if data_bytes is None else data_bytes
    with path.open("rb") as src:
        dst, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".index", dir=path.parent)
        temporary = Path(name)
        try:
            try:
                while left > 0 and (chunk := src.read(min(CHECK_READ_BYTES, left))):
                    left -= len(chunk)
                    crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                    write_all(disk, dst, chunk)
                if state is not None:
                    write_all(disk, dst, frame_bytes(state, size, crc))
                disk.fsync(dst)
                os.fchmod(dst, 0o644)
                os.utime(dst, ns=(facts.st_atime_ns, facts.st_mtime_ns))
            finally:
                os.close(dst)
            disk.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
    fsync_directory(path.parent)
