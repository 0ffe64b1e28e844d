"""Where the collector's cgroup namespace root sits on the host, found once at start.

In a Kubernetes pod on a cgroup-v2 node the collector has a cgroup namespace of its own (containerd
and CRI-O create one per container; a pod cannot ask for the host's), so /proc/<pid>/cgroup paths
are relative to its namespace root (`croft.domain.collector.cgroupns`). The root's host path is recovered
without any capability: host init's /proc/1/cgroup tells whether the collector is namespaced (it
reads `/..` exactly then); the host's cgroup2 mount (the DaemonSet's read-only hostPath
/sys/fs/cgroup) is then walked for the one cgroup whose `cgroup.procs` lists the collector's own
pid. Reading cgroup.procs needs no privilege, and with hostPID it lists host pids, the same as
`os.getpid()`. Stripping the collector's own path as read from that cgroup's path leaves the root.
(Entering the host's namespace through /proc/1/ns/cgroup would need CAP_SYS_ADMIN, which the
DaemonSet does not have; /proc/1/cgroup alone gives the root's depth but not its names.)
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

import attrs

from croft.adapters.host.procfs import read_bytes
from croft.domain.collector.cgroupns import lists_pid, namespace_root, outside_namespace
from croft.domain.collector.procparse import Unparsable, parse_cgroup_membership


@attrs.frozen
class CgroupNamespace:
    """What the start-up search found: `root` the host path of the namespace root, to be joined onto
    every v2 path read (None: paths are used as read), and one sentence saying so. `unresolved`:
    the collector is in a private namespace whose root could not be found."""

    root: str | None
    summary: str
    unresolved: bool = False


def find_namespace_root(proc_root: Path, unified: str | None, pid: int | None = None) -> CgroupNamespace:
    """Where process `pid` (default: this one) sits relative to the host, from `proc_root` (host
    /proc) and `unified` (the host cgroup2 mount, `CgroupFS.unified`; None without v2)."""
    pid = os.getpid() if pid is None else pid
    own = _v2_path(proc_root / str(pid) / "cgroup")
    init = _v2_path(proc_root / "1" / "cgroup")
    if own is None or init is None:
        return CgroupNamespace(None, "cgroup namespace: no v2 cgroup paths in /proc; paths used as read")
    if not outside_namespace(init):
        return CgroupNamespace(None, "cgroup namespace: the host's; cgroup paths are host paths")
    left = "v2 cgroup paths starting with /.. are left as read and their cgroups are not read"
    if unified is None:
        return CgroupNamespace(
            None, f"cgroup namespace: private, but no cgroup2 mount to search; {left}", unresolved=True
        )
    found = _cgroup_listing(unified, pid)
    root = None if found is None else namespace_root(found, own)
    if found is None or root is None:
        where = "no cgroup" if found is None else f"only {found}, not ending in {own},"
        return CgroupNamespace(
            None,
            f"cgroup namespace: private, and {where} under {unified} lists pid {pid} "
            f"(is the host's /sys/fs/cgroup mounted?); {left}",
            unresolved=True,
        )
    return CgroupNamespace(
        root, f"cgroup namespace: private, rooted at {root} on the host; cgroup paths are joined onto it"
    )


def _v2_path(path: Path) -> str | None:
    try:
        return parse_cgroup_membership(read_bytes(str(path))).unified
    except (OSError, Unparsable):
        return None


def _cgroup_listing(unified: str, pid: int) -> str | None:
    """The path (relative to the mount, starting with '/') of the cgroup whose cgroup.procs lists
    `pid`, breadth first; None when none does."""
    queue: deque[str] = deque([""])
    while queue:
        relative = queue.popleft()
        directory = unified + relative
        try:
            if lists_pid(read_bytes(directory + "/cgroup.procs"), pid):
                return relative or "/"
        except OSError:
            pass  # removed while walking, or not readable: its children may still be
        try:
            with os.scandir(directory) as entries:
                children = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        queue.extend(f"{relative}/{name}" for name in children)
    return None
