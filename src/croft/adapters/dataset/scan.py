"""Reading a whole dataset fast, for croft stats and croft profile.

Parts of the dataset (`files.split`) go to a pool of worker processes, one per CPU; each streams
its part in buffers of whole lines, decodes a buffer at once with msgspec's strict row schema
(`croft.domain.dataset.lines.decode_block`), feeds a domain accumulator, and returns it (small) to
be merged. A buffer that fails to decode is judged line by line by the codec, to find and count
exactly the bad lines.

`croft profile` does not decode every line: like `grep -F`, it searches the buffer for the id's
bytes and decodes only the lines around a hit.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from croft.adapters.dataset.files import (
    DatasetFile,
    Lines,
    Part,
    find_files,
    lines_of,
    row_batches,
    shown,
    split,
    work_bytes,
)
from croft.adapters.dataset.summaries import load_all
from croft.domain.dataset.containers import ContainersAccumulator
from croft.domain.dataset.segments import SegmentSummary
from croft.domain.dataset.skips import SkipTally
from croft.domain.dataset.summary import FileFacts, StatsAccumulator

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from croft.domain.dataset.profile import ProfileAccumulator, Subject

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
    progress: Callable[[int, int], None] | None = None,
    summaries: bool = True,
) -> tuple[FileFacts, StatsAccumulator]:
    """The files of `path` and the stats accumulated over all their rows (skips included); the
    syscall sums, which cost about as much again as everything else, only with `syscalls`.
    Segments with a trusted summary are answered from it (unless not `summaries`), the rest read.
    `progress(done_bytes, total_bytes)` is told after each part read."""
    files = find_files(path, host)
    total = StatsAccumulator(syscalls)
    rest = []
    for f, summary in zip(files, _trusted(files, summaries), strict=True):
        if summary is not None:
            summary.stats(f.node, shown(f.path), into=total)
        else:
            rest.append(f)
    task = partial(stats_of_part, syscalls=syscalls)
    for result in _run(task, tuple(rest), workers, inline_bytes, part_bytes, progress):
        total.merge(result)
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
    subject: Subject | None = None,
    summaries: bool = True,
) -> ProfileAccumulator:
    """The rows of every container whose id starts with `prefix` (lower-case hex), or of
    `subject` (a cgroup, a pid), over `path`. A segment whose trusted summary (unless not
    `summaries`) says it holds no row of the subject in the window is not read; the time span of
    the subject's containers in it comes from the summary, and the rows in the window of a
    container's or a cgroup's from the summary's per-poll figures where it has them."""
    from croft.domain.dataset.profile import ProfileAccumulator  # not on croft stats' way

    files = find_files(path, host)
    total = ProfileAccumulator(prefix, from_ms, to_ms, subject)
    rest = []
    for f, summary in zip(files, _trusted(files, summaries), strict=True):
        if summary is not None and total.subject.kind == "container":
            total.pods.update(summary.container_pods())
        plan = None if summary is None else summary.profile_plan(total.subject, from_ms, to_ms)
        if (
            plan is None  # no trusted summary
            or plan.scan
            or (plan.groups and (summary is None or not _from_groups(f, summary, total)))
        ):
            rest.append(f)
            continue
        for container_id, first_ms, last_ms in plan.spans:
            total.add_span(container_id, first_ms, last_ms)
    task = partial(profile_of_part, prefix=prefix, from_ms=from_ms, to_ms=to_ms, subject=subject)
    for part in _run(task, tuple(rest), workers, inline_bytes, part_bytes):
        total.merge(part)
    return total


def _from_groups(f: DatasetFile, summary: SegmentSummary, total: ProfileAccumulator) -> bool:
    """Count the subject's groups of the summarized segment `f` (`croft.domain.dataset.poll_groups`)
    in `total`; False, counting nothing, when the file no longer holds what its summary names."""
    from croft.adapters.dataset.summaries import read_group, read_index
    from croft.domain.dataset.poll_groups import wanted

    index = read_index(f, summary)
    if index is None:
        return False
    subject = total.subject
    inside, outside = wanted(index, subject.kind, subject.value, total.from_ms, total.to_ms)
    bodies = [read_group(f, summary, entry) for entry in inside]
    if any(body is None for body in bodies):
        return False
    for entry, body in zip(inside, bodies, strict=True):
        assert body is not None
        key = entry[0] if subject.kind == "container" else subject.value
        total.add_group(f.node, key, entry[0], (entry[2], entry[3]), body)
    for entry in outside:
        total.add_span(entry[0] if subject.kind == "container" else subject.value, entry[2], entry[3])
    return True


def read_containers(
    path: Path,
    *,
    workers: int | None = None,
    host: str | None = None,
    inline_bytes: int = INLINE_BYTES,
    part_bytes: int = PART_BYTES,
    progress: Callable[[int, int], None] | None = None,
    summaries: bool = True,
) -> tuple[FileFacts, ContainersAccumulator]:
    """Every container and host cgroup of `path` (`croft stats --containers`), skips counted;
    segments with a trusted summary (unless not `summaries`) answered from it."""
    files = find_files(path, host)
    total = ContainersAccumulator()
    rest = []
    for f, summary in zip(files, _trusted(files, summaries), strict=True):
        if summary is not None:
            total.merge(summary.containers(f.node, shown(f.path)))
        else:
            rest.append(f)
    for part in _run(containers_of_part, tuple(rest), workers, inline_bytes, part_bytes, progress):
        total.merge(part)
    return file_facts(files), total


def _trusted(files: tuple[DatasetFile, ...], wanted: bool) -> list[SegmentSummary | None]:
    """The trusted summary of each file (`summaries.load_all`), or none at all unless `wanted`."""
    return load_all(files) if wanted else [None] * len(files)


def _run(
    task: Callable[[Part], T],
    files: tuple[DatasetFile, ...],
    workers: int | None,
    inline_bytes: int,
    part_bytes: int,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[T]:
    """`task` over the parts of `files`: in this process for a small dataset or one worker, else
    on a pool of `workers` (default: one per CPU), largest parts first. Results come in any order.
    `progress(done_bytes, total_bytes)` (bytes on disk) is told after each part."""
    parts = split(files, part_bytes)
    total = sum(map(_disk_bytes, parts))
    done = 0
    workers = min(workers or default_workers(), len(parts))
    if workers <= 1 or sum(map(work_bytes, parts)) < inline_bytes:
        results: Iterator[T] = map(task, parts)
    else:
        # Imported here: a read that needs no pool (a summarized dataset) does without them.
        # fork: workers start in milliseconds and re-import nothing; the readers run no threads. A
        # worker makes millions of rows and keeps none past its part (msgspec Structs hold no
        # cycles): without the cycle collector, which would walk them again and again, a part
        # reads in about 10 % less CPU.
        import gc
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork"), initializer=gc.disable
        )
        results = _closing(pool, pool.map(task, parts))
    for part, result in zip(parts, results, strict=True):
        done += _disk_bytes(part)
        if progress is not None:
            progress(done, total)
        yield result


def _closing(pool: ProcessPoolExecutor, results: Iterator[T]) -> Iterator[T]:
    with pool:
        yield from results


def _disk_bytes(part: Part) -> int:
    """The bytes on disk `part` stands for: a whole compressed file, or its share of a plain one."""
    if part.file.compressed:
        return part.file.size_bytes
    stop = part.file.size_bytes if part.stop is None else min(part.stop, part.file.size_bytes)
    return max(stop - part.start, 0)


def stats_of_part(part: Part, syscalls: bool = False) -> StatsAccumulator:
    """Every row of `part` in a stats accumulator, bad lines and damage counted."""
    acc = StatsAccumulator(syscalls)
    for rows in row_batches(part, acc.skips):
        acc.add(part.file.node, rows)
    return acc


def containers_of_part(part: Part) -> ContainersAccumulator:
    """Every row of `part` in a containers accumulator, bad lines and damage counted."""
    acc = ContainersAccumulator()
    for rows in row_batches(part, acc.skips):
        acc.add(part.file.node, rows)
    return acc


def profile_of_part(
    part: Part, prefix: str, from_ms: int | None, to_ms: int | None, subject: Subject | None = None
) -> ProfileAccumulator:
    """The rows of `part` that mention the subject's bytes (`prefix`'s by default), decoded and
    accumulated; only those lines are judged, so a bad line elsewhere goes uncounted here
    (too-long lines and damage are counted wherever they are)."""
    from croft.domain.dataset.lines import last_line, lines_with, verdict
    from croft.domain.dataset.profile import ProfileAccumulator

    acc = ProfileAccumulator(prefix, from_ms, to_ms, subject)
    needle = acc.subject.needle()
    node, skipped = part.file.node, Counter[str]()
    for item in lines_of(part, acc.skips):
        if isinstance(item, Lines):
            found = [verdict(line) for line in lines_with(item.data, item.start, item.stop, needle)]
        else:
            found = [last_line(verdict(item.line))] if needle in item.line else []
        for one in found:
            if isinstance(one, str):
                skipped[one] += 1
            elif one is not None:
                acc.add(node, one)
    _count(acc.skips, part, skipped)
    return acc


def _count(skips: SkipTally, part: Part, skipped: Counter[str]) -> None:
    for kind, count in skipped.items():
        skips.line(shown(part.file.path), kind, count)
