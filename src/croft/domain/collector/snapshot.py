"""Immutable snapshots of one poll: what procfs, cgroupfs, eBPF and NVML said, and when.

The shell fills these once per poll and hands them to `croft.domain.collector.rows.rows`; the trace recorder
writes them as they are, so a replay feeds the core exactly what the live adapters returned.
Counters are raw cumulative kernel values; nothing here is a rate.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from croft.domain.collector.drm import DrmClient
from croft.domain.collector.kernel import GpuHolders, KernelSample
from croft.domain.instant import Instant as Instant  # re-exported: its home before the clock's own module


@attrs.frozen(cache_hash=True)
class CgroupMembership:
    """Where a process sits, from /proc/<pid>/cgroup: the v2 path (the `0::` line; None on a pure v1
    host) and the v1 path of each controller, as sorted (controller, path) pairs. Paths start with
    '/' and are relative to the hierarchy's mount point. Named v1 hierarchies appear as
    `name=systemd`."""

    unified: str | None
    controllers: tuple[tuple[str, str], ...] = ()

    def controller(self, name: str) -> str | None:
        """The v1 path of controller `name`, or None when it is not mounted as v1."""
        for controller, path in self.controllers:
            if controller == name:
                return path
        return None

    def paths(self) -> tuple[str, ...]:
        """Every distinct path the process sits at, v2 first."""
        seen: list[str] = [] if self.unified is None else [self.unified]
        for _, path in self.controllers:
            if path not in seen:
                seen.append(path)
        return tuple(seen)


@attrs.frozen
class ProcessSample:
    """What procfs says about one process (a thread-group leader) at one poll.

    `start_ticks` (field 22 of stat) tells a reused pid from the old one. `cpu_ticks` is utime+stime
    in clock ticks of `Poll.ticks_per_s`. `read_bytes`/`write_bytes` are storage I/O from
    /proc/<pid>/io (None where unreadable); `runqueue_ns` the time spent waiting on a run queue from
    /proc/<pid>/schedstat (None without schedstats). `libraries` are the basenames of the shared
    objects mapped from /proc/<pid>/maps, sorted; `gpu_device_fds` the open GPU device files."""

    tgid: int
    comm: str
    exe: str
    cwd: str
    cmdline: tuple[str, ...]
    cgroups: CgroupMembership
    start_ticks: int
    cpu_ticks: int
    rss_bytes: int
    threads: int
    ctx_voluntary: int
    ctx_involuntary: int
    read_bytes: int | None
    write_bytes: int | None
    runqueue_ns: int | None
    libraries: tuple[str, ...] = ()
    gpu_device_fds: int = 0


@attrs.frozen
class CgroupSample:
    """What cgroupfs says about the cgroups of one membership at one poll. Every field is None when
    the hierarchy does not offer it (no v1 memory controller, no PSI, ...).

    `cpu_usage_ns` is cumulative CPU time; `nr_periods`/`nr_throttled` the CFS bandwidth counters;
    `memory_bytes` current usage; `oom_kills` the cumulative OOM kill count; `*_pressure_avg10` the
    PSI `some avg10` percentages and `*_pressure_stalled_us` the PSI `some total` counters:
    microseconds in which some task waited for the resource."""

    membership: CgroupMembership
    cpu_usage_ns: int | None = None
    nr_periods: int | None = None
    nr_throttled: int | None = None
    memory_bytes: int | None = None
    oom_kills: int | None = None
    cpu_pressure_avg10: float | None = None
    memory_pressure_avg10: float | None = None
    io_pressure_avg10: float | None = None
    cpu_pressure_stalled_us: int | None = None
    memory_pressure_stalled_us: int | None = None
    io_pressure_stalled_us: int | None = None


@attrs.frozen
class Unread:
    """Syscalls eBPF counted this poll in one cgroup membership for processes procfs did not read:
    gone before the poll listed them (short-lived), or counted without a tgid because the
    per-process map was full (`processes` does not count those). Where they were counted comes from
    the kernel's group key (`croft.domain.collector.kernel.GROUP_ORIGIN`)."""

    membership: CgroupMembership
    processes: int
    syscalls: Mapping[str, int]


@attrs.frozen
class NetnsSample:
    """What one network namespace's /proc/<pid>/net files say at one poll, read through one of its
    processes (`croft.domain.collector.netparse`). `inode` names the namespace (the inode of
    /proc/<pid>/ns/net); `tgids` are the poll's processes in it, ascending. Counters are cumulative
    over the namespace's life: `passive_opens` and `in_segs` (snmp `Tcp:` PassiveOpens, connections
    the kernel accepted a handshake for, and InSegs, TCP segments received), `listen_drops` (netstat
    `TcpExt:` ListenDrops), `rx_bytes`/`rx_packets` (dev, every interface but lo). Gauges:
    `listen_backlog` (connections waiting in accept queues), `unread_bytes` (bytes received and not
    yet read by the application). `addresses` are its own addresses (loopback and link-local left
    out), `listen_ports` the TCP ports it listens on: they attribute the eBPF counts
    (`croft.domain.collector.kernel.EndpointCounts`) to it."""

    inode: int
    tgids: tuple[int, ...]
    passive_opens: int
    in_segs: int
    listen_drops: int
    rx_bytes: int
    rx_packets: int
    listen_backlog: int
    unread_bytes: int
    addresses: tuple[str, ...] = ()
    listen_ports: tuple[int, ...] = ()


@attrs.frozen
class ProcessChanges:
    """How a poll's processes differ from those of the poll before it (`since_monotonic_ns`, that
    poll's `Instant.monotonic_ns`), as the procfs adapter's incremental scan knows it: `changed`
    holds the tgids whose sample is not the earlier poll's very object (new processes and reused
    pids among them), `gone` the tgids of the earlier poll that this one lacks. Every other process
    has the earlier poll's sample, unchanged. `by_tgid` holds this poll's samples by tgid (the
    same objects as `Poll.processes`). A promise of the shell, so that the core's work per poll
    follows what moved (`croft.domain.collector.rows`); never recorded in traces."""

    since_monotonic_ns: int
    changed: frozenset[int]
    gone: frozenset[int]
    by_tgid: Mapping[int, ProcessSample] = attrs.field(repr=False)


@attrs.frozen
class Poll:
    """Everything one poll saw. `dropped` counts pids that exited between listing and reading, or
    whose files could not be parsed (a torn read); they are left out of `processes`. `unread` holds
    the syscalls of processes that were not read, by membership (empty in traces recorded before);
    `netns` the network namespaces of the poll's containers (empty in traces recorded before, and
    where nothing was read); `drm` the DRM clients (`croft.domain.collector.drm`) of the processes
    that hold any, by tgid (empty in traces recorded before, and on hosts without /dev/dri);
    `changes` what changed since the previous poll, when the shell knows (None otherwise; left out
    of equality, a hint that changes no row)."""

    at: Instant
    ticks_per_s: int
    processes: tuple[ProcessSample, ...]
    cgroups: tuple[CgroupSample, ...]
    kernel: KernelSample = attrs.field(factory=KernelSample)
    gpu: GpuHolders = attrs.field(factory=GpuHolders)
    dropped: int = 0
    unread: tuple[Unread, ...] = ()
    netns: tuple[NetnsSample, ...] = ()
    drm: Mapping[int, tuple[DrmClient, ...]] = attrs.field(factory=dict)
    changes: ProcessChanges | None = attrs.field(default=None, eq=False, repr=False)
