"""Host cgroup paths from paths read inside a cgroup namespace.

On cgroup-v2 nodes containerd and CRI-O give every container its own cgroup namespace, and a pod
cannot opt out, so the collector's /proc/<pid>/cgroup lines are relative to its own namespace root.
The kernel shows a cgroup outside that root with `..` components from the root
(https://docs.kernel.org/admin-guide/cgroup-v2.rst, "Namespace"): with the root at
`/kubepods/pod<a>/<c1>`, a process in `/kubepods/besteffort/pod<b>/<c2>` reads
`0::/../../besteffort/pod<b>/<c2>`. Joining that onto the root's host path and normalizing gives
the host path back; the shell finds the root's host path once (`croft.adapters.host.cgroupns`).

Only the v2 hierarchy is translated: runtimes create private cgroup namespaces on v2 hosts only.
"""

from __future__ import annotations

import attrs

from croft.domain.collector.snapshot import CgroupMembership


def normalized(path: str) -> str:
    """`path` made absolute and canonical: empty and `.` components dropped, each `..` removes the
    component before it, and a `..` at the top stays at `/` (as the kernel's own lookup does).
    The result starts with '/', never ends with one (unless it is '/'), and has no `..`."""
    kept: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if kept:
                kept.pop()
        else:
            kept.append(part)
    return "/" + "/".join(kept)


def host_path(path_as_read: str, namespace_root: str | None) -> str:
    """The host path of cgroup `path_as_read` (a `/proc/<pid>/cgroup` path as the collector read it),
    given the host path of the collector's cgroup namespace root; None means the collector is in the
    host's cgroup namespace and the path is returned unchanged. Otherwise: the path joined onto the
    root, then normalized, never above '/'."""
    if namespace_root is None:
        return path_as_read
    return normalized(namespace_root + "/" + path_as_read)


def host_membership(membership: CgroupMembership, namespace_root: str | None) -> CgroupMembership:
    """`membership` with its v2 path made a host path (`host_path`); v1 paths are left as read.
    The same object when there is nothing to translate."""
    if namespace_root is None or membership.unified is None:
        return membership
    return attrs.evolve(membership, unified=host_path(membership.unified, namespace_root))


def outside_namespace(path_as_read: str) -> bool:
    """Whether a path as read lies outside the reader's namespace root: it starts with `/..`. Host
    init's path (/proc/1/cgroup) reads like this exactly when the reader is in a cgroup namespace
    rooted below the host root."""
    return path_as_read == "/.." or path_as_read.startswith("/../")


def namespace_root(own_host_path: str, own_path_as_read: str) -> str | None:
    """The host path of the reader's namespace root, from where the reader itself sits: its host path
    (the host cgroup whose cgroup.procs lists it) and its own path as read (`/` when it sits at the
    root). None when the two disagree, or when its own path lies outside its namespace (a process
    moved out after unsharing): then the root's name cannot be known."""
    if ".." in own_path_as_read.split("/"):
        return None
    own = normalized(own_path_as_read)
    host = normalized(own_host_path)
    if own == "/":
        return host
    if not host.endswith(own):
        return None
    return host[: len(host) - len(own)] or "/"


def lists_pid(cgroup_procs: bytes, pid: int) -> bool:
    """Whether a `cgroup.procs` file (one pid per line) lists `pid`."""
    wanted = str(pid).encode()
    return any(line.strip() == wanted for line in cgroup_procs.splitlines())
