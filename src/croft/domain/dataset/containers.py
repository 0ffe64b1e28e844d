"""What `croft stats --containers` lists: every container (and watched host cgroup) of a dataset,
with its cgroup, framework, nodes, first and last seen, and rows. Accumulators merge in any order
with the same result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from croft.domain.dataset.skips import SkipTally
from croft.domain.utc import rfc3339

PodNames = tuple[str, str, str | None]
"""A row's `pod` as (namespace, name, container) (`croft.domain.dataset.row.Pod`)."""


@attrs.frozen
class ContainerEntry:
    """One container (`container_id` set) or host cgroup (`container_id` None): its shortest
    cgroup path seen (the container's own), its framework (the first named, by name), the nodes
    it ran on, its first and last row (unix ms), how many rows it has and its pod's names (the
    first by name where rows named several; None where none did)."""

    container_id: str | None
    cgroup: str
    framework: str | None
    nodes: tuple[str, ...]
    first_ms: int
    last_ms: int
    rows: int
    pod: PodNames | None = None

    def to_json(self) -> dict[str, Any]:
        pod = self.pod
        return {
            "container_id": self.container_id,
            "pod": None if pod is None else {"namespace": pod[0], "name": pod[1], "container": pod[2]},
            "cgroup": self.cgroup,
            "framework": self.framework,
            "nodes": list(self.nodes),
            "first_ms": self.first_ms,
            "first_time": rfc3339(self.first_ms),
            "last_ms": self.last_ms,
            "last_time": rfc3339(self.last_ms),
            "rows": self.rows,
        }


class ContainersAccumulator:
    """Running facts per container id, or per cgroup path for host processes."""

    def __init__(self) -> None:
        # key -> [cgroup, frameworks, nodes, first_ms, last_ms, rows, pods (namespace, name, container)]
        self.entries: dict[tuple[str, str], list[Any]] = {}
        self.skips = SkipTally()

    def add(self, node: str, views: Sequence[Any]) -> None:
        """Count a batch of decoded rows read on `node`."""
        entries = self.entries
        for view in views:
            process = view.process
            key = ("c", process.container_id) if process.container_id else ("h", process.cgroup)
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = [process.cgroup, set(), set(), view.unix_ms, view.unix_ms, 0, set()]
            elif len(process.cgroup) < len(entry[0]) or (
                len(process.cgroup) == len(entry[0]) and process.cgroup < entry[0]
            ):
                entry[0] = process.cgroup
            if process.framework:
                entry[1].add(process.framework)
            entry[2].add(node)
            entry[3] = min(entry[3], view.unix_ms)
            entry[4] = max(entry[4], view.unix_ms)
            entry[5] += 1
            pod = view.pod
            if pod is not None:
                entry[6].add((pod.namespace, pod.name, pod.container))

    def merge(self, other: ContainersAccumulator) -> None:
        self.skips.merge(other.skips)
        for key, theirs in other.entries.items():
            mine = self.entries.get(key)
            if mine is None:
                self.entries[key] = [theirs[0], set(theirs[1]), set(theirs[2]), *theirs[3:6], set(theirs[6])]
                continue
            if (len(theirs[0]), theirs[0]) < (len(mine[0]), mine[0]):
                mine[0] = theirs[0]
            mine[1] |= theirs[1]
            mine[2] |= theirs[2]
            mine[3] = min(mine[3], theirs[3])
            mine[4] = max(mine[4], theirs[4])
            mine[5] += theirs[5]
            mine[6] |= theirs[6]

    def listing(self) -> tuple[ContainerEntry, ...]:
        """Containers first (by id), then host cgroups (by path)."""
        out = [
            ContainerEntry(
                value if kind == "c" else None,
                entry[0],
                min(entry[1]) if entry[1] else None,
                tuple(sorted(entry[2])),
                entry[3],
                entry[4],
                entry[5],
                min(entry[6], key=_pod_order) if entry[6] else None,
            )
            for (kind, value), entry in sorted(self.entries.items())
        ]
        return tuple(out)


def _pod_order(pod: PodNames) -> tuple[str, str, str]:
    return (pod[0], pod[1], pod[2] or "")
