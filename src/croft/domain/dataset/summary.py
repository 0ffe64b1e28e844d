"""What `croft stats` computes from a dataset: mergeable accumulators and the summary they yield.

A reader feeds an accumulator batches of decoded rows (views) of one file, with the node that file
belongs to; a row that names its own node (its `node` key) is counted on that node. Accumulators of
different files, parts and worker processes merge into one, in any order, with the same result.
Syscall rates are summed exactly, as integers of 2**-80 calls/s (`SUM_UNIT`), so the order of
files, parts and summaries cannot move a mean by an ulp, nor reorder two equal means. Distinct sets
hold ints per node, not strings.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from itertools import chain
from math import trunc
from operator import attrgetter
from typing import Any

import attrs

from croft.domain.dataset.skips import SkipTally
from croft.domain.utc import rfc3339

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
            "first_time": rfc3339(self.first_ms),
            "last_ms": self.last_ms,
            "last_time": rfc3339(self.last_ms),
            "polls": self.polls,
            "nodes": list(self.nodes),
            "containers": self.containers,
            "processes": self.processes,
            "workloads": dict(self.workloads),
            "frameworks": dict(self.frameworks),
            "busiest_syscalls": [{"name": name, "mean_per_s": rate} for name, rate in self.busiest_syscalls],
        }


class StatsAccumulator:
    """Running totals for `Stats`. Polls are distinct (node, unix_ms), processes distinct
    (node, tgid), containers distinct non-null container ids over all nodes, frameworks count the
    distinct containers seen with each framework. Syscall sums are kept only when `syscalls`."""

    def __init__(self, syscalls: bool = False) -> None:
        self.syscalls = syscalls
        self.rows = 0
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.polls: dict[str, set[int]] = {}
        self.tgids: dict[str, set[int]] = {}
        self.processes: set[tuple[str | None, str | None]] = set()  # distinct (container_id, framework)
        self.workloads: Counter[str] = Counter()
        self.syscall_sums: defaultdict[str, int] = defaultdict(int)  # in units of 2**-80 calls/s
        self.skips = SkipTally()

    def add(self, node: str, views: Sequence[Any]) -> None:
        """Count one batch of rows read from a file of `node`: a few C-level passes
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
        self.processes |= other.processes
        self.workloads.update(other.workloads)
        for name, rate in other.syscall_sums.items():
            self.syscall_sums[name] += rate
        self.skips.merge(other.skips)

    def summary(self, files: FileFacts) -> Stats:
        counts = {node: len(times) for node, times in self.polls.items()}
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
