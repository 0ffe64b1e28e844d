"""Reading a whole dataset fast, for croft stats and croft profile.

Parts of the dataset (`dataset_files.split`) go to a pool of worker processes, one per CPU; each
streams its part in buffers of whole lines, decodes a buffer at once with msgspec into the narrow
view its command needs, feeds a domain accumulator, and returns it (small) to be merged. A buffer
that fails to decode is decoded line by line to find and count exactly the bad lines.

`croft profile` does not decode every line: like `grep -F`, it searches the buffer for the id's
bytes and decodes only the lines around a hit.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from croft.adapters.dataset.files import (
    DatasetFile,
    Lines,
    Part,
    Torn,
    find_files,
    read_part,
    split,
    work_bytes,
)
from croft.domain.dataset.profile import ProfileAccumulator
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TORN, SkipTally
from croft.domain.dataset.summary import FileFacts, StatsAccumulator
from croft.domain.dataset.views import PROFILE_DECODER, STATS_DECODER, STATS_SYSCALLS_DECODER

PART_BYTES = 64 << 20  # plain files larger than this are read by several workers
INLINE_BYTES = 64 << 20  # lines (decompressed) below which a pool costs more than it saves

T = TypeVar("T")


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def file_facts(files: tuple[DatasetFile, ...]) -> FileFacts:
    return FileFacts(
        files=len(files),
        compressed=sum(f.compressed for f in files),
        bytes_on_disk=sum(f.size_bytes for f in files),
    )


def read_stats(
    path: Path,
    *,
    syscalls: bool = False,
    workers: int | None = None,
    host: str | None = None,
    inline_bytes: int = INLINE_BYTES,
    part_bytes: int = PART_BYTES,
) -> tuple[FileFacts, StatsAccumulator]:
    """The files of `path` and the stats accumulated over all their rows (skips included); the
    syscall sums, which cost about as much again as everything else, only with `syscalls`."""
    files = find_files(path, host)
    total = StatsAccumulator(syscalls)
    for part in _run(partial(stats_of_part, syscalls=syscalls), files, workers, inline_bytes, part_bytes):
        total.merge(part)
    return file_facts(files), total


def read_profile(
    path: Path,
    prefix: str,
    from_ms: int | None,
    to_ms: int | None,
    *,
    workers: int | None = None,
    host: str | None = None,
    inline_bytes: int = INLINE_BYTES,
    part_bytes: int = PART_BYTES,
) -> ProfileAccumulator:
    """The rows of every container whose id starts with `prefix` (lower-case hex), over `path`."""
    files = find_files(path, host)
    total = ProfileAccumulator(prefix, from_ms, to_ms)
    task = partial(profile_of_part, prefix=prefix, from_ms=from_ms, to_ms=to_ms)
    for part in _run(task, files, workers, inline_bytes, part_bytes):
        total.merge(part)
    return total


def _run(
    task: Callable[[Part], T],
    files: tuple[DatasetFile, ...],
    workers: int | None,
    inline_bytes: int,
    part_bytes: int,
) -> Iterator[T]:
    """`task` over the parts of `files`: in this process for a small dataset or one worker, else
    on a pool of `workers` (default: one per CPU), largest parts first. Results come in any order."""
    parts = split(files, part_bytes)
    workers = min(workers or default_workers(), len(parts))
    if workers <= 1 or sum(map(work_bytes, parts)) < inline_bytes:
        yield from map(task, parts)
        return
    # fork: workers start in milliseconds and re-import nothing; the readers run no threads.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(task, parts)


def stats_of_part(part: Part, syscalls: bool = False) -> StatsAccumulator:
    """Every row of `part` in a stats accumulator, bad lines and damage counted."""
    acc = StatsAccumulator(syscalls)
    name, node = str(part.file.path), part.file.node
    decoder: msgspec.json.Decoder[Any] = STATS_SYSCALLS_DECODER if syscalls else STATS_DECODER
    for item in read_part(part):
        if isinstance(item, Lines):
            try:
                views = decoder.decode_lines(item.view())
            except msgspec.DecodeError:
                views = _line_by_line(decoder, item, acc.skips, name)
            acc.add(node, views)
        elif isinstance(item, Torn):
            acc.skips.line(name, TORN)
        else:
            acc.skips.damaged(name, item.reason)
    return acc


def _line_by_line(decoder: msgspec.json.Decoder[Any], lines: Lines, skips: SkipTally, name: str) -> list[Any]:
    """The views of the lines that decode; the others counted as skipped, by kind."""
    views = []
    for line in lines.data[lines.start : lines.stop].split(b"\n"):
        if not line.strip():
            continue
        try:
            views.append(decoder.decode(line))
        except msgspec.ValidationError:
            skips.line(name, NOT_A_ROW)
        except msgspec.DecodeError:
            skips.line(name, NOT_JSON)
    return views


def profile_of_part(part: Part, prefix: str, from_ms: int | None, to_ms: int | None) -> ProfileAccumulator:
    """The rows of `part` that mention `prefix`'s bytes, decoded and accumulated; only those
    lines are checked, so a bad line elsewhere goes unnoticed (and uncounted) here."""
    acc = ProfileAccumulator(prefix, from_ms, to_ms)
    needle = prefix.encode()
    name, node = str(part.file.path), part.file.node
    decode = PROFILE_DECODER.decode
    for item in read_part(part):
        if not isinstance(item, Lines):
            if isinstance(item, Torn):
                acc.skips.line(name, TORN)
            else:
                acc.skips.damaged(name, item.reason)
            continue
        data, first, stop = item.data, item.start, item.stop
        hit = data.find(needle, first, stop)
        while hit >= 0:
            start = max(data.rfind(b"\n", first, hit) + 1, first)
            end = data.find(b"\n", hit, stop)  # Lines end with a newline
            try:
                acc.add(node, decode(data[start:end]))
            except msgspec.ValidationError:
                acc.skips.line(name, NOT_A_ROW)
            except msgspec.DecodeError:
                acc.skips.line(name, NOT_JSON)
            hit = data.find(needle, end, stop)
    return acc
