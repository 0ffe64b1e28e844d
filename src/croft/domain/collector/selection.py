"""Which processes croft reads in full and which it writes.

Without `--watch` only GPU holders are written; with it (comma-separated cgroup path prefixes, e.g.
`kubepods,system.slice/docker`) also every process with a path in a matching cgroup. A prefix
matches the start of a path with the leading '/' ignored, as plain text: `system.slice/docker`
matches `/system.slice/docker-<id>.scope`. Idle processes (no CPU tick and no syscall this poll)
are written once every `IDLE_EVERY` polls.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from croft.domain.collector.snapshot import CgroupMembership, ProcessSample

IDLE_EVERY = 15


def parse_watch(text: str) -> tuple[str, ...]:
    """The prefixes of a `--watch` value: comma-separated, blanks and leading '/' dropped."""
    return tuple(part.strip().lstrip("/") for part in text.split(",") if part.strip())


def matches(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether cgroup `path` (leading '/' ignored) starts with one of `prefixes`."""
    bare = path.lstrip("/")
    return any(bare.startswith(prefix) for prefix in prefixes)


def could_contain(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a cgroup below `path` (itself matching none of `prefixes`) can match one: some prefix
    goes on past `path` and a '/'. The walk for the kernel's watched cgroups descends only there."""
    bare = path.strip("/")
    if not bare:
        return bool(prefixes)
    return any(prefix.startswith(bare + "/") for prefix in prefixes)


def marked_by_tgid(
    processes: Iterable[ProcessSample],
    prefixes: tuple[str, ...],
    gpu_tgids: Collection[int],
    has_v2: bool,
    memberships: Iterable[CgroupMembership] | None = None,
) -> frozenset[int]:
    """The processes the kernel must count by tgid because their cgroup-v2 path does not make them
    watched: GPU holders (written whatever their cgroup), and watched processes whose match is on a
    cgroup-v1 path only (hybrid and v1 hosts). The rest are counted by cgroup id. `memberships`,
    when given, are the distinct membership objects of `processes` (the shell keeps them)."""
    marked = set(gpu_tgids)
    processes = tuple(processes)
    # By id(): processes of one cgroup share one membership object; most polls have none to mark.
    if memberships is None:
        distinct = {id(process.cgroups): process.cgroups for process in processes}
    else:
        distinct = {id(membership): membership for membership in memberships}
    verdicts = {
        key: watched(membership, prefixes)
        and not (has_v2 and membership.unified is not None and matches(membership.unified, prefixes))
        for key, membership in distinct.items()
    }
    if any(verdicts.values()):
        marked.update(process.tgid for process in processes if verdicts[id(process.cgroups)])
    return frozenset(marked)


def watched(membership: CgroupMembership, prefixes: tuple[str, ...]) -> bool:
    """True when any of the process's cgroup paths starts with one of `prefixes`."""
    if not prefixes:
        return False
    for path in membership.paths():
        bare = path.lstrip("/")
        for prefix in prefixes:
            if bare.startswith(prefix):
                return True
    return False


def worth_reading(
    tgid: int, membership: CgroupMembership, prefixes: tuple[str, ...], gpu_tgids: Collection[int]
) -> bool:
    """Whether the shell reads a process in full this poll: it is watched, or eBPF or NVML says it
    touches a GPU. (Open GPU device files are checked by the shell itself.)"""
    return tgid in gpu_tgids or watched(membership, prefixes)
