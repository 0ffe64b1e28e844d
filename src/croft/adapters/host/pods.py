"""The pod name and namespace of a Kubernetes container, read as the collector may without new
privileges: through a process of the container, its /etc/hostname (the pod's name, unless the pod
uses the host's network) and its service account's namespace file. Read once per container id;
what cannot be read is "" (no service account token mounted, a hostNetwork pod, the process gone).
"""

from __future__ import annotations

from pathlib import Path

HOSTNAME = Path("etc/hostname")
NAMESPACE = Path("var/run/secrets/kubernetes.io/serviceaccount/namespace")
MAX_BYTES = 256


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
        found = (_read(root / HOSTNAME), _read(root / NAMESPACE))
        if any(found) or known is None:
            self._known[container_id] = found
        return self._known[container_id]

    def forget_except(self, container_ids: set[str]) -> None:
        """Drop containers no longer seen, so the cache stays as small as the node's containers."""
        for gone in set(self._known) - container_ids:
            del self._known[gone]


def _read(path: Path) -> str:
    try:
        with path.open("rb") as f:
            text = f.read(MAX_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return text if text.isprintable() else ""
