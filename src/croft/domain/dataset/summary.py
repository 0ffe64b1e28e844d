"""What `croft stats` computes from a dataset: mergeable accumulators and the summary they yield.

A reader feeds an accumulator batches of decoded rows (views) of one file, with the node that file
belongs to; a row that names its own node (its `node` key) is counted on that node. Accumulators of
different files, parts and worker processes merge into one, in any order, with the same result.
Syscall rates are summed exactly, as integers of 2**-80 calls/s (`SUM_UNIT`), so the order of
files, parts and summaries cannot move a mean by an ulp, nor reorder two equal means. Distinct sets
hold ints per node, not strings.

`StatsAccumulator.add_lines` reads a buffer of lines itself: through the native fast path
(`croft.domain.dataset._rowscan`, built with the package) when it is there and asked for, which
folds the rows it is certain of in the canonical form croft writes and leaves every other line to
the Python path (`croft.domain.dataset.lines.view`, then `add`), the definition; both give the same
totals for any buffer (tests/unit/test_rowscan.py).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, pairwise
from math import trunc
from operator import attrgetter
from typing import Any

import attrs

from croft.domain.dataset.skips import SkipTally
from croft.domain.dataset.workloads import WORKLOADS

try:
    from croft.domain.dataset import _rowscan
except ImportError:  # not built: the Python path reads everything (tests/unit/test_rowscan.py fails)
    _rowscan = None  # type: ignore[assignment]

NATIVE = _rowscan is not None
"""Whether the native fast path was built (and `add_lines` may use it)."""

BUSIEST_SYSCALLS = 10
SUM_UNIT_BITS = 80
SUM_UNIT = 2.0**SUM_UNIT_BITS  # a rate times this is exact (a power of two); its int drops < 2**-80

_process = attrgetter("process.container_id", "process.framework")
_unix_ms = attrgetter("unix_ms")
_tgid = attrgetter("tgid")
_workload = attrgetter("workload")
_syscalls = attrgetter("syscalls")
_node = attrgetter("node")


@attrs.frozen
class FileFacts:
    """The files a summary was read from: how many, how many of them zstd, and bytes on disk."""

    files: int
    compressed: int
    bytes_on_disk: int


@attrs.frozen
class Stats:
    """A dataset's summary. `first_ms`/`last_ms` are None only when `rows` is 0; `workloads` and
    `frameworks` are (name, count) pairs sorted by name; `busiest_syscalls` are (name, mean rate
    per poll in calls/s) pairs, busiest first, equal means in name order, where the mean is the
    rate summed over a poll's rows, averaged over every poll of the dataset; empty when they were
    not computed."""

    files: FileFacts
    rows: int
    skipped_lines: int
    first_ms: int | None
    last_ms: int | None
    polls: int
    nodes: tuple[str, ...]
    containers: int
    processes: int
    workloads: tuple[tuple[str, int], ...]
    frameworks: tuple[tuple[str, int], ...]
    busiest_syscalls: tuple[tuple[str, float], ...]

    def to_json(self) -> dict[str, Any]:
        """The `croft stats --json` object: the keys scripts read, in order (tests/helpers/spec_keys.py)."""
        return {
            "files": self.files.files,
            "bytes": self.files.bytes_on_disk,
            "rows": self.rows,
            "skipped_lines": self.skipped_lines,
            "first_ms": self.first_ms,
            "last_ms": self.last_ms,
            "polls": self.polls,
            "nodes": list(self.nodes),
            "containers": self.containers,
            "processes": self.processes,
            "workloads": dict(self.workloads),
            "frameworks": dict(self.frameworks),
            "busiest_syscalls": [{"name": name, "mean_per_s": rate} for name, rate in self.busiest_syscalls],
        }


@attrs.frozen
class PollBlock:
    """`count` distinct poll times of one node, from `first_ms` to `last_ms`, counted without
    being held: `times()` gives them when they must be (`StatsAccumulator.poll_blocks`)."""

    count: int
    first_ms: int
    last_ms: int
    times: Callable[[], Iterable[int]] = attrs.field(eq=False)


class StatsAccumulator:
    """Running totals for `Stats`. Polls are distinct (node, unix_ms), processes distinct
    (node, tgid), containers distinct non-null container ids over all nodes, frameworks count the
    distinct containers seen with each framework. Syscall sums are kept only when `syscalls`.

    A node's polls are `polls[node]` and those of its `poll_blocks[node]` (merged summaries,
    `croft.domain.dataset.merged`): a block is counted by its count while no other poll of the
    node falls in its span, and its times are taken into `polls` only where one does."""

    def __init__(self, syscalls: bool = False) -> None:
        self.syscalls = syscalls
        self.rows = 0
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.polls: dict[str, set[int]] = {}
        self.poll_blocks: dict[str, list[PollBlock]] = {}
        self.tgids: dict[str, set[int]] = {}
        self.processes: set[tuple[str | None, str | None]] = set()  # distinct (container_id, framework)
        self.workloads: Counter[str] = Counter()
        self.syscall_sums: defaultdict[str, int] = defaultdict(int)  # in units of 2**-80 calls/s
        self.skips = SkipTally()

    def add(self, node: str, views: Sequence[Any]) -> None:
        """Count one batch of rows (`views.RowSchema`) read from a file of `node`: a few C-level passes
        over the batch, and with `syscalls` one Python loop over its syscall entries. Rows that name
        their node count on it (`node` is only the fallback for rows of older collectors)."""
        if not views:
            return
        if any(map(_node, views)):  # an empty name is no name
            named = set(map(_node, views))
            if len(named) == 1:
                node = named.pop()
            else:
                batches: dict[str, list[Any]] = {}
                for view in views:
                    batches.setdefault(view.node or node, []).append(view)
                for own, batch in batches.items():
                    self._add(own, batch)
                return
        self._add(node, views)

    def add_lines(
        self, node: str, data: bytes, start: int, stop: int, skipped: Counter[str], native: bool = True
    ) -> None:
        """Count the rows of the whole lines `data[start:stop]` (as `lines.decode_block` reads them)
        from a file of `node`, each skipped line counted in `skipped` by kind; with `native` (and
        the fast path built), the canonical rows in C and the rest in Python, to the same totals."""
        if not (native and _rowscan is not None):
            from croft.domain.dataset.lines import decode_block  # msgspec's schema: built when needed

            self.add(node, decode_block(data, start, stop, skipped))
            return
        rows, first, last, workloads, sums, deferred = _rowscan.fold(
            data, start, stop, node, self.polls, self.tgids, self.processes, self.syscalls
        )
        if rows:
            self.rows += rows
            self.first_ms = first if self.first_ms is None else min(self.first_ms, first)
            self.last_ms = last if self.last_ms is None else max(self.last_ms, last)
            self.workloads.update({name: n for name, n in zip(WORKLOADS, workloads, strict=True) if n})
            for name, total in sums:
                self.syscall_sums[name] += total
        if deferred:
            from croft.domain.dataset.lines import views_of

            self.add(node, views_of(deferred, skipped))

    def _add(self, node: str, views: Sequence[Any]) -> None:
        self.rows += len(views)
        times = set(map(_unix_ms, views))
        low, high = min(times), max(times)
        self.first_ms = low if self.first_ms is None else min(self.first_ms, low)
        self.last_ms = high if self.last_ms is None else max(self.last_ms, high)
        polls = self.polls.get(node)
        if polls is None:
            polls = self.polls[node] = set()
            self.tgids[node] = set()
        polls.update(times)
        self.tgids[node].update(map(_tgid, views))
        self.processes.update(map(_process, views))
        self.workloads.update(map(_workload, views))
        if self.syscalls:
            _sum_rates(self.syscall_sums, chain.from_iterable(map(_syscalls, views)))

    def merge(self, other: StatsAccumulator) -> None:
        """Fold `other` (of any files, any nodes) into this one."""
        self.rows += other.rows
        if other.first_ms is not None:
            self.first_ms = other.first_ms if self.first_ms is None else min(self.first_ms, other.first_ms)
        if other.last_ms is not None:
            self.last_ms = other.last_ms if self.last_ms is None else max(self.last_ms, other.last_ms)
        for mine, theirs in ((self.polls, other.polls), (self.tgids, other.tgids)):
            for node, values in theirs.items():
                mine.setdefault(node, set()).update(values)
        for node, blocks in other.poll_blocks.items():
            self.poll_blocks.setdefault(node, []).extend(blocks)
        self.processes |= other.processes
        self.workloads.update(other.workloads)
        for name, rate in other.syscall_sums.items():
            self.syscall_sums[name] += rate
        self.skips.merge(other.skips)

    def poll_counts(self) -> dict[str, int]:
        """The distinct polls of each node (with a block's, whether held or not)."""
        counts = {node: len(times) for node, times in self.polls.items()}
        for node, blocks in list(self.poll_blocks.items()):
            times = self.polls.get(node, set())
            spans = sorted((b.first_ms, b.last_ms) for b in blocks if b.count)
            starts = [first for first, _ in spans]
            apart = all(a[1] < b[0] for a, b in pairwise(spans)) and not any(
                (at := bisect_right(starts, t) - 1) >= 0 and t <= spans[at][1] for t in times
            )
            if apart:
                counts[node] = len(times) + sum(b.count for b in blocks)
            else:
                counts[node] = len(self.settled(node))
        return counts

    def settled(self, node: str) -> set[int]:
        """`polls[node]`, having taken in the times of the node's blocks (which it then drops)."""
        times = self.polls.setdefault(node, set())
        for block in self.poll_blocks.pop(node, []):
            times.update(block.times())
        return times

    def summary(self, files: FileFacts) -> Stats:
        counts = self.poll_counts()
        polls = sum(counts.values())
        containers = {container for container, _ in self.processes if container is not None}
        frameworks = Counter(
            framework
            for container, framework in self.processes
            if framework is not None and container is not None
        )
        scale = polls << SUM_UNIT_BITS
        # int / int rounds the exact quotient once: equal sums give equal means, in name order.
        means = (
            ((name, _quotient(total, scale)) for name, total in self.syscall_sums.items()) if polls else ()
        )
        busiest = tuple(sorted(means, key=_busiest_first)[:BUSIEST_SYSCALLS])
        return Stats(
            files=files,
            rows=self.rows,
            skipped_lines=self.skips.total_lines,
            first_ms=self.first_ms,
            last_ms=self.last_ms,
            polls=polls,
            nodes=tuple(sorted(node for node, count in counts.items() if count)),
            containers=len(containers),
            processes=sum(len(tgids) for tgids in self.tgids.values()),
            workloads=tuple(sorted(self.workloads.items())),
            frameworks=tuple(sorted(frameworks.items())),
            busiest_syscalls=busiest,
        )


def _sum_rates(sums: defaultdict[str, int], calls: Iterator[Any]) -> None:
    """Add each call's rate to its name's sum, in units of 2**-80 calls/s, dropping what is finer
    (an exact integer for every finite rate, whatever the order of the calls)."""
    unit = SUM_UNIT
    while True:
        try:
            for call in calls:
                sums[call.name] += trunc(call.rate_per_sec * unit)  # int(), by a cheaper call
        except OverflowError:
            # A rate of 2**944 or more overflowed the product; it is a whole number: shifted exactly.
            sums[call.name] += int(call.rate_per_sec) << SUM_UNIT_BITS
        else:
            return


def _quotient(total: int, scale: int) -> float:
    """`total / scale`; beyond a double, an infinite mean (JSON null)."""
    try:
        return total / scale
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _busiest_first(item: tuple[str, float]) -> tuple[float, str]:
    return -item[1], item[0]
