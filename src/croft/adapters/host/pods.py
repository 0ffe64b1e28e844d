"""The pod name and namespace of a Kubernetes container, read as the collector may without new
privileges: through a process of the container, its /etc/hostname (the pod's name, unless the pod
uses the host's network) and its service account's namespace file. Read once per container id;
what cannot be read is "" (no service account token mounted, a hostNetwork pod, the process gone).

Paths are resolved inside the container's root, as its own processes see them: through
/proc/<pid>/root the kernel would resolve an absolute symbolic link against the *collector's*
root, and in Debian-based images /var/run is the link `/run`, so the namespace file would be looked
for in the collector's /run (found on the real node: every pod read without its namespace). An
image's links cannot point the collector at its own files either, and only a regular file is read
(never a FIFO that would block the poll).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

HOSTNAME = PurePosixPath("etc/hostname")
NAMESPACE = PurePosixPath("var/run/secrets/kubernetes.io/serviceaccount/namespace")
MAX_BYTES = 256
MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


class PodNames:
    """(pod name, namespace) per container id, read through `proc_root/<tgid>/root` and cached."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self._proc_root = proc_root
        self._known: dict[str, tuple[str, str]] = {}

    def lookup(self, container_id: str, tgid: int) -> tuple[str, str]:
        """The pod name and namespace of `container_id`, read through its process `tgid` the first
        time (`("", "")` where unreadable; a failed read is tried again with a later process)."""
        known = self._known.get(container_id)
        if known is not None and all(known):
            return known
        root = self._proc_root / str(tgid) / "root"
        found = (_read(root, HOSTNAME), _read(root, NAMESPACE))
        if any(found) or known is None:
            self._known[container_id] = found
        return self._known[container_id]

    def forget_except(self, container_ids: set[str]) -> None:
        """Drop containers no longer seen, so the cache stays as small as the node's containers."""
        for gone in set(self._known) - container_ids:
            del self._known[gone]


def in_root(root: Path, path: PurePosixPath) -> Path | None:
    """`path` (relative) under `root`, every symbolic link on the way resolved inside `root`: an
    absolute target starts again at `root`, `..` stops at it. None past `MAX_LINKS` links."""
    todo = list(path.parts)
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part in ("", ".", "/"):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        try:
            target = str(root.joinpath(*done, part).readlink())
        except OSError:  # not a link (or not there): a plain name
            done.append(part)
            continue
        links += 1
        if links > MAX_LINKS:
            return None
        if target.startswith("/"):
            done = []
        todo = [*PurePosixPath(target).parts, *todo]
    return root.joinpath(*done)


def _read(root: Path, path: PurePosixPath) -> str:
    """The text of the regular file `path` in the container rooted at `root` ("" where unreadable)."""
    where = in_root(root, path)
    if where is None:
        return ""
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        text = os.read(fd, MAX_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
    return text if text.isprintable() else ""
