"""Container ids from cgroup paths, for every runtime and layout croft knows, and the one cgroup a
row names.

A path is read segment by segment. A segment names a container when it is:

- a runtime's systemd unit or cgroupfs leaf, `<runtime>-<id>[.scope]` with runtime one of docker,
  cri-containerd, crio, crio-conmon, libpod, libpod-conmon, libpod-payload (systemd driver; podman
  and CRI-O conmon; podman's cgroupfs manager under /libpod_parent);
- the systemd driver's cgroupsPath written as it was given to the runtime on cgroup v1,
  `<pod slice>:<runtime>:<id>` with runtime cri-containerd, crio or docker (containerd >= 1.4 with
  SystemdCgroup on v1, possibly under /system.slice/containerd.service/);
- a bare id under a cgroupfs driver parent: `/docker/<id>`, `/kubepods[/<qos>]/pod<uid>/<id>`;
- or any segment of exactly 64 hex digits (the id length of docker, containerd, CRI-O and podman).

A path can name several containers: kind, k3d, docker-in-docker and other nodes inside a container
put the pod's container below the node's (`/docker/<node>/kubepods/besteffort/pod<uid>/<ctr>`).
The innermost one is the process's container. A host process (no segment names a container) has
no container id.

A hybrid host lists a v2 path and one path per v1 controller, and they can disagree: the v2 path of
a kind pod can name only the node (`0::/docker/<node>/system.slice/containerd.service`), a CRI-O
pod's only `crio.service`, while the v1 controllers name the pod's container. The path that names
the most deeply nested container wins (ties: v2 first, then the v1 controllers croft reads, in
`_PREFERENCE` order); its innermost id is the row's container id and the path itself is the row's
cgroup (`row_cgroup`), the one every `cgroup_usage` number is read from.
"""

from __future__ import annotations

import functools
import re

from croft.domain.collector.snapshot import CgroupMembership
from croft.domain.os_text import written

_RUNTIME_UNIT = re.compile(
    r"(?:docker|cri-containerd|crio|crio-conmon|libpod|libpod-conmon|libpod-payload)"
    r"-(?P<id>[0-9a-f]{12,64})(?:\.scope)?"
)
_COLON_FORM = re.compile(r".+\.slice:(?:cri-containerd|crio|docker):(?P<id>[0-9a-f]{12,64})")
_SHORT_ID = re.compile(r"[0-9a-f]{12,64}")
_FULL_ID = re.compile(r"[0-9a-f]{64}")
_POD_DIR = re.compile(r"pod[0-9a-f][0-9a-f_-]*")


def _segment_id(parent: str | None, segment: str) -> str | None:
    for pattern in (_RUNTIME_UNIT, _COLON_FORM):
        match = pattern.fullmatch(segment)
        if match is not None:
            return match.group("id")
    if _FULL_ID.fullmatch(segment):
        return segment
    under_runtime = parent is not None and (parent == "docker" or _POD_DIR.fullmatch(parent) is not None)
    return segment if under_runtime and _SHORT_ID.fullmatch(segment) else None


def container_ids(path: str) -> tuple[str, ...]:
    """Every container id in cgroup `path`, outermost first (empty for a host cgroup)."""
    found: list[str] = []
    parent: str | None = None
    for segment in path.split("/"):
        if not segment:
            continue
        found_id = _segment_id(parent, segment)
        if found_id is not None:
            found.append(found_id)
        parent = segment
    return tuple(found)


def container_id(path: str) -> str | None:
    """The container id in cgroup `path`: the innermost one; None for a host process."""
    ids = container_ids(path)
    return ids[-1] if ids else None


# The v1 controllers in the order their path is preferred when the v2 path says nothing better: the
# ones croft reads numbers from first, then the ones that usually follow the process.
_PREFERENCE = ("cpu", "cpuacct", "memory", "name=systemd", "pids", "blkio")


def _candidates(membership: CgroupMembership) -> list[str]:
    """The process's paths in preference order: v2, then `_PREFERENCE`, then the other v1
    controllers as listed."""
    ordered: list[str] = [] if membership.unified is None else [membership.unified]
    for name in _PREFERENCE:
        path = membership.controller(name)
        if path is not None:
            ordered.append(path)
    ordered.extend(path for name, path in membership.controllers if name not in _PREFERENCE)
    return ordered


@functools.lru_cache(maxsize=8192)
def _naming(membership: CgroupMembership) -> tuple[str, str] | None:
    """The path that names the most deeply nested container (first in preference order on a tie)
    and that container's id; None when no path names one. Cached: a process's membership is the
    same poll after poll."""
    best: tuple[str, str] | None = None
    depth = 0
    seen: set[str] = set()
    for path in _candidates(membership):
        if path in seen:
            continue
        seen.add(path)
        ids = container_ids(path)
        if len(ids) > depth:
            best, depth = (path, ids[-1]), len(ids)
    return best


def membership_container_id(membership: CgroupMembership) -> str | None:
    """The container id of a process: the innermost id of the path that names the most deeply
    nested container, over the v2 path and every v1 controller's; None for a host process."""
    naming = _naming(membership)
    return None if naming is None else naming[1]


@functools.lru_cache(maxsize=8192)
def row_cgroup(membership: CgroupMembership) -> str:
    """The one cgroup a row names, and the one its `cgroup_usage` numbers come from: the path that
    names the process's container; else the v2 path unless it is the root '/'; else the first
    non-root path in preference order; else '/'. Cached, as `_naming`."""
    naming = _naming(membership)
    if naming is not None:
        return naming[0]
    for path in _candidates(membership):
        if path != "/":
            return path
    return "/"


def display_path(membership: CgroupMembership) -> str:
    """The cgroup path written in rows and /metrics labels: `row_cgroup`, its bytes that are not
    UTF-8 escaped (`croft.domain.os_text.written`); cgroupfs is read by `row_cgroup` itself."""
    return written(row_cgroup(membership))


_POD_UID = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?(?:/|$)"
)


def pod_uid(cgroup: str) -> str:
    """The Kubernetes pod UID a cgroup path names (`.../kubepods-burstable-pod<uid>.slice/...` of
    the systemd driver, with `_` for `-`; `.../pod<uid>/...` of cgroupfs), dashed; "" for none."""
    found = _POD_UID.search(cgroup.lower())
    if found is None:
        return ""
    uid = found.group(1).replace("_", "-")
    if "-" not in uid:  # 32 hex digits, as a static pod's cgroup may carry them
        uid = f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:]}"
    return uid
