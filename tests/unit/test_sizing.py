"""croft scale sized in one step: the replicas an offered load and a queued backlog ask for, and the
laws of `decide` on estimates from any signal (a step burst reaches its final count within
confirm_polls + 1 polls and never asks for more than load and backlog need; a gap never scales down)."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.metrics import names
from croft.domain.metrics.exposition import Sample, render_exposition
from croft.domain.scaling.decision import (
    CollectorScrape,
    Decision,
    DeploymentView,
    Estimate,
    Observations,
    PodView,
    ScaleConfig,
    ScaleHistory,
    config_problem,
    decide,
    desired_replicas,
    estimate_rate,
    replicas_for,
)
from croft.domain.scaling.log import decision_fields, log_line, render
from croft.domain.scaling.sizing import DRAIN_S, clamp_replicas, replica_need

STEP_MS = 2000
WEBAPP = ScaleConfig("sendto", 2.0, 50.63, target=0.7, max_replicas=10)


def estimate(rate: float, backlog: float = 0.0, complete: bool = True) -> Estimate:
    gaps = () if complete else ("collector croft-0 did not answer: connection refused",)
    return Estimate(rate, 3, gaps, backlog)


def run(
    estimates: list[Estimate],
    replicas: int,
    config: ScaleConfig,
    limit: float = 1.0,
    history: ScaleHistory | None = None,
    t0_ms: int = STEP_MS,
) -> list[Decision]:
    """`decide` every poll in turn, carrying each decision out (as the live loop does)."""
    decisions = []
    history = history or ScaleHistory()
    for i, est in enumerate(estimates):
        view = DeploymentView("croft-exp", "webapp", replicas, limit)
        decision = decide(t0_ms + i * STEP_MS, est, view, config, history)
        decisions.append(decision)
        replicas, history = decision.replicas, decision.history
    return decisions


def test_the_need_adds_the_drain_at_the_full_limit_to_the_load_at_the_target() -> None:
    # 75 req/s x 50 ms = 3.75 cores; at 0.7 of 1 core: 5.36 replicas.
    assert replica_need(75, 0, 50, 1.0, 0.7, 30) == pytest.approx(75 * 0.05 / 0.7)
    # 300 queued x 50 ms = 15 CPU-seconds; within 30 s at 1 core: 0.5 replicas more.
    assert replica_need(75, 300, 50, 1.0, 0.7, 30) == pytest.approx(75 * 0.05 / 0.7 + 0.5)
    assert replica_need(-5, -10, 50, 1.0, 0.7, 30) == 0.0
    config = ScaleConfig("sendto", 2.0, 50.0, target=0.7, drain_s=30)
    assert replicas_for(75, 1.0, config) == 6
    assert replicas_for(75, 1.0, config, backlog_requests=300) == 6  # 5.86
    assert replicas_for(75, 1.0, config, backlog_requests=600) == 7  # 6.36
    assert replicas_for(75, 1.0, config, backlog_requests=1e308) == 10
    assert clamp_replicas(float("nan"), 10) == 10 and clamp_replicas(2.0000000000000004, 10) == 2
    assert ScaleConfig("sendto", 2.0, 50.0).drain_s == DRAIN_S


def test_the_webapp_burst_is_sized_in_one_step() -> None:
    """5 -> 75 req/s with 150 requests queued at the first full poll: one scale-up, 1 -> 6, at the
    second poll of the burst (confirm_polls 2), and nothing after it while the burst lasts, though
    the backlog grows to 500 while the new pods start (at the default --drain-secs)."""
    before = [estimate(5.0)] * 5
    burst = [estimate(40.0, 40.0), estimate(75.0, 150.0), *[estimate(75.0, 500.0)] * 20]
    decisions = run(before + burst, 1, WEBAPP)
    ups = [(i - len(before), d.current, d.replicas) for i, d in enumerate(decisions) if d.action == "up"]
    assert ups == [(1, 1, 6)]
    assert all(d.action == "hold" for d in decisions[len(before) + 2 :])


def test_the_log_names_the_backlog_only_when_there_is_one() -> None:
    view = DeploymentView("croft-exp", "webapp", 1, 1.0)
    with_backlog = decide(STEP_MS, estimate(75.0, 150.4), view, WEBAPP, ScaleHistory())
    assert "replicas=1->1 backlog_requests=150.4 decision=hold" in log_line(with_backlog)
    assert json.loads(render("t", decision_fields(with_backlog), "json"))["backlog_requests"] == 150.4
    without = decide(STEP_MS, estimate(75.0), view, WEBAPP, ScaleHistory())
    assert "backlog" not in log_line(without)
    assert "backlog_requests" not in json.loads(render("t", decision_fields(without), "json"))


def ingress_body(now_ms: int, containers: dict[str, tuple[float, float | None, float | None]]) -> str:
    """A collector's /metrics: per container (tcp_data_segments rate, listen backlog, unread bytes;
    None: no such gauge)."""
    samples = [Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), now_ms / 1000)]
    for cid, (rate, listen, unread) in containers.items():
        where = ((names.LABEL_CONTAINER_ID, cid),)
        samples.append(Sample(names.CONTAINER_CPU_CORES, where, 0.9))
        samples.append(
            Sample(names.CONTAINER_INGRESS_RATE, (*where, (names.LABEL_SIGNAL, "tcp_data_segments")), rate)
        )
        if listen is not None:
            samples.append(Sample(names.CONTAINER_LISTEN_BACKLOG, where, listen))
        if unread is not None:
            samples.append(Sample(names.CONTAINER_UNREAD_BYTES, where, unread))
    return render_exposition(samples)


INGRESS = ScaleConfig("sendto", 1.0, 50.63, signal="tcp_data_segments")


def test_the_backlog_is_read_from_the_queues_of_each_pod_once() -> None:
    """web-1 (two containers sharing a namespace: counted once, the larger) has 40 connections
    waiting and 30 000 unread bytes, web-2 none: 40 requests, or 40 + 30 000 / 250 = 160 with
    --bytes-per-request 250; at 75 req/s that asks for 6, then 7 replicas."""
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    now = 1_800_000_000_000
    body = ingress_body(now, {a: (60.0, 40.0, 30_000.0), b: (60.0, 40.0, 30_000.0), c: (15.0, 0.0, None)})
    observations = Observations(
        now, (PodView("web-1", (a, b)), PodView("web-2", (c,))), (CollectorScrape("n", now, body),)
    )
    estimate = estimate_rate(observations, INGRESS)
    assert estimate.complete and estimate.request_rate == 75.0 and estimate.backlog_requests == 40.0
    with_bytes = attrs.evolve(INGRESS, bytes_per_request=250.0)
    assert estimate_rate(observations, with_bytes).backlog_requests == 160.0
    view = DeploymentView("croft-exp", "webapp", 2, 1.0)
    assert desired_replicas(observations, view, INGRESS, ScaleHistory()).desired == 6  # 5.42 + 0.03
    short = attrs.evolve(with_bytes, drain_s=10.0)
    assert desired_replicas(observations, view, short, ScaleHistory()).desired == 7  # 5.42 + 0.81
    syscall = estimate_rate(observations, attrs.evolve(INGRESS, signal="syscall"))
    assert syscall.backlog_requests == 0.0  # the queues count only with an ingress signal


def test_a_garbled_queue_gauge_counts_nothing_and_makes_a_lower_bound() -> None:
    a = "a" * 64
    now = 1_800_000_000_000
    body = ingress_body(now, {a: (30.0, float("nan"), -5.0)})
    observations = Observations(now, (PodView("web-1", (a,)),), (CollectorScrape("n", now, body),))
    estimate = estimate_rate(observations, attrs.evolve(INGRESS, bytes_per_request=100.0))
    assert estimate.backlog_requests == 0.0 and estimate.request_rate == 30.0
    assert len(estimate.gaps) == 2 and "croft_container_listen_backlog nan" in estimate.gaps[0]
    decision = desired_replicas(observations, DeploymentView("x", "web", 5, 1.0), INGRESS, ScaleHistory())
    assert decision.action != "down"


def test_bytes_per_request_must_be_a_finite_size() -> None:
    assert config_problem(attrs.evolve(INGRESS, bytes_per_request=0.0)) is None
    for bad in (-1.0, float("nan"), float("inf")):
        problem = config_problem(attrs.evolve(INGRESS, bytes_per_request=bad)) or ""
        assert problem.startswith("--bytes-per-request must be a finite number in [0, 1e+09]")


# -- laws ------------------------------------------------------------------------------------------

configs = st.builds(
    ScaleConfig,
    syscall=st.just("sendto"),
    calls_per_request=st.just(2.0),
    cpu_per_request_ms=st.sampled_from([10.0, 50.0, 120.0]),
    target=st.sampled_from([0.5, 0.7, 1.0]),
    max_replicas=st.integers(1, 12),
    confirm_polls=st.integers(1, 4),
    stabilization_s=st.sampled_from([0.0, 6.0, 30.0, 300.0]),
    drain_s=st.sampled_from([5.0, 30.0, 120.0]),
)
rates = st.floats(0, 400, allow_nan=False)
backlogs = st.floats(0, 5000, allow_nan=False)
limits = st.sampled_from([0.5, 1.0, 2.0])


@given(
    configs,
    limits,
    st.integers(1, 12),
    st.integers(0, 30),
    rates,
    rates,
    backlogs,
    st.one_of(st.none(), st.floats(0, 1)),
    st.integers(0, 40),
)
def test_a_step_burst_reaches_its_final_count_within_confirm_polls_plus_one(
    config: ScaleConfig,
    limit: float,
    start: int,
    settle: int,
    base: float,
    peak: float,
    backlog: float,
    partial: float | None,
    extra: int,
) -> None:
    """Steady polls at `base`, then a step to `peak` with `backlog` queued; the first poll of the
    burst may see only part of it (`partial`: the collector's window straddled the onset). Once the
    burst asks for more than the replicas at its onset, the count reaches what load and backlog need
    by poll confirm_polls + 1 and stays there; no poll ever asks for more than that need, nor for
    more than --max-replicas."""
    base, peak = min(base, peak), max(base, peak)
    start = min(start, config.max_replicas)
    before = run([estimate(base)] * settle, start, config, limit)
    onset_replicas = before[-1].replicas if before else start
    history = before[-1].history if before else ScaleHistory()
    burst = [estimate(peak, backlog)] * (config.confirm_polls + 1 + extra)
    if partial is not None:
        burst = [estimate(base + partial * (peak - base), partial * backlog), *burst[1:]]
    t0 = (settle + 1) * STEP_MS
    decisions = run(burst, onset_replicas, config, limit, history, t0)
    need = replicas_for(peak, limit, config, backlog)
    for decision in decisions:
        assert 1 <= decision.replicas <= config.max_replicas
        assert decision.replicas <= max(onset_replicas, need)
    if need > onset_replicas:
        final = decisions[config.confirm_polls].replicas
        assert final == need, [(d.action, d.replicas, d.reason.code) for d in decisions]
        assert all(d.replicas == need for d in decisions[config.confirm_polls :])
        assert sum(d.action == "up" for d in decisions) <= 2  # the partial poll's, then the final one


@given(
    configs,
    limits,
    st.integers(1, 12),
    st.lists(st.tuples(rates, backlogs, st.booleans()), max_size=40),
)
def test_with_a_backlog_a_gap_never_scales_down_and_replicas_stay_within_one_and_max(
    config: ScaleConfig, limit: float, start: int, polls: list[tuple[float, float, bool]]
) -> None:
    estimates = [estimate(rate, backlog, complete) for rate, backlog, complete in polls]
    decisions = run(estimates, min(start, config.max_replicas), config, limit)
    for est, decision in zip(estimates, decisions, strict=True):
        assert 1 <= decision.replicas <= config.max_replicas
        if not est.complete:
            assert decision.action != "down" and decision.replicas >= decision.current
        if decision.action == "up":
            assert decision.replicas == replicas_for(est.request_rate, limit, config, est.backlog_requests)


@given(
    configs,
    st.integers(1, 12),
    st.floats(0, 200, allow_nan=False),
    st.floats(0, 200, allow_nan=False),
    st.floats(0, 2000, allow_nan=False),
    st.integers(0, 20),
)
def test_read_from_the_collectors_queues_a_step_burst_is_sized_in_one_step_too(
    config: ScaleConfig, start: int, base: float, peak: float, queued: float, extra: int
) -> None:
    """The same law through `desired_replicas` on /metrics: two pods' tcp_data_segments rates and
    listen backlogs step from (base, 0) to (peak, queued), split between the pods."""
    base, peak = min(base, peak), max(base, peak)
    config = attrs.evolve(config, signal="tcp_data_segments", calls_per_request=1.0)
    a, b = "a" * 64, "b" * 64
    pods = (PodView("web-1", (a,)), PodView("web-2", (b,)))

    def poll(i: int, rate: float, backlog: float) -> Observations:
        now = 1_800_000_000_000 + i * STEP_MS
        split = {a: (rate * 0.7, backlog * 0.7, None), b: (rate * 0.3, backlog * 0.3, None)}
        return Observations(now, pods, (CollectorScrape("n", now, ingress_body(now, split)),))

    polls = [poll(i, base, 0.0) for i in range(3)]
    polls += [poll(3 + i, peak, queued) for i in range(config.confirm_polls + 1 + extra)]
    replicas, history, decisions = min(start, config.max_replicas), ScaleHistory(), []
    for observations in polls:
        decision = desired_replicas(observations, DeploymentView("ns", "web", replicas, 1.0), config, history)
        decisions.append(decision)
        replicas, history = decision.replicas, decision.history
    onset = decisions[2].replicas
    need = replicas_for(peak, 1.0, config, queued)
    burst = decisions[3:]
    assert all(d.replicas <= max(onset, need) for d in burst)
    if need > onset:
        assert all(d.replicas == need for d in burst[config.confirm_polls - 1 :])
        assert sum(d.action == "up" for d in burst) == 1
