"""The summaries of one directory's trusted segments merged into one state, so that `croft stats` and
`croft profile` read a directory's closed segments at the cost of one small decode, whatever their
number (`croft.adapters.dataset.summary_index` keeps it, and decides when it may be believed).

Three sections, each decoded only by the command that needs it:

- "stats": the merged `StatsAccumulator` (syscall sums as decimal strings), each node's polls by
  their count, first and last (`StatsAccumulator.poll_blocks`: counted, not held);
- "polls": each node's poll times, as the differences between its sorted times (short numbers),
  decoded only where another poll of the node falls among them;
- "containers": the merged `ContainersAccumulator`'s entries;
- "profile": per segment what `SegmentSummary.profile_plan` and the per-poll figures' reader need
  (data size and CRC-32, first and last ms, the figures' frame, skipped lines) and, by position, the segments
  holding each container id (with its first and last ms there), each cgroup and each tgid.

A segment's skipped-line counts name its file, so they are kept per segment, beside its name.
Every merge here is the accumulators' own (`merge`, `SegmentSummary.stats`, `.containers`), so the
merged state answers as the segments' summaries one by one do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Any

from croft.domain.dataset.containers import ContainersAccumulator
from croft.domain.dataset.segments import ProfilePlan, SegmentSummary, plan_of
from croft.domain.dataset.summary import PollBlock, StatsAccumulator

if TYPE_CHECKING:
    from croft.domain.dataset.profile import Subject


def deltas(values: set[int]) -> list[int]:
    """The sorted `values` as the first one and the differences between neighbours."""
    ordered = sorted(values)
    return ordered[:1] + [b - a for a, b in pairwise(ordered)]


def stats_section(acc: StatsAccumulator) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """The state of `acc` (its skips apart) as the "stats" section keeps it (each node's polls
    as their count, first and last), and its "polls" section (each node's times as `deltas`)."""
    for node in list(acc.poll_blocks):
        acc.settled(node)
    polls = {node: deltas(v) for node, v in acc.polls.items()}
    state = {
        "rows": acc.rows,
        "first_ms": acc.first_ms,
        "last_ms": acc.last_ms,
        "polls": {
            node: [len(v), min(v, default=None), max(v, default=None)] for node, v in acc.polls.items()
        },
        "tgids": {node: sorted(v) for node, v in acc.tgids.items()},
        "processes": sorted(
            acc.processes, key=lambda p: (p[0] or "", p[0] is None, p[1] or "", p[1] is None)
        ),
        "workloads": dict(acc.workloads),
        "syscalls": {name: str(total) for name, total in acc.syscall_sums.items()},
    }
    return state, polls


def merge_stats(
    section: dict[str, Any], into: StatsAccumulator, times: Callable[[str], Iterable[int]]
) -> None:
    """Merge the "stats" `section` into `into` (its syscall sums only if `into` keeps them), as
    `into.merge` of the accumulator it was made from would; `times(node)`: the node's poll times
    (from the "polls" section), taken only if they must be (`StatsAccumulator.poll_blocks`)."""
    into.rows += section["rows"]
    first, last = section["first_ms"], section["last_ms"]
    if first is not None:
        into.first_ms = first if into.first_ms is None else min(into.first_ms, first)
    if last is not None:
        into.last_ms = last if into.last_ms is None else max(into.last_ms, last)
    for node, (count, low, high) in section["polls"].items():
        into.polls.setdefault(node, set())
        if count:
            into.poll_blocks.setdefault(node, []).append(PollBlock(count, low, high, partial(times, node)))
    for node, tgids in section["tgids"].items():
        into.tgids.setdefault(node, set()).update(tgids)
    into.processes.update((c, f) for c, f in section["processes"])
    into.workloads.update(section["workloads"])
    if into.syscalls:
        sums = into.syscall_sums
        for name, total in section["syscalls"].items():
            sums[name] += int(total)


def times_of(polls: dict[str, list[int]], node: str) -> Iterator[int]:
    """The poll times of `node` in a "polls" section."""
    return accumulate(polls[node])


def containers_section(acc: ContainersAccumulator) -> list[list[Any]]:
    """The entries of `acc` (its skips apart) as the "containers" section keeps them."""
    return [
        [kind, value, e[0], sorted(e[1]), sorted(e[2]), e[3], e[4], e[5]]
        for (kind, value), e in acc.entries.items()
    ]


def merge_containers(section: list[list[Any]], into: ContainersAccumulator) -> None:
    """Merge the "containers" `section` into `into`, as `into.merge` would."""
    merged = ContainersAccumulator()
    for kind, value, cgroup, frameworks, nodes, first, last, rows in section:
        merged.entries[(kind, value)] = [cgroup, set(frameworks), set(nodes), first, last, rows]
    into.merge(merged)


WHERE = {
    "container": "containers",
    "cgroup": "cgroups",
    "pid": "tgids",
}  # the "profile" maps, by subject kind


def empty_profile() -> dict[str, Any]:
    return {"segments": [], "containers": {}, "cgroups": {}, "tgids": {}}


def add_profile(section: dict[str, Any], summary: SegmentSummary) -> None:
    """Add the segment of `summary` to the "profile" `section`, at the next position."""
    at = len(section["segments"])
    section["segments"].append(
        [
            summary.data_bytes,
            summary.crc32,
            summary.first_ms,
            summary.last_ms,
            summary.state.get("profile"),
            summary.skipped_lines,
        ]
    )
    for kind, value, _, _, _, first, last, _ in summary.state["containers"]:
        if kind == "c":
            section["containers"].setdefault(value, []).append([at, first, last])
    for cgroup in summary.state["cgroups"]:
        section["cgroups"].setdefault(cgroup, []).append(at)
    tgids = section["tgids"]
    for values in summary.state["stats"]["tgids"].values():
        for tgid in values:
            held = tgids.setdefault(str(tgid), [])
            if not held or held[-1] != at:
                held.append(at)


def profile_plans(
    section: dict[str, Any], subject: Subject, from_ms: int | None, to_ms: int | None
) -> list[tuple[ProfilePlan, SegmentSummary | None]]:
    """By position, each segment's `SegmentSummary.profile_plan` for `subject` over the window,
    with, where the plan reads its per-poll figures, a summary that names its data and figures
    (what `croft.adapters.dataset.summaries.read_index` and `read_group` read). `section` needs
    only the map of the subject's kind (`WHERE`)."""
    segments = section["segments"]
    seen: list[list[tuple[str, int, int]]] = [[] for _ in segments]
    if subject.kind == "container":
        for value, places in section["containers"].items():
            if value.startswith(subject.value):
                for at, first, last in places:
                    seen[at].append((value, first, last))
    else:
        value = subject.value if subject.kind == "cgroup" else str(int(subject.value))
        places = section["cgroups" if subject.kind == "cgroup" else "tgids"].get(value, [])
        for at in places:
            seen[at].append(("", 0, 0))
    plans: list[tuple[ProfilePlan, SegmentSummary | None]] = []
    nothing = ProfilePlan(scan=False)
    for (data_bytes, crc32, first_ms, last_ms, figures, skipped), held in zip(segments, seen, strict=True):
        if skipped:
            plans.append((ProfilePlan(scan=True), None))  # a skipped line may mention the subject: read it
            continue
        if not held:
            plans.append((nothing, None))
            continue
        plan = plan_of(subject, from_ms, to_ms, tuple(held), first_ms, last_ms, figures is not None)
        plans.append((plan, SegmentSummary(data_bytes, crc32, {"profile": figures}) if plan.groups else None))
    return plans
