"""Counters beside the gauges of /metrics, so a Prometheus that scrapes every 15-30 s can take
`rate()` over every poll rather than see one poll's gauge in 7 to 15 (pure).

Per group (see `croft.domain.metrics.series`), since the group was first served:
- syscalls by name, whole: each row's calls/s times the poll interval, rounded (the kernel's own
  count), summed; every syscall the group made has its series (bounded by the kernel's syscall
  table), or with `--metrics-syscalls` the listed ones and `other`, so a counter never moves between
  `other` and a name;
- CPU seconds and CFS periods (all, throttled): the cgroup's own kernel counters (`cpu.stat`)
  where the poll read them, as cAdvisor exports them; CPU seconds integrate the cgroup's CPU cores
  otherwise;
- PSI: seconds in which some task of the cgroup waited for CPU, memory or I/O, the kernel's own
  `some total` counters of `{cpu,memory,io}.pressure` (microseconds), as cAdvisor's and
  node_exporter's `_waiting_seconds_total`; absent where the kernel has no PSI (cgroup v1);
- network bytes received and sent, disk bytes read and written: the rows' per-second figures times
  the poll interval, summed over the group's processes;
- GPU engines' busy seconds, by GPU and engine: each row's `gpus` percentages times the poll
  interval, summed over the group's processes.

A group that disappears loses its counters; one that comes back starts again from 0, which
Prometheus reads as a counter reset.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import attrs

from croft.domain.collector import CgroupSample, Poll
from croft.domain.collector import pod_uid as pod_uid  # its home is the collector room
from croft.domain.dataset import Row, engine_percents, gpu_label
from croft.domain.metrics.names import OTHER_SYSCALLS


@attrs.frozen
class GroupCounters:
    """One group's counters. `periods` and `throttled_periods` are None until the kernel's CFS
    counters were read for its cgroup (no CPU limit, cgroup v1 without cpu, ...); so is each of
    `pressure_waiting_seconds` (cpu, memory, io) until its PSI `some total` was read, and each other
    counter until a row of the group measured it (a figure croft could not read adds nothing)."""

    syscalls: Mapping[str, int] = attrs.field(factory=dict)
    cpu_seconds: float | None = None
    periods: int | None = None
    throttled_periods: int | None = None
    pressure_waiting_seconds: tuple[float | None, float | None, float | None] = (None, None, None)
    network_receive_bytes: float | None = None
    network_transmit_bytes: float | None = None
    read_bytes: float | None = None
    write_bytes: float | None = None
    gpu_engine_seconds: Mapping[tuple[str, str], float] = attrs.field(factory=dict)


def own_samples(poll: Poll) -> Callable[[Row], CgroupSample | None]:
    """A lookup of the poll's cgroup sample for a row's process (a group's own cgroup), built once
    per poll."""
    memberships = {p.tgid: p.cgroups for p in poll.processes}
    samples = {c.membership: c for c in poll.cgroups}

    def lookup(own: Row) -> CgroupSample | None:
        membership = memberships.get(own.tgid)
        return None if membership is None else samples.get(membership)

    return lookup


def advance(
    previous: GroupCounters | None,
    rows: Sequence[Row],
    sample: CgroupSample | None,
    interval_s: float,
    syscall_names: Collection[str] | None = None,
) -> GroupCounters:
    """The counters after a poll `interval_s` seconds after the previous one, with the group's
    `rows` (none for a quiet group) and its own cgroup's `sample`. Syscalls are counted whole: a
    row's rate is the kernel's count over the poll rounded to `PER_S_DIGITS`, so rate times the
    interval rounded is that count. With `syscall_names`, a syscall not among them counts as
    `other`."""
    before = previous or GroupCounters()
    syscalls = dict(before.syscalls)
    gpu_seconds = dict(before.gpu_engine_seconds)
    for row in rows:
        calls = row.syscalls if row.short_lived is None else (*row.syscalls, *row.short_lived.syscalls)
        for call in calls:
            name = call.name if syscall_names is None or call.name in syscall_names else OTHER_SYSCALLS
            syscalls[name] = syscalls.get(name, 0) + round(call.rate_per_sec * interval_s)
        for use in row.gpus or ():
            label = gpu_label(use)
            for engine, percent in engine_percents(use):
                key = (label, engine)
                gpu_seconds[key] = gpu_seconds.get(key, 0.0) + percent / 100 * interval_s
    own_cores = (
        (min(rows, key=lambda r: (len(r.process.cgroup), r.process.cgroup)).cgroup_usage.cpu_cores,)
        if rows
        else ()  # a quiet group: nothing added
    )
    if sample is not None and sample.cpu_usage_ns is not None:
        cpu_seconds: float | None = sample.cpu_usage_ns / 1e9
    else:
        cpu_seconds = _add(before.cpu_seconds, own_cores, interval_s)
    return GroupCounters(
        syscalls=syscalls,
        cpu_seconds=cpu_seconds,
        periods=sample.nr_periods if sample is not None and sample.nr_periods is not None else before.periods,
        throttled_periods=sample.nr_throttled
        if sample is not None and sample.nr_throttled is not None
        else before.throttled_periods,
        pressure_waiting_seconds=_pressure(sample, before.pressure_waiting_seconds),
        network_receive_bytes=_add(
            before.network_receive_bytes, [r.usage.network_rx_bytes_s for r in rows], interval_s
        ),
        network_transmit_bytes=_add(
            before.network_transmit_bytes, [r.usage.network_tx_bytes_s for r in rows], interval_s
        ),
        read_bytes=_add(before.read_bytes, [r.usage.read_bytes_s for r in rows], interval_s),
        write_bytes=_add(before.write_bytes, [r.usage.write_bytes_s for r in rows], interval_s),
        gpu_engine_seconds=gpu_seconds,
    )


def _add(total: float | None, per_s: Sequence[float | None], interval_s: float) -> float | None:
    """`total` plus the measured ones of `per_s` over `interval_s`; None while nothing was measured."""
    measured = [value for value in per_s if value is not None]
    if not measured:
        return total
    return (total or 0.0) + sum(measured) * interval_s


def _pressure(
    sample: CgroupSample | None, before: tuple[float | None, float | None, float | None]
) -> tuple[float | None, float | None, float | None]:
    """Seconds of PSI `some` stall by resource: the kernel's totals where the poll read them, the
    last ones read otherwise."""
    if sample is None:
        return before
    now = (sample.cpu_pressure_stalled_us, sample.memory_pressure_stalled_us, sample.io_pressure_stalled_us)
    cpu, memory, io = (old if us is None else us / 1e6 for us, old in zip(now, before, strict=True))
    return cpu, memory, io
