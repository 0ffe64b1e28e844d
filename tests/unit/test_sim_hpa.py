"""croft.sim.hpa: the HPA's algorithm, step by step against hand-computed cases (replica_calculator.go
and horizontal.go's rules), and its laws under hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from croft.sim.hpa import HpaConfig, HpaPod, HpaState, PodMetric, sync

CONFIG = HpaConfig()
OLD = -1000.0  # started long ago: outside the CPU initialization period


def pod(name, ready=True, running=True, start=OLD, ready_at=OLD + 5):
    return HpaPod(name, running, start, ready, ready_at, 1000)


def metric(millicores, at=100.0):
    return PodMetric(millicores, at, 15.0)


def test_within_the_tolerance_nothing_changes():
    # 750m of 1000m = 75 %; 75 / 70 = 1.07, within 10 %.
    decision = sync(100, 1, (pod("a"),), {"a": metric(750)}, HpaState(), CONFIG)
    assert (decision.replicas, decision.utilization) == (1, 75)


def test_ratio_times_ready_pods_rounded_up():
    # 100 % / 70 % = 1.43 -> ceil(1.43 x 2) = 3.
    pods = (pod("a"), pod("b"))
    decision = sync(100, 2, pods, {"a": metric(1000), "b": metric(1000)}, HpaState(), CONFIG)
    assert decision.replicas == 3


def test_utilization_is_an_integer_percent():
    # 1099m -> 109 % (not 109.9): 109 / 70 = 1.557 -> ceil(1.557 x 1) = 2.
    decision = sync(100, 1, (pod("a"),), {"a": metric(1099)}, HpaState(), CONFIG)
    assert (decision.utilization, decision.replicas) == (109, 2)


def test_scale_up_is_limited_to_four_pods_or_double_per_fifteen_seconds():
    hot = {"a": metric(10_000)}  # 1000 %: the metric asks for ceil(14.3) = 15
    first = sync(100, 1, (pod("a"),), hot, HpaState(), CONFIG)
    assert (first.metric_replicas, first.replicas) == (15, 5)  # max(1 + 4, 1 x 2)
    pods = (pod("a"), *(pod(n, ready=False, running=False, start=100) for n in "bcde"))
    again = sync(110, 5, pods, hot, first.state, CONFIG)  # 10 s later: +4 already used this period
    assert again.replicas == 5
    later = sync(116, 5, pods, hot, again.state, CONFIG)  # the event left the 15 s period
    assert later.replicas == 10  # max(5 + 4, 5 x 2), also the max replicas


def test_scale_down_waits_for_the_highest_recommendation_of_300_s():
    pods = tuple(pod(n) for n in "abcde")
    busy = {n: metric(1000) for n in "abcde"}
    quiet = {n: metric(100) for n in "abcde"}
    state = sync(0, 5, pods, busy, HpaState(), CONFIG).state  # recommends 10 (max) but it is not applied here
    held = sync(100, 5, pods, quiet, state, CONFIG)
    assert (held.metric_replicas, held.replicas) == (1, 5)
    still = sync(299, 5, pods, quiet, held.state, CONFIG)
    assert still.replicas == 5  # the t=0 recommendation of 10 is still in the window
    down = sync(301, 5, pods, quiet, still.state, CONFIG)
    assert down.replicas == 1  # every recommendation of the last 300 s asks for 1


def test_missing_pods_count_zero_when_scaling_up_and_a_flip_holds():
    # a at 100 % asks for more; b has no metric yet: counted as 0 -> 50 % < 70 %: the direction flips.
    decision = sync(100, 2, (pod("a"), pod("b")), {"a": metric(1000)}, HpaState(), CONFIG)
    assert decision.replicas == 2


def test_missing_pods_count_full_when_scaling_down():
    # a at 10 %, b missing: counted as 100 % -> 55 % / 70 % = 0.79 -> ceil(0.79 x 2) = 2: no change.
    decision = sync(400, 2, (pod("a"), pod("b")), {"a": metric(100)}, HpaState(), CONFIG)
    assert decision.metric_replicas == 2


def test_pending_and_fresh_pods_are_ignored_then_count_zero_on_the_way_up():
    # b is Pending: ignored, then 0 when scaling up -> (1000 + 0) / 2000 = 50 %: flips, holds.
    pending = (pod("a"), pod("b", ready=False, running=False, start=90))
    assert sync(100, 2, pending, {"a": metric(1000)}, HpaState(), CONFIG).replicas == 2
    # c became Ready at 95; its metric (window 85-100) began before that: ignored the same way.
    fresh = (pod("a"), pod("c", start=80, ready_at=95))
    metrics = {"a": metric(1000), "c": metric(1000)}
    assert sync(100, 2, fresh, metrics, HpaState(), CONFIG).replicas == 2
    # From 110 on, c's window (95-110) starts after its readiness: both count, 1.43 x 2 -> 3.
    metrics = {"a": metric(1000, 110), "c": metric(1000, 110)}
    assert sync(110, 2, fresh, metrics, HpaState(), CONFIG).replicas == 3


@given(
    current=st.integers(1, 10),
    usage=st.lists(st.integers(0, 5000), min_size=1, max_size=10),
    now=st.floats(0, 2000),
)
def test_replicas_stay_within_min_and_max(current, usage, now):
    pods = tuple(pod(f"p{i}") for i in range(len(usage)))
    metrics = {f"p{i}": metric(u, now) for i, u in enumerate(usage)}
    decision = sync(now, current, pods, metrics, HpaState(), CONFIG)
    assert CONFIG.min_replicas <= decision.replicas <= CONFIG.max_replicas
    assert decision.replicas <= max(current + 4, current * 2)
