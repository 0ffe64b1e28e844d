"""Container ids from cgroup paths, for every runtime and layout croft knows.

A host process (no runtime's pattern in its path) has no container id. The table is tried in order;
the first pattern that matches the path wins. Ids are the runtime's hex id (64 digits for docker,
containerd, CRI-O and podman).
"""

from __future__ import annotations

import re

from croft.domain.collector.snapshot import CgroupMembership

_HEX = r"(?P<id>[0-9a-f]{12,64})"

# (runtime, pattern). Patterns match one path segment or a segment sequence, anywhere in the path.
CONTAINER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # systemd cgroup driver: /system.slice/docker-<id>.scope, kubepods-*-pod<uid>.slice/<rt>-<id>.scope
    ("docker", re.compile(rf"/docker-{_HEX}\.scope(?:/|$)")),
    ("containerd", re.compile(rf"/cri-containerd-{_HEX}\.scope(?:/|$)")),
    ("cri-o", re.compile(rf"/crio-(?:conmon-)?{_HEX}\.scope(?:/|$)")),
    ("podman", re.compile(rf"/libpod-(?:conmon-)?{_HEX}\.scope(?:/|$)")),
    # cgroupfs driver: /docker/<id>, /kubepods/<qos>/pod<uid>/<id>, /kubepods/pod<uid>/<id>
    ("docker", re.compile(rf"/docker/{_HEX}(?:/|$)")),
    ("kubernetes", re.compile(rf"/kubepods[^/]*(?:/[^/]+)*?/pod[0-9a-f_-]+(?:\.slice)?/{_HEX}(?:/|$)")),
    ("podman", re.compile(rf"/libpod_parent/libpod-{_HEX}(?:/|$)")),
)


def container_id(path: str) -> str | None:
    """The container id in cgroup `path`, or None for a host process."""
    for _, pattern in CONTAINER_PATTERNS:
        match = pattern.search(path)
        if match is not None:
            return match.group("id")
    return None


def membership_container_id(membership: CgroupMembership) -> str | None:
    """The container id of the first path of `membership` (v2 first, then each v1 controller) that
    names one."""
    for path in membership.paths():
        found = container_id(path)
        if found is not None:
            return found
    return None


# The v1 controllers whose path names the process best, in order, when the v2 path says nothing.
_DISPLAY_ORDER = ("name=systemd", "cpu", "cpuacct", "memory", "pids", "blkio")


def display_path(membership: CgroupMembership) -> str:
    """The cgroup path written in rows: the v2 path unless it is the root '/', else the first
    non-root path among the usual v1 controllers, else '/'."""
    if membership.unified not in (None, "/"):
        return membership.unified
    for name in _DISPLAY_ORDER:
        path = membership.controller(name)
        if path not in (None, "/"):
            return path
    for _, path in membership.controllers:
        if path != "/":
            return path
    return "/"
