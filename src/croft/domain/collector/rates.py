"""Rates between two polls, in the one shape every model step has: `new(sample, previous | None)`.

A rate exists only when there is a previous sample of the same thing and every counter it uses
moved forward: a first sighting, a reused pid (start time changed), a recreated cgroup or a counter
that went backwards all give `None`, never a negative or huge number. Intervals are the real time
between the two polls on the monotonic clock, not an assumed 2 s.

Rounding (so datasets are byte-stable and readable): CPU cores, fractions and `runqueue_s` are
rounded to 4 decimal places; per-second counts of bytes, switches and syscalls to 2.
"""

from __future__ import annotations

import attrs

from croft.domain.collector.snapshot import CgroupSample, ProcessSample

NS_PER_S = 1_000_000_000
CORES_DIGITS = 4
PER_S_DIGITS = 2


def delta(current: int | None, previous: int | None) -> int | None:
    """`current - previous` for a cumulative counter; None when either is missing or it went back."""
    if current is None or previous is None or current < previous:
        return None
    return current - previous


class _Reset:
    """A counter that went back, or was read in one poll and not the other: no rate at all."""


RESET = _Reset()


def optional_delta(current: int | None, previous: int | None) -> int | _Reset | None:
    """`delta` of a counter the host may not offer: None when neither poll read it (the figure is
    absent, never 0), `RESET` when only one did or it went back."""
    if current is None and previous is None:
        return None
    found = delta(current, previous)
    return RESET if found is None else found


def optional_per_s(count: int | None, interval_s: float, digits: int = PER_S_DIGITS) -> float | None:
    """`per_s` of a count that may be absent (None stays None)."""
    return None if count is None else per_s(count, interval_s, digits)


def per_s(count: int, interval_s: float, digits: int = PER_S_DIGITS) -> float:
    """`count` per second over `interval_s` (> 0), rounded to `digits`; never negative."""
    return round(max(count, 0) / interval_s, digits)


@attrs.frozen
class ProcessRates:
    """Per-second rates of one process between two polls. `cpu_cores` is CPU seconds per second;
    `runqueue_s` seconds spent waiting on a run queue per second. `cpu_ticks` is the raw tick delta
    (0 means the process did not run), kept for the idle test."""

    cpu_cores: float
    cpu_ticks: int
    ctx_voluntary_s: float
    ctx_involuntary_s: float
    read_bytes_s: float | None
    write_bytes_s: float | None
    runqueue_s: float | None

    @classmethod
    def new(
        cls, sample: ProcessSample, previous: ProcessSample | None, interval_ns: int, ticks_per_s: int
    ) -> ProcessRates | None:
        """Rates from `previous` to `sample` over `interval_ns`; None for a first sighting, a reused
        pid, a non-positive interval or any counter that went backwards. A counter neither poll
        could read (/proc/<pid>/io unreadable, no schedstats) gives an absent (None) figure."""
        if previous is None or interval_ns <= 0 or ticks_per_s <= 0:
            return None
        if previous is sample:  # the same reading (not read again: it did not run): nothing moved
            return _still(sample)
        if previous.tgid != sample.tgid or previous.start_ticks != sample.start_ticks:
            return None
        ticks = delta(sample.cpu_ticks, previous.cpu_ticks)
        voluntary = delta(sample.ctx_voluntary, previous.ctx_voluntary)
        involuntary = delta(sample.ctx_involuntary, previous.ctx_involuntary)
        read = optional_delta(sample.read_bytes, previous.read_bytes)
        written = optional_delta(sample.write_bytes, previous.write_bytes)
        runqueue = optional_delta(sample.runqueue_ns, previous.runqueue_ns)
        if ticks is None or voluntary is None or involuntary is None:
            return None
        if isinstance(read, _Reset) or isinstance(written, _Reset) or isinstance(runqueue, _Reset):
            return None
        interval_s = interval_ns / NS_PER_S
        return cls(
            cpu_cores=per_s(ticks, interval_s * ticks_per_s, CORES_DIGITS),
            cpu_ticks=ticks,
            ctx_voluntary_s=per_s(voluntary, interval_s),
            ctx_involuntary_s=per_s(involuntary, interval_s),
            read_bytes_s=optional_per_s(read, interval_s),
            write_bytes_s=optional_per_s(written, interval_s),
            runqueue_s=optional_per_s(runqueue, interval_s * NS_PER_S, CORES_DIGITS),
        )


_STILL = ProcessRates(
    cpu_cores=0.0,
    cpu_ticks=0,
    ctx_voluntary_s=0.0,
    ctx_involuntary_s=0.0,
    read_bytes_s=0.0,
    write_bytes_s=0.0,
    runqueue_s=0.0,
)


def _still(sample: ProcessSample) -> ProcessRates:
    """The rates of a process that did not run since its last reading: 0 where measured."""
    if sample.read_bytes is not None and sample.write_bytes is not None and sample.runqueue_ns is not None:
        return _STILL
    return attrs.evolve(
        _STILL,
        read_bytes_s=None if sample.read_bytes is None else 0.0,
        write_bytes_s=None if sample.write_bytes is None else 0.0,
        runqueue_s=None if sample.runqueue_ns is None else 0.0,
    )


@attrs.frozen
class CgroupRates:
    """What a cgroup felt between two polls: CPU cores used and the share of CFS periods throttled
    (0 when no period elapsed or there is no CPU limit). Each is None where the cgroup offers no
    such counter (no CPU usage file; no CFS bandwidth counters, as on a hybrid host's v2 tree)."""

    cpu_cores: float | None
    cpu_throttled_fraction: float | None

    @classmethod
    def new(cls, sample: CgroupSample, previous: CgroupSample | None, interval_ns: int) -> CgroupRates | None:
        """Rates from `previous` to `sample`; None for a first sighting, a non-positive interval or
        a counter that went backwards (the cgroup was recreated)."""
        if previous is None or interval_ns <= 0:
            return None
        usage = optional_delta(sample.cpu_usage_ns, previous.cpu_usage_ns)
        periods = optional_delta(sample.nr_periods, previous.nr_periods)
        throttled = optional_delta(sample.nr_throttled, previous.nr_throttled)
        if isinstance(usage, _Reset) or isinstance(periods, _Reset) or isinstance(throttled, _Reset):
            return None
        fraction: float | None = None
        if periods is not None and throttled is not None:
            fraction = round(min(throttled / periods, 1.0), CORES_DIGITS) if periods > 0 else 0.0
        return cls(
            cpu_cores=optional_per_s(usage, interval_ns, CORES_DIGITS),
            cpu_throttled_fraction=fraction,
        )


UNREAD_CGROUP = CgroupRates(cpu_cores=None, cpu_throttled_fraction=None)
"""The rates of a cgroup cgroupfs said nothing about: nothing measured."""
