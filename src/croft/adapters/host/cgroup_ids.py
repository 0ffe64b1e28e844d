"""Cgroup-v2 ids for the kernel's filter: the directories the `--watch` prefixes match, and the path
of an id a process was counted in.

A cgroup's id (what `bpf_get_current_cgroup_id` returns) is the inode number of its directory in
the cgroup2 mount. Paths here are the mount's: '/' is its root, as in /proc/<pid>/cgroup's `0::`
line read on the host.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from croft.domain.collector.selection import could_contain, matches


def watched_roots(mount: str, prefixes: tuple[str, ...]) -> dict[int, str]:
    """id -> path of the top-most cgroups whose path matches one of `prefixes` (their descendants
    are watched through them). Only directories that can lead to a match are listed."""
    roots: dict[int, str] = {}
    stack = [(mount, "")]
    while stack:
        directory, path = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # removed meanwhile
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                child = f"{path}/{entry.name}"
                if matches(child, prefixes):
                    roots[entry.inode()] = child
                elif could_contain(child, prefixes):
                    stack.append((entry.path, child))
            except OSError:
                continue
    return roots


def subtree_paths(mount: str, roots: Mapping[int, str]) -> dict[int, str]:
    """id -> path of every cgroup at or below `roots` (to name the cgroup of a process that exited
    before it was read)."""
    found = dict(roots)
    stack = [(mount + path, path) for path in roots.values()]
    while stack:
        directory, path = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    child = f"{path}/{entry.name}"
                    found[entry.inode()] = child
                    stack.append((entry.path, child))
            except OSError:
                continue
    return found
