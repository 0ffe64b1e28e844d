"""cgroupfs: what each process's cgroups felt, read from a root path (`/sys/fs/cgroup`).

Layouts (https://docs.kernel.org/admin-guide/cgroup-v2.rst, cgroups(7)):
- v2: `<root>/cgroup.controllers` exists; every file sits under `<root><path>/`.
- hybrid: v1 controllers under `<root>/<controller>` (possibly shared, `cpu,cpuacct`) and a v2 tree
  at `<root>/unified` that carries PSI (and any controller not bound to v1).
- v1: only `<root>/<controller>` directories.

One cgroup per row (`croft.domain.collector.container.row_cgroup`): a row names one cgroup path P, the
path that names the process's container (else its v2 path, else its first non-root v1 path), and
every number is read from a hierarchy in which the process sits at exactly P: the v1 controller's
file when that controller's path is P, else the v2 file when the v2 path is P and the file exists,
else nothing (the field is None and the row leaves it out). A hybrid host whose v1 cpuacct path is `/`
while the v2 path is `/ux-test` therefore gives the row `/ux-test`'s own v2 CPU, never the v1
root's; a v1 memory cgroup elsewhere is not read. Sources: CPU usage `cpuacct.usage` (v1, ns) or
`cpu.stat` usage_usec (v2); throttling `cpu.stat` nr_periods/nr_throttled (both); memory
`memory.usage_in_bytes` (v1) or `memory.current` (v2); OOM kills `memory.oom_control` (v1) or
`memory.events` (v2) `oom_kill`; PSI `{cpu,memory,io}.pressure` (v2 only). A file that is missing
(controller absent, cgroup removed mid-read) leaves its field None.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from croft.adapters.host.procfs import read_bytes
from croft.domain.collector.container import row_cgroup
from croft.domain.collector.procparse import (
    Unparsable,
    parse_flat_keyed,
    parse_psi_some,
    parse_single_int,
)
from croft.domain.collector.snapshot import CgroupMembership, CgroupSample


class CgroupFS:
    """Reads `CgroupSample`s under `root`; the layout is found once, at construction."""

    def __init__(self, root: Path = Path("/sys/fs/cgroup")) -> None:
        self.root = root
        self.unified: str | None = None
        if (root / "cgroup.controllers").exists():
            self.unified = str(root)
        elif (root / "unified" / "cgroup.controllers").exists():
            self.unified = str(root / "unified")
        self.v1: dict[str, str] = {}
        if self.unified != str(root) and root.is_dir():
            for entry in sorted(root.iterdir()):
                if entry.is_dir() and not entry.is_symlink() and (entry / "cgroup.procs").exists():
                    if entry.name == "unified":
                        continue
                    for name in entry.name.split(","):
                        key = name if name in _KNOWN_V1 else f"name={name}"
                        self.v1.setdefault(key, str(entry))

    def offered(self) -> tuple[frozenset[str], frozenset[str], bool]:
        """(controllers mounted as v1, controllers the v2 tree offers, whether it has PSI files):
        what `croft.domain.collector.silence.absent_figures` says at start."""
        v2: frozenset[str] = frozenset()
        psi = False
        if self.unified is not None:
            text = _file_text(f"{self.unified}/cgroup.controllers")
            v2 = frozenset(text.split())
            psi = Path(self.unified, "cpu.pressure").exists()
        return frozenset(self.v1), v2, psi

    @property
    def layout(self) -> str:
        """'v2', 'hybrid', 'v1' or 'none'."""
        if self.unified == str(self.root):
            return "v2"
        if self.unified is not None:
            return "hybrid" if self.v1 else "v2"
        return "v1" if self.v1 else "none"

    def read_all(self, memberships: Iterable[CgroupMembership]) -> tuple[CgroupSample, ...]:
        """One sample per distinct membership, in first-seen order; each file is read at most once."""
        files: dict[str, bytes | None] = {}
        out: dict[CgroupMembership, CgroupSample] = {}
        # By id() first: procfs shares one membership object per cgroup, and hashing one is not free
        # (10,000 processes a poll, a few distinct memberships).
        for membership in {id(m): m for m in memberships}.values():
            if membership not in out:
                out[membership] = self._sample(membership, files)
        return tuple(out.values())

    def _file(self, files: dict[str, bytes | None], path: str) -> bytes | None:
        if path not in files:
            try:
                files[path] = read_bytes(path)
            except OSError:
                files[path] = None
        return files[path]

    def _v1(self, membership: CgroupMembership, controller: str, name: str, at: str) -> str | None:
        """The v1 file `name` of `controller`, when the process sits at `at` in that hierarchy."""
        mount = self.v1.get(controller)
        if mount is None or membership.controller(controller) != at:
            return None
        return f"{mount}{at.rstrip('/')}/{name}"

    def _v2(self, membership: CgroupMembership, name: str, at: str) -> str | None:
        """The v2 file `name`, when the process sits at `at` in the v2 tree."""
        if self.unified is None or membership.unified != at:
            return None
        return f"{self.unified}{at.rstrip('/')}/{name}"

    def _sample(self, membership: CgroupMembership, files: dict[str, bytes | None]) -> CgroupSample:
        def get(path: str | None) -> bytes | None:
            return None if path is None else self._file(files, path)

        at = row_cgroup(membership)
        v2_cpu = _keyed(get(self._v2(membership, "cpu.stat", at)))
        usage_ns = _int(get(self._v1(membership, "cpuacct", "cpuacct.usage", at)))
        if usage_ns is None and "usage_usec" in v2_cpu:
            usage_ns = v2_cpu["usage_usec"] * 1000
        v1_cpu = self._v1(membership, "cpu", "cpu.stat", at)
        throttle = _keyed(get(v1_cpu)) if v1_cpu is not None else v2_cpu
        v1_memory = self._v1(membership, "memory", "memory.usage_in_bytes", at)
        if v1_memory is not None:
            memory = _int(get(v1_memory))
            oom = _keyed(get(self._v1(membership, "memory", "memory.oom_control", at))).get("oom_kill")
        else:
            memory = _int(get(self._v2(membership, "memory.current", at)))
            oom = _keyed(get(self._v2(membership, "memory.events", at))).get("oom_kill")
        cpu_psi, memory_psi, io_psi = (
            _psi(get(self._v2(membership, name, at)))
            for name in ("cpu.pressure", "memory.pressure", "io.pressure")
        )
        return CgroupSample(
            membership=membership,
            cpu_usage_ns=usage_ns,
            nr_periods=throttle.get("nr_periods"),
            nr_throttled=throttle.get("nr_throttled"),
            memory_bytes=memory,
            oom_kills=oom,
            cpu_pressure_avg10=cpu_psi[0],
            memory_pressure_avg10=memory_psi[0],
            io_pressure_avg10=io_psi[0],
            cpu_pressure_stalled_us=cpu_psi[1],
            memory_pressure_stalled_us=memory_psi[1],
            io_pressure_stalled_us=io_psi[1],
        )


_KNOWN_V1 = frozenset(
    {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio", "blkio"}
    | {"perf_event", "hugetlb", "pids", "rdma", "misc"}
)


def _file_text(path: str) -> str:
    try:
        return read_bytes(path).decode(errors="replace")
    except OSError:
        return ""


def _keyed(data: bytes | None) -> dict[str, int]:
    return {} if data is None else parse_flat_keyed(data)


def _int(data: bytes | None) -> int | None:
    if data is None:
        return None
    try:
        return parse_single_int(data)
    except Unparsable:
        return None


def _psi(data: bytes | None) -> tuple[float | None, int | None]:
    if data is None:
        return None, None
    try:
        return parse_psi_some(data)
    except Unparsable:
        return None, None
