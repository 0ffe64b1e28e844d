"""What both loaders of croft's eBPF programs share: where the programs are, which of their optional
parts the running kernel can attach (`Features`), the maps' capacities (`MapSizes`), the settings
the programs take (`ProgramSettings`), and what a loader hands back (`LoadedPrograms`).

The loaders: croft.adapters.host.core_loader (the CO-RE objects through libbpf, wherever the kernel
has BTF) and croft.adapters.host.bcc_loader (the same sources compiled by BCC, on a kernel without
BTF but with headers). Importing this module loads nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from croft.adapters.host.bpf_maps import BpfMap

TRACEFS_ROOTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))

# The programs of each optional part, by name: the SEC() function names of bpf/*.c, and the
# tracepoints they attach to (the raw ones need no tracefs entry, but a kernel lists them there too).
NET_PROGRAMS = {
    "sock_send_length": ("sock", "sock_send_length"),
    "sock_recv_length": ("sock", "sock_recv_length"),
}
INGRESS_PROGRAMS = {"tcp_probe": ("tcp", "tcp_probe"), "inet_sock_set_state": ("sock", "inet_sock_set_state")}
ONCPU_PROGRAMS = {
    "sched_switch": ("sched", "sched_switch"),
    "hrtimer_expire_entry": ("timer", "hrtimer_expire_entry"),
    "sched_process_free": ("sched", "sched_process_free"),
}
MOVES_PROGRAMS = {"cgroup_attach_task": ("cgroup", "cgroup_attach_task")}
CORE_PROGRAMS = {"sys_enter": ("raw_syscalls", "sys_enter"), "task_newtask": ("task", "task_newtask")}


def program_dir() -> Path:
    """The directory of croft's bpf/*.c and the CO-RE objects: package data, so a source checkout
    (where the repository's `bpf/` links to it) and an installed wheel find the same files."""
    return Path(__file__).resolve().parents[2] / "bpf"


def has_tracepoint(category: str, event: str) -> bool:
    """Whether tracefs lists tracepoint `category:event` (False also when tracefs is not mounted)."""
    return any((root / "events" / category / event).is_dir() for root in TRACEFS_ROOTS)


@attrs.frozen
class Features:
    """Which optional parts of the programs are attached: per-process socket bytes (bpf/net.c, Linux
    6.3+), TCP arrivals per endpoint (bpf/ingress.c), which processes ran (bpf/oncpu.c; it needs the
    cgroup moves too) and the cgroup_attach_task probe that invalidates cached verdicts."""

    net: bool = True
    ingress: bool = True
    oncpu: bool = True
    moves: bool = True

    @classmethod
    def of_kernel(cls, oncpu: bool = True) -> Features:
        """What this kernel's tracefs lists (`oncpu=False` leaves bpf/oncpu.c out whatever it lists)."""

        def listed(programs: dict[str, tuple[str, str]]) -> bool:
            return all(has_tracepoint(*where) for where in programs.values())

        moves = listed(MOVES_PROGRAMS)
        return cls(
            net=listed(NET_PROGRAMS),
            ingress=listed(INGRESS_PROGRAMS),
            oncpu=oncpu and moves and listed(ONCPU_PROGRAMS),
            moves=moves,
        )

    def programs(self) -> dict[str, bool]:
        """Every program of croft.bpf.c by name, with whether it is attached."""
        parts = (
            (CORE_PROGRAMS, True),
            (NET_PROGRAMS, self.net),
            (INGRESS_PROGRAMS, self.ingress),
            (ONCPU_PROGRAMS, self.oncpu),
            (MOVES_PROGRAMS, self.moves),
        )
        return {name: wanted for programs, wanted in parts for name in programs}


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

    def defines(self) -> dict[str, int]:
        """The programs' CROFT_*_ENTRIES defines (BCC compiles them in)."""
        return {
            "CROFT_SYSCALL_ENTRIES": self.syscalls,
            "CROFT_OVERFLOW_ENTRIES": self.overflow,
            "CROFT_IOCTL_ENTRIES": self.ioctls,
            "CROFT_NET_ENTRIES": self.net,
            "CROFT_ENDPOINT_ENTRIES": self.endpoints,
            "CROFT_TGID_ENTRIES": self.tgids,
            "CROFT_CGROUP_ROOTS": self.cgroup_roots,
            "CROFT_VERDICT_ENTRIES": self.verdicts,
            "CROFT_RAN_ENTRIES": self.ran,
            "CROFT_MOVED_ENTRIES": self.moved,
        }

    def cflags(self) -> tuple[str, ...]:
        return tuple(f"-D{name}={value}" for name, value in self.defines().items())

    def by_map(self) -> dict[str, int]:
        """Each sized map's capacity by name (libbpf sets them before loading the CO-RE object)."""
        return {
            "syscall_counts_even": self.syscalls,
            "syscall_counts_odd": self.syscalls,
            "syscall_overflow_even": self.overflow,
            "syscall_overflow_odd": self.overflow,
            "ioctl_counts_even": self.ioctls,
            "ioctl_counts_odd": self.ioctls,
            "net_bytes_even": self.net,
            "net_bytes_odd": self.net,
            "endpoint_counts_even": self.endpoints,
            "endpoint_counts_odd": self.endpoints,
            "watched_tgids": self.tgids,
            "watched_cgroups": self.cgroup_roots,
            "cgroup_verdicts": self.verdicts,
            "ran_even": self.ran,
            "ran_odd": self.ran,
            "moved": self.moved,
            "started": self.moved,
            "freed": self.moved,
        }


@attrs.frozen
class ProgramSettings:
    """What the programs are told before loading (bpf/croft.h, struct croft_settings): the ioctl
    syscall's number on this machine, and which optional parts are attached."""

    ioctl_nr: int
    features: Features

    def values(self) -> dict[str, int]:
        return {
            "ioctl_nr": self.ioctl_nr,
            "oncpu": int(self.features.oncpu),
            "moves": int(self.features.moves),
        }


class LoadedPrograms(Protocol):
    """What a loader hands back: the programs attached, their maps by name."""

    features: Features
    description: str  # for the log: which loader, from where

    def map(self, name: str) -> BpfMap: ...

    def close(self) -> None:
        """Detach and unload the programs."""
        ...
