"""Small builders for the collector's snapshots (processes, cgroups, polls, its config) and the
health figures served beside them."""

from __future__ import annotations

from typing import Any

import attrs

from croft.domain.collector.frameworks import Catalog, Framework, Matcher
from croft.domain.collector.kernel import GpuHolders, KernelSample
from croft.domain.collector.rows import CollectorConfig
from croft.domain.collector.snapshot import CgroupMembership, CgroupSample, Instant, Poll, ProcessSample
from croft.domain.metrics.series import Health

WATCHED = CgroupMembership(unified="/kubepods/burstable/pod1234/" + "ab" * 32)
HOST = CgroupMembership(unified="/user.slice/user-0.slice/session-1.scope")
# The collector's health figures beside a poll's series on /metrics.
HEALTH = Health(
    poll_duration_s=0.125,
    rows_written_total=40,
    rows_dropped_total=2,
    compression_backlog_segments=1,
    compression_failures_total=3,
)


def proc(tgid: int = 100, **changes: Any) -> ProcessSample:
    base = ProcessSample(
        tgid=tgid,
        comm="python",
        exe="/usr/bin/python3.11",
        cwd="/srv/project",
        cmdline=("python", "train.py"),
        cgroups=WATCHED,
        start_ticks=5000,
        cpu_ticks=1000,
        rss_bytes=1 << 20,
        threads=4,
        ctx_voluntary=10,
        ctx_involuntary=2,
        read_bytes=4096,
        write_bytes=8192,
        runqueue_ns=1_000_000,
    )
    return attrs.evolve(base, **changes)


def cgroup(membership: CgroupMembership = WATCHED, **changes: Any) -> CgroupSample:
    base = CgroupSample(
        membership=membership,
        cpu_usage_ns=10_000_000_000,
        nr_periods=100,
        nr_throttled=10,
        memory_bytes=1 << 30,
        oom_kills=0,
        cpu_pressure_avg10=1.5,
        memory_pressure_avg10=0.0,
        io_pressure_avg10=0.25,
    )
    return attrs.evolve(base, **changes)


def poll(
    second: float,
    processes: tuple[ProcessSample, ...],
    cgroups: tuple[CgroupSample, ...] | None = None,
    kernel: KernelSample | None = None,
    gpu: GpuHolders | None = None,
) -> Poll:
    if cgroups is None:
        cgroups = tuple({p.cgroups: cgroup(p.cgroups) for p in processes}.values())
    return Poll(
        at=Instant(unix_ms=1_700_000_000_000 + int(second * 1000), monotonic_ns=int(second * 1e9)),
        ticks_per_s=100,
        processes=processes,
        cgroups=cgroups,
        kernel=kernel or KernelSample(),
        gpu=gpu or GpuHolders(),
    )


def config(watch: tuple[str, ...] = ("kubepods",)) -> CollectorConfig:
    catalog = Catalog(frameworks=(Framework(name="pytorch", libraries=("libtorch",)),))
    return CollectorConfig(watch=watch, matcher=Matcher(catalog))
