"""The real `KernelSource` and `ActivitySource`: croft's eBPF programs (bpf/*.c), loaded by either
loader (`load_kernel_source`), and their maps read each poll.

Each `read()` drains the maps, so every count is since the previous read (the first: since loading).
Keys are host tgids, as `bpf_get_current_pid_tgid` reports them whatever pid namespace a process
lives in. An ioctl is a GPU ioctl when its fd, looked up in `<proc_root>/<tgid>/fd/<fd>` at read
time, names a path matching one of `gpu_devices` (shell-style patterns).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

import attrs

from croft.adapters.host.bpf_maps import Drain, ProgramBarrier
from croft.adapters.host.ebpf_programs import (
    ONCPU_PROGRAMS,
    Features,
    LoadedPrograms,
    MapSizes,
    ProgramSettings,
)
from croft.adapters.host.syscall_table import SyscallNames
from croft.domain.collector.ingress import endpoint_address
from croft.domain.collector.kernel import Activity, EndpointCounts, GpuIoctls, KernelSample, KernelSelection
from croft.errors import UserError

log = logging.getLogger("croft.ebpf")

Loader = Literal["core", "bcc"]

# NVIDIA's (/dev/nvidia0.., nvidiactl, nvidia-uvm, nvidia-modeset), DRM render nodes (AMD, Intel
# compute), AMD's KFD and the accel subsystem. DRM card nodes are left out: display servers
# issue ioctls on them all day without computing anything.
DEFAULT_GPU_DEVICES = ("/dev/nvidia*", "/dev/dri/renderD*", "/dev/kfd", "/dev/accel/accel*")

NET_RX, NET_TX = 0, 1
# Slots of syscalls_dropped (bpf/syscalls.c): lost syscall counts, lost ioctl counts, lost marks of
# new processes, counts kept only per group (syscall_overflow).
DROP_SLOTS, SPILLED_SLOT = (0, 1, 2), 3
PARITY_SLOT = 2  # watch_generation[CROFT_PARITY] (bpf/syscalls.c): the parity of the maps being counted into

# The layouts of bpf/*.c's keys and values (checked against the objects' BTF in the tests).
SYSCALL_KEY = struct.Struct("=IIQ")  # struct syscall_key {u32 tgid; u32 nr; u64 group}
COUNT = struct.Struct("=Q")  # u64
IOCTL_KEY = struct.Struct("=II")  # struct ioctl_key {u32 tgid; u32 fd}
IOCTL_VALUE = struct.Struct("=QQ")  # struct ioctl_value {u64 count; u64 last_ns}
NET_KEY = struct.Struct("=II")  # struct net_key {u32 tgid; u32 direction}
ENDPOINT_KEY = struct.Struct("=16sHHI")  # struct endpoint_key {u8 addr[16]; u16 port; u16 family; u32 pad}
ENDPOINT_VALUE = struct.Struct("=QQ")  # struct endpoint_value {u64 data_segments; u64 connections}
U32, U64 = struct.Struct("=I"), struct.Struct("=Q")


@attrs.frozen
class GpuDeviceMatcher:
    """Which paths are GPU devices: any match of the shell-style `patterns`."""

    patterns: tuple[str, ...] = DEFAULT_GPU_DEVICES

    def __call__(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in self.patterns)


def syscall_names() -> SyscallNames:
    """This machine's syscall table (a `UserError` on a machine croft has none for)."""
    names = SyscallNames.for_machine()
    if names is None:
        raise UserError(
            f"croft has no syscall table for {os.uname().machine} (x86_64 and aarch64): run with --ebpf off"
        )
    return names


def load_kernel_source(
    loader: Loader,
    *,
    proc_root: Path = Path("/proc"),
    gpu_devices: Sequence[str] = DEFAULT_GPU_DEVICES,
    sizes: MapSizes | None = None,
    verbose: bool = False,
    oncpu: bool = True,
    programs: Path | None = None,
    modules_root: Path = Path("/lib/modules"),
) -> EbpfKernelSource:
    """croft's programs loaded by `loader` ("core": the CO-RE object through libbpf; "bcc": the
    sources compiled by BCC against the kernel's headers) and attached. A failure is a `UserError`
    naming the program and the cause. `programs`: another directory of sources or objects (tests)."""
    if os.geteuid() != 0:
        raise UserError("loading eBPF programs needs root: run croft run as root (e.g. with sudo)")
    names = syscall_names()
    ioctl_nr = names.number("ioctl")
    assert ioctl_nr is not None, "every syscall table names ioctl"
    features = Features.of_kernel(oncpu)
    _say_missing(features, oncpu)
    settings = ProgramSettings(ioctl_nr=ioctl_nr, features=features)
    loaded: LoadedPrograms
    if loader == "core":
        from croft.adapters.host.core_loader import CorePrograms, object_path

        path = object_path(directory=programs) if programs is not None else None
        loaded = CorePrograms(settings, sizes, path=path, verbose=verbose)
    else:
        from croft.adapters.host.bcc_loader import BccPrograms

        loaded = BccPrograms(settings, sizes, directory=programs, modules_root=modules_root, verbose=verbose)
    log.debug("eBPF programs loaded: %s; syscall names from %s", loaded.description, names.source)
    return EbpfKernelSource(loaded, names, proc_root=proc_root, gpu_devices=gpu_devices)


def _say_missing(features: Features, oncpu: bool) -> None:
    if not features.net:
        log.warning(
            "no sock:sock_send_length/sock_recv_length tracepoints (Linux 6.3+, tracefs mounted): "
            "per-process network bytes are left out of the rows"
        )
    if not features.ingress:
        log.warning(
            "no tcp:tcp_probe/sock:inet_sock_set_state tracepoints (tracefs mounted?): ingress has no "
            "tcp_data_segments_s/tcp_connections_s"
        )
    if oncpu and not features.oncpu:
        log.warning(
            "no %s tracepoints (tracefs mounted, a high-resolution timer kernel): every watched "
            "process is read from procfs every poll",
            ", ".join(f"{c}:{e}" for c, e in (*ONCPU_PROGRAMS.values(), ("cgroup", "cgroup_attach_task"))),
        )


class EbpfKernelSource:
    """Drains the loaded programs' maps on every `read()`. Syscalls are counted only for what
    `select()` named last (nothing before the first call); ioctls for every process."""

    def __init__(
        self,
        loaded: LoadedPrograms,
        names: SyscallNames,
        *,
        proc_root: Path = Path("/proc"),
        gpu_devices: Sequence[str] = DEFAULT_GPU_DEVICES,
    ) -> None:
        self.loaded = loaded  # the loader's programs and maps
        self._names = names
        self._proc_root = proc_root
        self._is_gpu_device = GpuDeviceMatcher(tuple(gpu_devices))
        features = loaded.features
        self.has_net = features.net
        self.has_ingress = features.ingress
        self.has_oncpu = features.oncpu
        self.description = loaded.description
        # The drained maps come in pairs by the drain parity (bpf/syscalls.c): read() flips it, waits
        # for the programs that read the old one, and drains the old one's maps.
        self._drain_syscalls = self._pair("syscall_counts")
        self._drain_overflow = self._pair("syscall_overflow")
        self._drain_ioctls = self._pair("ioctl_counts")
        self._drain_net = self._pair("net_bytes") if features.net else None
        self._drain_endpoints = self._pair("endpoint_counts") if features.ingress else None
        self._barrier = ProgramBarrier(names.number("membarrier"))
        self._parity = 0
        self._watched_cgroups = loaded.map("watched_cgroups")
        self._watched_tgids = loaded.map("watched_tgids")
        self._generation = loaded.map("watch_generation")
        self._cgroups: frozenset[int] = frozenset()
        self._marked: frozenset[int] = frozenset()
        self._syscalls_dropped = loaded.map("syscalls_dropped")
        self._dropped_maps = [self._syscalls_dropped]
        if features.net:
            self._dropped_maps.append(loaded.map("net_dropped"))
        if features.ingress:
            self._dropped_maps.append(loaded.map("ingress_dropped"))
        self._cpus = loaded.map("syscalls_dropped").lib.num_possible_cpus()
        self._dropped_before = 0
        self._spilled_before = 0
        if features.oncpu:
            # bpf/oncpu.c marks into ran_even or ran_odd by the parity of the drain generation
            self._drain_ran = self._pair("ran")
            self._oncpu_generation = loaded.map("oncpu_generation")
            self._drains = 0
            self._drain_moved = Drain(loaded.map("moved"))
            self._drain_started = Drain(loaded.map("started"))
            self._drain_freed = Drain(loaded.map("freed"))
            self._oncpu_dropped = loaded.map("oncpu_dropped")
            self._oncpu_dropped_before = 0

    def _pair(self, name: str) -> Drain:
        return Drain(self.loaded.map(f"{name}_even"), self.loaded.map(f"{name}_odd"))

    def read(self) -> KernelSample:
        """What the programs counted since the previous call, by host tgid."""
        drained = self._parity
        self._parity ^= 1
        self._generation.set(U32.pack(PARITY_SLOT), U32.pack(self._parity))
        self._barrier()  # every program run that read `drained` has ended: its maps are complete
        syscalls: dict[int, dict[str, int]] = {}
        groups: dict[int, int] = {}
        name_of = self._names.name
        keys, values = self._drain_syscalls.raw(drained)
        for (tgid, nr, group), (count,) in zip(
            SYSCALL_KEY.iter_unpack(keys), COUNT.iter_unpack(values), strict=True
        ):
            per_process = syscalls.get(tgid)
            if per_process is None:
                per_process = syscalls[tgid] = {}
                groups[tgid] = group
            name = name_of(nr)
            per_process[name] = per_process.get(name, 0) + count
        spilled: dict[int, dict[str, int]] = {}
        keys, values = self._drain_overflow.raw(drained)
        for (_, nr, group), (count,) in zip(
            SYSCALL_KEY.iter_unpack(keys), COUNT.iter_unpack(values), strict=True
        ):
            per_group = spilled.setdefault(group, {})
            name = name_of(nr)
            per_group[name] = per_group.get(name, 0) + count
        rx: dict[int, int] = {}
        tx: dict[int, int] = {}
        if self._drain_net is not None:
            keys, values = self._drain_net.raw(drained)
            for (tgid, direction), (total,) in zip(
                NET_KEY.iter_unpack(keys), COUNT.iter_unpack(values), strict=True
            ):
                side = tx if direction == NET_TX else rx
                side[tgid] = side.get(tgid, 0) + total
        dropped = sum(m.per_cpu_total(DROP_SLOTS, self._cpus) for m in self._dropped_maps)
        dropped_now, self._dropped_before = dropped - self._dropped_before, dropped
        spilled_total = self._syscalls_dropped.per_cpu_total((SPILLED_SLOT,), self._cpus)
        spilled_now, self._spilled_before = spilled_total - self._spilled_before, spilled_total
        return KernelSample(
            syscalls=syscalls,
            gpu_ioctls=self._gpu_ioctls(drained),
            net_rx_bytes=rx,
            net_tx_bytes=tx,
            dropped_entries=dropped_now,
            groups=groups,
            spilled=spilled,
            spilled_entries=spilled_now,
            endpoints=self._endpoints(drained),
            counts_endpoints=self._drain_endpoints is not None,
            counts_network=self._drain_net is not None,
        )

    def _endpoints(self, drained: int) -> tuple[EndpointCounts, ...]:
        if self._drain_endpoints is None:
            return ()
        totals: dict[tuple[str, int], tuple[int, int]] = {}
        keys, values = self._drain_endpoints.raw(drained)
        for (addr, port, family, _), (data_segments, connections) in zip(
            ENDPOINT_KEY.iter_unpack(keys), ENDPOINT_VALUE.iter_unpack(values), strict=True
        ):
            address = endpoint_address(family, addr)
            if address is None:
                continue
            segments, opened = totals.get((address, port), (0, 0))
            totals[(address, port)] = (segments + data_segments, opened + connections)
        return tuple(EndpointCounts(a, p, s, c) for (a, p), (s, c) in sorted(totals.items()))

    def activity(self) -> Activity | None:
        """Which tgids ran, which pids moved cgroup, were started or freed since the previous call,
        from bpf/oncpu.c; None without it, or when a full map lost some since the previous call."""
        if not self.has_oncpu:
            return None
        # End the generation whose marks are drained: the CPUs' remembered marks stand for entries
        # of the map they fill from now on, which this drain does not empty.
        ended, self._drains = self._drains, self._drains + 1
        self._oncpu_generation.set(U32.pack(0), U32.pack(self._drains & 0xFFFFFFFF))
        ran, _ = self._drain_ran.raw(ended & 1)
        moved, _ = self._drain_moved.raw()
        started, _ = self._drain_started.raw()
        freed, _ = self._drain_freed.raw()
        dropped = self._oncpu_dropped.per_cpu_total(cpus=self._cpus)
        lost, self._oncpu_dropped_before = dropped - self._oncpu_dropped_before, dropped
        if lost:
            log.warning("%d updates of the on-CPU maps were lost this poll: every process is read", lost)
            return None
        return Activity(
            ran=frozenset(_u32s(ran)),
            moved=frozenset(_u32s(moved)),
            started=frozenset(_u32s(started)),
            freed=frozenset(_u32s(freed)),
            tracks_pids=True,
        )

    def select(self, selection: KernelSelection) -> None:
        """Make the kernel count `selection` from now on. Cgroup roots are added and removed by
        difference; marked tgids are added (each its own origin), and every entry of a process that
        is gone is removed (its children's too: their counts carry their origin in the group key, the
        mark itself is no longer needed). After any change the verdicts' generation is bumped, so the
        verdicts cached per cgroup and per CPU are made again."""
        changed = False
        if selection.cgroup_ids != self._cgroups:
            one = U32.pack(1)
            for cgroup in selection.cgroup_ids - self._cgroups:
                self._watched_cgroups.set(U64.pack(cgroup), one)
            for cgroup in self._cgroups - selection.cgroup_ids:
                self._watched_cgroups.delete(U64.pack(cgroup))
            self._cgroups = selection.cgroup_ids
            changed = True
        for tgid in selection.tgids - self._marked:
            self._watched_tgids.set(U32.pack(tgid), U32.pack(tgid))
            changed = True
        self._marked = selection.tgids
        for key in self._watched_tgids.all_keys():
            (tgid,) = U32.unpack(key)
            if tgid not in selection.tgids and not (self._proc_root / str(tgid)).exists():
                changed = self._watched_tgids.delete(key) or changed
        if changed:
            # Slot 0 is user space's alone (the kernel bumps slot 1), so this read and write lose no bump.
            slot = U32.pack(0)
            stored = self._generation.get(slot)
            generation = U32.unpack(stored)[0] if stored is not None else 0
            self._generation.set(slot, U32.pack((generation + 1) & 0xFFFFFFFF))

    def _gpu_ioctls(self, drained: int) -> dict[int, GpuIoctls]:
        per_process: dict[int, GpuIoctls] = {}
        keys, values = self._drain_ioctls.raw(drained)
        for (tgid, fd), (count, last_ns) in zip(
            IOCTL_KEY.iter_unpack(keys), IOCTL_VALUE.iter_unpack(values), strict=True
        ):
            try:
                path = str((self._proc_root / str(tgid) / "fd" / str(fd)).readlink())
            except OSError:
                continue  # the process exited or closed the fd: nothing left to tell it by
            if not self._is_gpu_device(path):
                continue
            before = per_process.get(tgid)
            if before is not None:
                count, last_ns = count + before.count, max(last_ns, before.last_monotonic_ns)
            per_process[tgid] = GpuIoctls(count=count, last_monotonic_ns=last_ns)
        return per_process

    def close(self) -> None:
        """Detach and unload the programs."""
        self.loaded.close()

    def __enter__(self) -> EbpfKernelSource:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _u32s(packed: bytes) -> tuple[int, ...]:
    return struct.unpack(f"={len(packed) // 4}I", packed)
