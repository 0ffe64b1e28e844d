"""The DRM clients of processes: their open `/dev/dri/*` files, read from a procfs root (`/proc`
on the host, a fixture tree in tests) and parsed by `croft.domain.collector.drm`.

For each process asked about, `<root>/<pid>/fd` is listed and each link read; a link to a DRM
device has its `<root>/<pid>/fdinfo/<fd>` read. Reading another user's files needs root (or
CAP_SYS_PTRACE), as croft run has. A process gone, an fd closed between the listing and the read,
or a directory that may not be read is skipped: it holds no client this poll.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from croft.adapters.host.procfs import read_bytes
from croft.domain.collector.drm import DrmClient, parse_fdinfo

DRM_DEVICES = "/dev/dri/"


class DrmFdinfo:
    """Reads the DRM clients of the processes named, under `root`."""

    def __init__(self, root: Path = Path("/proc"), devices: str = DRM_DEVICES) -> None:
        self._root = str(root)
        self._devices = devices

    def read(self, tgids: Iterable[int]) -> dict[int, tuple[DrmClient, ...]]:
        """By tgid, the DRM clients of those of `tgids` that hold any (by fd number)."""
        out: dict[int, tuple[DrmClient, ...]] = {}
        for tgid in sorted(set(tgids)):
            clients = self._clients(tgid)
            if clients:
                out[tgid] = clients
        return out

    def _clients(self, tgid: int) -> tuple[DrmClient, ...]:
        base = f"{self._root}/{tgid}"
        try:
            names = os.listdir(f"{base}/fd")  # noqa: PTH208 - str paths, as procfs reads them
        except OSError:  # gone, or not ours to read
            return ()
        found: list[DrmClient] = []
        for name in sorted(names, key=lambda n: int(n) if n.isdigit() else -1):
            if not name.isdigit():
                continue
            try:
                target = os.readlink(f"{base}/fd/{name}")  # noqa: PTH115
                if not target.startswith(self._devices):
                    continue
                text = read_bytes(f"{base}/fdinfo/{name}").decode("utf-8", "replace")
            except OSError:  # closed since the listing, or the process ended
                continue
            client = parse_fdinfo(text, target, int(name))
            if client is not None:
                found.append(client)
        return tuple(found)
