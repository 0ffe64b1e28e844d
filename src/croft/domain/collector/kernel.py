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
class KernelSample:
    """What the eBPF programs counted since the previous read (maps are read and cleared once per
    poll). Keys are host tgids. `dropped_entries` counts updates that did not fit a bounded map."""

    syscalls: Mapping[int, Mapping[str, int]] = attrs.field(factory=dict)
    gpu_ioctls: Mapping[int, GpuIoctls] = attrs.field(factory=dict)
    net_rx_bytes: Mapping[int, int] = attrs.field(factory=dict)
    net_tx_bytes: Mapping[int, int] = attrs.field(factory=dict)
    dropped_entries: int = 0


@attrs.frozen
class GpuHolders:
    """Processes NVML says hold a GPU, by host tgid, with the GPU memory they use (bytes).
    `available` is False when there is no driver; detection then rests on ioctls and device files."""

    memory_bytes: Mapping[int, int] = attrs.field(factory=dict)
    available: bool = False


class KernelSource(Protocol):
    def read(self) -> KernelSample:
        """Counters since the previous call (the first call: since the programs were loaded)."""
        ...


class GpuHolderSource(Protocol):
    def read(self) -> GpuHolders: ...
