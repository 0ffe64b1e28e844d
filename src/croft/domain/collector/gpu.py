"""GPU states of one process, as a pure state machine advanced once per poll.

A process holds a GPU in a poll when it made GPU ioctls in it, NVML lists it as a holder, or it has
a GPU device file open (`/dev/nvidia*`, or a DRM file whose fdinfo names its driver). States:

- `gpu-onset`: it holds one now, and in its previous rated poll it did not (or it had none);
- `gpu-held`: it holds one now and did in its previous rated poll;
- `no-gpu`: it holds none now.

`ioctl_count` (this poll's GPU ioctls) is reported for every process that ever touched a GPU, and
`since_last_gpu_ioctl_ms` once an ioctl time is known; both are left out for a process that never
touched one.
"""

from __future__ import annotations

import attrs

from croft.domain.collector.kernel import GpuIoctls
from croft.domain.dataset import Workload

NS_PER_MS = 1_000_000


@attrs.frozen
class GpuState:
    """What the machine remembers of one process between polls. `last_ioctl_monotonic_ns` is the
    CLOCK_MONOTONIC time of its newest GPU ioctl, None when none was ever seen."""

    holding: bool = False
    touched: bool = False
    last_ioctl_monotonic_ns: int | None = None


@attrs.frozen
class GpuReading:
    """The GPU part of one row."""

    workload: Workload
    ioctl_count: int | None
    since_last_gpu_ioctl_ms: int | None


def step(
    previous: GpuState | None,
    ioctls: GpuIoctls | None,
    nvml_holder: bool,
    device_fds: int,
    now_monotonic_ns: int,
) -> tuple[GpuReading, GpuState]:
    """Advance one process's GPU state by one poll; `previous` is None for a process with no state
    yet (first rated poll, or its pid was reused)."""
    if (
        ioctls is None
        and not nvml_holder
        and device_fds == 0
        and (previous is None or previous is _NEVER or previous == _NEVER)
    ):
        return _NO_GPU, _NEVER  # the common case: a process that never touched a GPU
    before = previous if previous is not None else _NEVER
    count = ioctls.count if ioctls is not None else 0
    last_ns = before.last_ioctl_monotonic_ns
    if ioctls is not None and (count > 0 or ioctls.last_monotonic_ns > 0):
        last_ns = ioctls.last_monotonic_ns if last_ns is None else max(last_ns, ioctls.last_monotonic_ns)
    holding = count > 0 or nvml_holder or device_fds > 0
    touched = before.touched or holding or last_ns is not None
    workload: Workload = ("gpu-held" if before.holding else "gpu-onset") if holding else "no-gpu"
    since_ms = None if last_ns is None else max(now_monotonic_ns - last_ns, 0) // NS_PER_MS
    reading = GpuReading(
        workload=workload,
        ioctl_count=count if touched else None,
        since_last_gpu_ioctl_ms=since_ms,
    )
    return reading, GpuState(holding=holding, touched=touched, last_ioctl_monotonic_ns=last_ns)


_NEVER = GpuState()
_NO_GPU = GpuReading(workload="no-gpu", ioctl_count=None, since_last_gpu_ioctl_ms=None)
