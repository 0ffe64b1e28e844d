"""The real `KernelSource`: croft's eBPF programs (bpf/syscalls.c, bpf/net.c, bpf/ingress.c) loaded
with BCC.

Each `read()` drains the maps, so every count is since the previous read (the first: since loading).
Keys are host tgids, as `bpf_get_current_pid_tgid` reports them whatever pid namespace a process
lives in. An ioctl is a GPU ioctl when its fd, looked up in `<proc_root>/<tgid>/fd/<fd>` at read
time, names a path matching one of `gpu_devices` (shell-style patterns).
"""

from __future__ import annotations

import contextlib
import ctypes
import fnmatch
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs

from croft.adapters.host import bcc_loader
from croft.adapters.host.syscall_table import SyscallNames, syscall_table_paths
from croft.domain.collector.ingress import endpoint_address
from croft.domain.collector.kernel import Activity, EndpointCounts, GpuIoctls, KernelSample, KernelSelection
from croft.errors import UserError

log = logging.getLogger("croft.bcc")

# NVIDIA's (/dev/nvidia0.., nvidiactl, nvidia-uvm, nvidia-modeset), DRM render nodes (AMD, Intel
# compute), AMD's KFD and the accel subsystem. DRM card nodes are left out: display servers
# issue ioctls on them all day without computing anything.
DEFAULT_GPU_DEVICES = ("/dev/nvidia*", "/dev/dri/renderD*", "/dev/kfd", "/dev/accel/accel*")

NET_RX, NET_TX = 0, 1
# What bpf/oncpu.c attaches to (the activity filter of procfs reads).
ONCPU_TRACEPOINTS = (
    ("sched", "sched_switch"),
    ("timer", "hrtimer_expire_entry"),
    ("sched", "sched_process_free"),
    ("cgroup", "cgroup_attach_task"),
)
# Slots of syscalls_dropped (bpf/syscalls.c): lost syscall counts, lost ioctl counts, lost marks of
# new processes, counts kept only per group (syscall_overflow).
DROP_SLOTS, SPILLED_SLOT = (0, 1, 2), 3
PARITY_SLOT = 2  # watch_generation[CROFT_PARITY] (bpf/syscalls.c): the parity of the maps being counted into
SYSCALL_KEY, COUNT = "=IIQ", "=Q"  # struct syscall_key {u32 tgid; u32 nr; u64 group}, its u64 count


@attrs.frozen
class MapSizes:
    """Capacity of each BPF hash map, in entries; an update beyond it counts as a dropped entry
    (a syscall count first goes to the per-group overflow map).

    Measured (the busy-node note): a watched process touches 30-60 syscall numbers in a poll, so
    65,536 (tgid, syscall, group) entries hold about a thousand watched processes' polls; only
    watched processes and GPU holders are counted. The overflow map needs one entry per (group,
    syscall): 8,192 hold 20 containers' whole syscall tables."""

    syscalls: int = 65536  # (tgid, syscall, group) triples seen in one poll
    overflow: int = 8192  # (group, syscall) pairs of counts that found `syscalls` full
    ioctls: int = 16384  # (tgid, fd) pairs that issued ioctls in one poll
    net: int = 16384  # (tgid, direction) pairs that moved socket bytes in one poll
    endpoints: int = 16384  # local TCP (address, port) pairs that received data or a handshake in one poll
    tgids: int = 65536  # processes marked by tgid (watched through cgroup v1, GPU holders, their children)
    ran: int = 65536  # processes that ran in one poll (bpf/oncpu.c; two maps of this size)
    moved: int = 16384  # pids moved to another cgroup, started or freed in one poll (each)
    cgroup_roots: int = 4096  # cgroup-v2 directories the --watch prefixes match
    verdicts: int = 16384  # cgroup ids whose verdict is cached (LRU)

    def cflags(self) -> tuple[str, ...]:
        return (
            f"-DCROFT_SYSCALL_ENTRIES={self.syscalls}",
            f"-DCROFT_OVERFLOW_ENTRIES={self.overflow}",
            f"-DCROFT_IOCTL_ENTRIES={self.ioctls}",
            f"-DCROFT_NET_ENTRIES={self.net}",
            f"-DCROFT_ENDPOINT_ENTRIES={self.endpoints}",
            f"-DCROFT_TGID_ENTRIES={self.tgids}",
            f"-DCROFT_CGROUP_ROOTS={self.cgroup_roots}",
            f"-DCROFT_VERDICT_ENTRIES={self.verdicts}",
            f"-DCROFT_RAN_ENTRIES={self.ran}",
            f"-DCROFT_MOVED_ENTRIES={self.moved}",
        )


@attrs.frozen
class GpuDeviceMatcher:
    """Which paths are GPU devices: any match of the shell-style `patterns`."""

    patterns: tuple[str, ...] = DEFAULT_GPU_DEVICES

    def __call__(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in self.patterns)


class BccKernelSource:
    """Loads the programs on construction (root, kernel headers and BCC needed; a failure is a
    `UserError` naming the cause and the fix) and drains their maps on every `read()`. Syscalls are
    counted only for what `select()` named last (nothing before the first call); ioctls for every
    process."""

    def __init__(
        self,
        *,
        proc_root: Path = Path("/proc"),
        gpu_devices: Sequence[str] = DEFAULT_GPU_DEVICES,
        sizes: MapSizes = MapSizes(),
        programs: Path | None = None,
        modules_root: Path = Path("/lib/modules"),
        verbose: bool = False,
        oncpu: bool = True,
    ) -> None:
        release = os.uname().release
        bcc_loader.check_can_load(release, modules_root)
        names = SyscallNames.load(syscall_table_paths(release, modules_root))
        if names is None:
            raise UserError(
                f"no syscall table (unistd_64.h) in {modules_root / release / 'build'} or /usr/include: "
                f"{bcc_loader.SETUP_HINT}"
            )
        self._names = names
        self._proc_root = proc_root
        self._is_gpu_device = GpuDeviceMatcher(tuple(gpu_devices))
        self.has_net = bcc_loader.has_tracepoint("sock", "sock_send_length") and bcc_loader.has_tracepoint(
            "sock", "sock_recv_length"
        )
        if not self.has_net:
            log.warning(
                "no sock:sock_send_length/sock_recv_length tracepoints (Linux 6.3+, tracefs mounted): "
                "per-process network bytes are left out of the rows"
            )
        self.has_ingress = bcc_loader.has_tracepoint("tcp", "tcp_probe") and bcc_loader.has_tracepoint(
            "sock", "inet_sock_set_state"
        )
        if not self.has_ingress:
            log.warning(
                "no tcp:tcp_probe/sock:inet_sock_set_state tracepoints (tracefs mounted?): ingress has no "
                "tcp_data_segments_s/tcp_connections_s"
            )
        self.has_oncpu = oncpu and all(bcc_loader.has_tracepoint(*event) for event in ONCPU_TRACEPOINTS)
        if oncpu and not self.has_oncpu:
            log.warning(
                "no %s tracepoints (tracefs mounted, a high-resolution timer kernel): every watched "
                "process is read from procfs every poll",
                ", ".join(f"{c}:{e}" for c, e in ONCPU_TRACEPOINTS),
            )
        # Moves between cgroups invalidate bpf/syscalls.c's cached verdicts (CROFT_MOVES); without the
        # tracepoint each cached verdict is checked against the cgroup id instead.
        has_moves = bcc_loader.has_tracepoint("cgroup", "cgroup_attach_task")
        directory = programs if programs is not None else bcc_loader.program_dir()
        stems: tuple[str, ...] = ("syscalls", "net") if self.has_net else ("syscalls",)
        if self.has_ingress:
            stems = (*stems, "ingress")
        if self.has_oncpu:
            stems = ("oncpu", *stems)  # syscalls.c's task_newtask probe marks `started` (CROFT_ONCPU)
        self._bpf: Any = bcc_loader.load(
            bcc_loader.program_text(directory, stems),
            (
                *sizes.cflags(),
                *(("-DCROFT_ONCPU",) if self.has_oncpu else ()),
                *(("-DCROFT_MOVES",) if has_moves else ()),
            ),
            source=directory,
            release=release,
            verbose=verbose,
        )
        # The drained maps come in pairs by the drain parity (bpf/syscalls.c): read() flips it, waits
        # for the programs that read the old one, and drains the old one's maps.
        self._drain_syscalls = self._pair("syscall_counts")
        self._drain_overflow = self._pair("syscall_overflow")
        self._barrier = bcc_loader.ProgramBarrier()
        self._parity = 0
        self._watched_cgroups = self._bpf[b"watched_cgroups"]
        self._watched_tgids = self._bpf[b"watched_tgids"]
        self._generation = self._bpf[b"watch_generation"]
        self._cgroups: frozenset[int] = frozenset()
        self._marked: frozenset[int] = frozenset()
        self._drain_ioctls = self._pair("ioctl_counts")
        self._drain_net = self._pair("net_bytes") if self.has_net else None
        self._dropped_tables = [self._bpf[b"syscalls_dropped"]]
        if self.has_net:
            self._dropped_tables.append(self._bpf[b"net_dropped"])
        self._drain_endpoints = self._pair("endpoint_counts") if self.has_ingress else None
        if self.has_ingress:
            self._dropped_tables.append(self._bpf[b"ingress_dropped"])
        self._dropped_before = 0
        self._spilled_before = 0
        if self.has_oncpu:
            # bpf/oncpu.c marks into ran_even or ran_odd by the parity of the drain generation
            self._drain_ran = (
                bcc_loader.Drain(self._bpf[b"ran_even"]),
                bcc_loader.Drain(self._bpf[b"ran_odd"]),
            )
            self._oncpu_generation = self._bpf[b"oncpu_generation"]
            self._drains = 0
            self._drain_moved = bcc_loader.Drain(self._bpf[b"moved"])
            self._drain_started = bcc_loader.Drain(self._bpf[b"started"])
            self._drain_freed = bcc_loader.Drain(self._bpf[b"freed"])
            self._oncpu_dropped = self._bpf[b"oncpu_dropped"]
            self._oncpu_dropped_before = 0
        log.debug("eBPF programs loaded from %s; syscall names from %s", directory, names.source)

    def _pair(self, name: str) -> bcc_loader.Drain:
        return bcc_loader.Drain(self._bpf[f"{name}_even".encode()], self._bpf[f"{name}_odd".encode()])

    def read(self) -> KernelSample:
        """What the programs counted since the previous call, by host tgid."""
        drained = self._parity
        self._parity ^= 1
        self._generation[ctypes.c_int(PARITY_SLOT)] = ctypes.c_uint32(self._parity)
        self._barrier()  # every program run that read `drained` has ended: its maps are complete
        syscalls: dict[int, dict[str, int]] = {}
        groups: dict[int, int] = {}
        name_of = self._names.name
        keys, values = self._drain_syscalls.raw(drained)
        for (tgid, nr, group), (count,) in zip(
            struct.iter_unpack(SYSCALL_KEY, keys), struct.iter_unpack(COUNT, values), strict=True
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
            struct.iter_unpack(SYSCALL_KEY, keys), struct.iter_unpack(COUNT, values), strict=True
        ):
            per_group = spilled.setdefault(group, {})
            name = name_of(nr)
            per_group[name] = per_group.get(name, 0) + count
        rx: dict[int, int] = {}
        tx: dict[int, int] = {}
        if self._drain_net is not None:
            for key, total in self._drain_net(drained):
                side = tx if key.direction == NET_TX else rx
                side[int(key.tgid)] = side.get(int(key.tgid), 0) + int(total)
        dropped = sum(bcc_loader.per_cpu_total(table, DROP_SLOTS) for table in self._dropped_tables)
        dropped_now, self._dropped_before = dropped - self._dropped_before, dropped
        spilled_total = bcc_loader.per_cpu_total(self._dropped_tables[0], (SPILLED_SLOT,))
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
        for key, value in self._drain_endpoints(drained):
            address = endpoint_address(int(key.family), bytes(key.addr))
            if address is None:
                continue
            where = (address, int(key.port))
            segments, connections = totals.get(where, (0, 0))
            totals[where] = (segments + int(value.data_segments), connections + int(value.connections))
        return tuple(EndpointCounts(a, p, s, c) for (a, p), (s, c) in sorted(totals.items()))

    def activity(self) -> Activity | None:
        """Which tgids ran, which pids moved cgroup, were started or freed since the previous call,
        from bpf/oncpu.c; None without it, or when a full map lost some since the previous call."""
        if not self.has_oncpu:
            return None
        # End the generation whose marks are drained: the CPUs' remembered marks stand for entries
        # of the map they fill from now on, which this drain does not empty.
        ended, self._drains = self._drains, self._drains + 1
        self._oncpu_generation[ctypes.c_int(0)] = ctypes.c_uint32(self._drains)
        ran, _ = self._drain_ran[ended & 1].raw()
        moved, _ = self._drain_moved.raw()
        started, _ = self._drain_started.raw()
        freed, _ = self._drain_freed.raw()
        dropped = bcc_loader.per_cpu_total(self._oncpu_dropped)
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
            one = ctypes.c_uint32(1)
            for cgroup in selection.cgroup_ids - self._cgroups:
                self._watched_cgroups[ctypes.c_uint64(cgroup)] = one
            for cgroup in self._cgroups - selection.cgroup_ids:
                with contextlib.suppress(KeyError):
                    del self._watched_cgroups[ctypes.c_uint64(cgroup)]
            self._cgroups = selection.cgroup_ids
            changed = True
        for tgid in selection.tgids - self._marked:
            self._watched_tgids[ctypes.c_uint32(tgid)] = ctypes.c_uint32(tgid)
            changed = True
        self._marked = selection.tgids
        for key in list(self._watched_tgids.keys()):
            tgid = int(key.value)
            if tgid not in selection.tgids and not (self._proc_root / str(tgid)).exists():
                with contextlib.suppress(KeyError):
                    del self._watched_tgids[key]
                    changed = True
        if changed:
            # Slot 0 is user space's alone (the kernel bumps slot 1), so this read and write lose no bump.
            slot = ctypes.c_int(0)
            self._generation[slot] = ctypes.c_uint32(self._generation[slot].value + 1)

    def _gpu_ioctls(self, drained: int) -> dict[int, GpuIoctls]:
        per_process: dict[int, GpuIoctls] = {}
        for key, value in self._drain_ioctls(drained):
            tgid, count, last_ns = int(key.tgid), int(value.count), int(value.last_ns)
            try:
                path = str((self._proc_root / str(tgid) / "fd" / str(int(key.fd))).readlink())
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
        self._bpf.cleanup()

    def __enter__(self) -> BccKernelSource:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _u32s(packed: bytes) -> tuple[int, ...]:
    return struct.unpack(f"={len(packed) // 4}I", packed)
