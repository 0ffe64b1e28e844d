"""croft top --at: the polls read from a time window, and the snapshot at any one of them (pure).

`Replay.of(node_rows)` groups rows by node and poll time. Its `times` are every poll time of every
node, in order; `at(index)` gives, for each node, its newest poll at or before `times[index]` and
the `HELD_POLLS - 1` before it: the same `NodePoll`s the live screen gets from a file's end.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import attrs

from croft.domain.dataset import Row
from croft.domain.top.table import HELD_POLLS, STOPPED_AFTER_MS, NodePoll

AT_TOLERANCE_MS = STOPPED_AFTER_MS
"""How far --at may be from the poll it shows: 5 poll intervals, what top live takes for a stopped
collector."""


@attrs.frozen
class Replay:
    """Each node's polls as (unix_ms, rows), oldest first; `times`: every poll time, sorted."""

    nodes: tuple[tuple[str, tuple[tuple[int, tuple[Row, ...]], ...]], ...]
    times: tuple[int, ...]

    @classmethod
    def of(cls, node_rows: Iterable[tuple[str, Row]]) -> Replay:
        grouped: dict[str, dict[int, list[Row]]] = {}
        for node, row in node_rows:
            grouped.setdefault(node, {}).setdefault(row.unix_ms, []).append(row)
        nodes = tuple(
            (node, tuple((ms, tuple(rows)) for ms, rows in sorted(polls.items())))
            for node, polls in sorted(grouped.items())
        )
        times = tuple(sorted({ms for _, polls in nodes for ms, _ in polls}))
        return cls(nodes, times)

    def index_at(self, unix_ms: int) -> int:
        """The index of the newest poll time at or before `unix_ms` (the first when all are after)."""
        return max(bisect.bisect_right(self.times, unix_ms) - 1, 0)

    def nearest(self, unix_ms: int) -> int | None:
        """The index of the poll time nearest `unix_ms` (the earlier of two as near), or None when
        none lies within `AT_TOLERANCE_MS` of it: a time outside the data, before its first poll,
        after its last or in a gap, whether it was typed as a time or as an age (`10m`). A time
        croft printed to the second names the poll within that second."""
        after = bisect.bisect_left(self.times, unix_ms)
        near = [i for i in (after - 1, after) if 0 <= i < len(self.times)]
        if not near:
            return None
        best = min(near, key=lambda i: (abs(self.times[i] - unix_ms), i))
        return best if abs(self.times[best] - unix_ms) <= AT_TOLERANCE_MS else None

    def at(self, index: int) -> tuple[NodePoll, ...]:
        """Each node's poll at or before `times[index]` with its held earlier polls; a node with no
        poll by then is left out."""
        if not self.times:
            return ()
        moment = self.times[min(max(index, 0), len(self.times) - 1)]
        out = []
        for node, polls in self.nodes:
            stamps = [ms for ms, _ in polls]
            newest = bisect.bisect_right(stamps, moment) - 1
            if newest < 0:
                continue
            earlier = tuple(
                row for _, rows in polls[max(newest - HELD_POLLS + 1, 0) : newest] for row in rows
            )
            out.append(NodePoll(node, polls[newest][0], polls[newest][1], earlier))
        return tuple(out)
