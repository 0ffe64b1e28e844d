"""Rates between two polls: never negative, none without a previous sample of the same process."""

from __future__ import annotations

import math

import attrs
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.rates import CgroupRates, ProcessRates, delta
from tests.helpers.snapshots import cgroup, proc

counters = st.integers(min_value=0, max_value=2**63)
intervals = st.integers(min_value=-(10**9), max_value=10**11)
maybe = st.none() | counters


@given(
    st.tuples(counters, counters, counters, maybe, maybe, maybe),
    st.tuples(counters, counters, counters, maybe, maybe, maybe),
    intervals,
)
def test_process_rates_are_never_negative_and_none_when_a_counter_went_back(
    before: tuple[int, ...], after: tuple[int, ...], interval_ns: int
) -> None:
    names = ("cpu_ticks", "ctx_voluntary", "ctx_involuntary", "read_bytes", "write_bytes", "runqueue_ns")
    previous = proc(**dict(zip(names, before, strict=True)))
    sample = proc(**dict(zip(names, after, strict=True)))
    rates = ProcessRates.new(sample, previous, interval_ns, 100)
    pairs = list(zip(after, before, strict=True))
    went_back = any(delta(a, b) is None for a, b in pairs if (a, b) != (None, None))
    if went_back or interval_ns <= 0:
        assert rates is None
        return
    assert rates is not None
    values = [v for v in attrs.asdict(rates).values() if isinstance(v, float)]
    assert all(v >= 0 and math.isfinite(v) for v in values)
    assert rates.cpu_ticks == after[0] - before[0]
    # a counter neither poll read is absent, never 0
    optional = (rates.read_bytes_s, rates.write_bytes_s, rates.runqueue_s)
    assert [v is None for v in optional] == [pair == (None, None) for pair in pairs[3:]]


@given(counters, counters)
def test_first_sighting_has_no_rate(ticks: int, start: int) -> None:
    assert ProcessRates.new(proc(cpu_ticks=ticks, start_ticks=start), None, 2 * 10**9, 100) is None


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=10**6))
def test_reused_pid_has_no_rate_even_when_counters_grew(start: int, later: int) -> None:
    previous = proc(start_ticks=start, cpu_ticks=0)
    reused = proc(start_ticks=start + later, cpu_ticks=10)
    assert ProcessRates.new(reused, previous, 2 * 10**9, 100) is None


def test_rates_use_the_real_interval() -> None:
    previous = proc(cpu_ticks=1000, write_bytes=0)
    sample = proc(cpu_ticks=1300, write_bytes=3_000_000)
    rates = ProcessRates.new(sample, previous, 3 * 10**9, 100)
    assert rates is not None
    assert rates.cpu_cores == 1.0  # 300 ticks of 10 ms over 3 s
    assert rates.write_bytes_s == 1_000_000.0


def test_runqueue_is_seconds_waited_per_second() -> None:
    rates = ProcessRates.new(proc(runqueue_ns=501_000_000), proc(runqueue_ns=1_000_000), 10**9, 100)
    assert rates is not None
    assert rates.runqueue_s == 0.5


@given(maybe, maybe, maybe, maybe, maybe, maybe, intervals)
def test_cgroup_rates_never_negative_and_fraction_within_0_1(
    u0: int | None, u1: int | None, p0: int | None, p1: int | None, t0: int | None, t1: int | None, dt: int
) -> None:
    rates = CgroupRates.new(
        cgroup(cpu_usage_ns=u1, nr_periods=p1, nr_throttled=t1),
        cgroup(cpu_usage_ns=u0, nr_periods=p0, nr_throttled=t0),
        dt,
    )
    pairs = ((u1, u0), (p1, p0), (t1, t0))
    reset = any(delta(a, b) is None for a, b in pairs if (a, b) != (None, None))
    if dt <= 0 or reset:
        assert rates is None
        return
    assert rates is not None
    assert (rates.cpu_cores is None) == (pairs[0] == (None, None))
    assert rates.cpu_cores is None or rates.cpu_cores >= 0
    # throttling needs both CFS counters; a host that offers neither gives none, never 0
    assert (rates.cpu_throttled_fraction is None) == (None in (p1, t1))
    assert rates.cpu_throttled_fraction is None or 0 <= rates.cpu_throttled_fraction <= 1


def test_a_cgroup_without_cfs_counters_has_no_throttling_and_one_without_usage_no_cpu() -> None:
    """A v2 cgroup on a hybrid host (cpu bound to v1): usage_usec, no nr_periods."""
    no_cfs = {"nr_periods": None, "nr_throttled": None}
    rates = CgroupRates.new(
        cgroup(cpu_usage_ns=3 * 10**9, **no_cfs), cgroup(cpu_usage_ns=10**9, **no_cfs), 2 * 10**9
    )
    assert rates == CgroupRates(cpu_cores=1.0, cpu_throttled_fraction=None)
    unread = cgroup(cpu_usage_ns=None, **no_cfs)
    bare = CgroupRates.new(unread, unread, 2 * 10**9)
    assert bare == CgroupRates(cpu_cores=None, cpu_throttled_fraction=None)


def test_recreated_cgroup_gives_no_rate() -> None:
    assert CgroupRates.new(cgroup(cpu_usage_ns=5), cgroup(cpu_usage_ns=10**12), 2 * 10**9) is None


def test_cgroup_rates() -> None:
    rates = CgroupRates.new(
        cgroup(cpu_usage_ns=3 * 10**9, nr_periods=120, nr_throttled=15),
        cgroup(cpu_usage_ns=10**9, nr_periods=100, nr_throttled=10),
        2 * 10**9,
    )
    assert rates == CgroupRates(cpu_cores=1.0, cpu_throttled_fraction=0.25)
