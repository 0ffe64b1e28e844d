"""What the kernel-side sources hand the collector core each poll: the eBPF counters and the GPU
holders. The BCC and NVML adapters produce these; fakes and recorded traces produce them in tests.

Both are read once per poll by the shell, which passes them into the core with the poll's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs


@attrs.frozen
class GpuIoctls:
    """GPU ioctls of one process since the previous read.

    `last_monotonic_ns` is the CLOCK_MONOTONIC time (bpf_ktime_get_ns) of the newest one ever seen,
    so a process that stopped issuing ioctls still reports when it last did."""

    count: int
    last_monotonic_ns: int


@attrs.frozen
class EndpointCounts:
    """What the kernel received on one local TCP endpoint since the previous read: `address` (the
    local address as `ipaddress` writes it; an IPv4-mapped IPv6 address as IPv4) and `port`, the
    TCP segments that carried data (`tcp:tcp_probe` with data_len > 0: one per small request) and
    the connections that entered SYN_RECV (`sock:inet_sock_set_state`: handshakes begun)."""

    address: str
    port: int
    data_segments: int = 0
    connections: int = 0


GROUP_ORIGIN = 1 << 63
"""A group key with this bit set is `GROUP_ORIGIN | tgid` of the marked process a process descends
from (see `KernelSelection`); without it, the cgroup-v2 id the process ran in."""


@attrs.frozen
class KernelSample:
    """What the eBPF programs counted since the previous read (maps are read and cleared once per
    poll). Keys are host tgids; only selected processes' syscalls are counted (`KernelSelection`).

    `groups` says where each tgid of `syscalls` was counted (a group key, see `GROUP_ORIGIN`), so
    the counts of a process that exited before procfs read it still find their container.
    `spilled` holds, by group key, counts that found the per-process map full: the container keeps
    them, no process does. `dropped_entries` counts updates that fit nowhere (lost), `spilled_entries`
    the updates that went to `spilled`. `endpoints` holds the TCP arrivals per local endpoint;
    `counts_endpoints` says the tracepoints behind them are attached (False in traces recorded
    before, and where they are not: no arrival is then known, rather than none)."""

    syscalls: Mapping[int, Mapping[str, int]] = attrs.field(factory=dict)
    gpu_ioctls: Mapping[int, GpuIoctls] = attrs.field(factory=dict)
    net_rx_bytes: Mapping[int, int] = attrs.field(factory=dict)
    net_tx_bytes: Mapping[int, int] = attrs.field(factory=dict)
    dropped_entries: int = 0
    groups: Mapping[int, int] = attrs.field(factory=dict)
    spilled: Mapping[int, Mapping[str, int]] = attrs.field(factory=dict)
    spilled_entries: int = 0
    endpoints: tuple[EndpointCounts, ...] = ()
    counts_endpoints: bool = False


@attrs.frozen
class Activity:
    """What the kernel saw since the previous poll (bpf/oncpu.c): `ran`, the tgids that were on a
    CPU; `moved`, the pids moved to another cgroup. A process in neither has not changed what procfs
    says of it but its memory (see `croft.adapters.host.procfs`). With `tracks_pids`, `started`
    holds every process started and `freed` every pid reaped (threads' too), so the list of
    processes can be kept without listing /proc."""

    ran: frozenset[int]
    moved: frozenset[int] = frozenset()
    started: frozenset[int] = frozenset()
    freed: frozenset[int] = frozenset()
    tracks_pids: bool = False


class ActivitySource(Protocol):
    def activity(self) -> Activity | None:
        """Since the previous call; None when the kernel may have missed some (read everything)."""
        ...


@attrs.frozen
class KernelSelection:
    """What the eBPF programs count syscalls of: processes in the cgroup-v2 cgroups `cgroup_ids`
    and their descendants, and processes marked by tgid in `tgids` (and every process they start
    from then on). The shell computes it each poll from `--watch` and the GPU holders."""

    cgroup_ids: frozenset[int] = frozenset()
    tgids: frozenset[int] = frozenset()


@attrs.frozen
class UtilizationSample:
    """One of NVML's per-process utilisation samples (`nvmlDeviceGetProcessesUtilizationInfo`, or
    `nvmlDeviceGetProcessUtilization` on older drivers): percentages of the driver's sampling
    period ending at `timestamp_us` (CPU time, microseconds since the epoch) in which the
    process used the streaming multiprocessors (`sm`), the memory controller (`memory`), the
    video encoder and decoder."""

    timestamp_us: int
    sm: int
    memory: int
    encoder: int
    decoder: int


@attrs.frozen
class NvmlGpu:
    """One GPU (or MIG instance) NVML lists a process on, at one poll: the device's `index` and
    `uuid`, the MIG instance's ids (None outside MIG), the GPU memory the process uses (None
    where NVML cannot tell) and the utilisation samples the driver took of it since the previous
    poll (empty: none, as for a process that did not use the GPU; None: the device gives no
    per-process utilisation, e.g. in MIG mode)."""

    index: int
    uuid: str | None
    memory_bytes: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    samples: tuple[UtilizationSample, ...] | None = None


@attrs.frozen
class GpuHolders:
    """Processes NVML says hold a GPU, by host tgid, with the GPU memory they use (bytes) and, in
    `gpus`, what NVML says of each GPU each uses (empty in traces recorded before it).
    `available` is False when there is no driver; detection then rests on ioctls and device files."""

    memory_bytes: Mapping[int, int] = attrs.field(factory=dict)
    available: bool = False
    gpus: Mapping[int, tuple[NvmlGpu, ...]] = attrs.field(factory=dict)


class KernelSource(Protocol):
    def read(self) -> KernelSample:
        """Counters since the previous call (the first call: since the programs were loaded)."""
        ...

    def select(self, selection: KernelSelection) -> None:
        """Count, from now on, the syscalls of what `selection` names (and no others)."""
        ...


class GpuHolderSource(Protocol):
    def read(self) -> GpuHolders: ...
