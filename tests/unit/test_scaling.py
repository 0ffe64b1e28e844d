"""croft scale's decision: the formula, the confirm and stabilization rules, and its laws."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.scaling.decision import (
    Decision,
    DeploymentView,
    Observations,
    ScaleConfig,
    ScaleHistory,
    config_problem,
    desired_replicas,
    estimate_rate,
    replicas_for,
)
from croft.domain.scaling.log import log_line
from tests.helpers.scale import CALLS_PER_REQUEST, GAP_KINDS, steady_poll, with_gap

CONFIG = ScaleConfig(syscall="sendto", calls_per_request=CALLS_PER_REQUEST, cpu_per_request_ms=50)
LIMIT = 0.5
STEP_MS = 2000


def deployment(replicas: int, limit: float | None = LIMIT) -> DeploymentView:
    return DeploymentView("croft-exp", "webapp", replicas, limit)


def run(
    polls: list[Observations],
    replicas: int,
    config: ScaleConfig = CONFIG,
    history: ScaleHistory | None = None,
) -> list[Decision]:
    """Decide every poll in turn, carrying each decision out (as the live loop does)."""
    decisions = []
    history = history or ScaleHistory()
    for observations in polls:
        decision = desired_replicas(observations, deployment(replicas), config, history)
        decisions.append(decision)
        replicas, history = decision.replicas, decision.history
    return decisions


def test_the_formula_rounds_up_and_clamps() -> None:
    # 7 req/s x 0.05 s = 0.35 cores = exactly one pod at 0.5 x 0.7.
    assert replicas_for(7.0, 0.5, CONFIG) == 1
    assert replicas_for(7.01, 0.5, CONFIG) == 2
    assert replicas_for(75.0, 0.5, CONFIG) == 10  # 10.7 clamped to --max-replicas
    assert replicas_for(0.0, 0.5, CONFIG) == 1
    assert replicas_for(14.0, 1.0, CONFIG) == 1
    assert replicas_for(14.0, 1.5, CONFIG) == 1
    assert replicas_for(21.0, 1.0, CONFIG) == 2


def test_rate_is_the_summed_syscall_rate_over_calls_per_request() -> None:
    decision = desired_replicas(steady_poll(10_000, 30.0, pods=3), deployment(1), CONFIG, ScaleHistory())
    assert decision.estimate is not None
    assert decision.estimate.request_rate == pytest.approx(30.0)
    assert decision.estimate.containers_counted == 3
    assert decision.desired == 5  # 30 x 0.05 / 0.35 = 4.3


def test_scale_up_waits_for_confirm_polls() -> None:
    polls = [steady_poll(t * STEP_MS, 30.0) for t in range(1, 4)]
    actions = [(d.action, d.reason.code) for d in run(polls, replicas=1)]
    assert actions == [("hold", "confirming-up"), ("up", "scale-up"), ("hold", "steady")]


def test_scale_down_only_after_the_window() -> None:
    config = ScaleConfig("sendto", CALLS_PER_REQUEST, 50, stabilization_s=20)
    polls = [steady_poll(t * STEP_MS, 5.0) for t in range(15)]
    decisions = run(polls, replicas=4, config=config)
    downs = [i for i, d in enumerate(decisions) if d.action == "down"]
    assert downs == [10]  # 20 s of watching at 2 s polls
    assert decisions[10].replicas == 1
    assert all(d.reason.code == "stabilizing" for d in decisions[:10])


def test_the_window_remembers_the_burst() -> None:
    config = ScaleConfig("sendto", CALLS_PER_REQUEST, 50, stabilization_s=20)
    rates = [30.0] * 12 + [5.0] * 20
    decisions = run([steady_poll(t * STEP_MS, r) for t, r in enumerate(rates)], replicas=1, config=config)
    first_down = next(i for i, d in enumerate(decisions) if d.action == "down")
    # The last poll asking for 5 is poll 11; the window (20 s = 10 polls) has forgotten it by poll 22.
    assert first_down == 22
    assert decisions[first_down].replicas == 1


@pytest.mark.parametrize("kind", GAP_KINDS)
def test_a_gap_holds_and_says_why(kind: str) -> None:
    config = ScaleConfig("sendto", CALLS_PER_REQUEST, 50, stabilization_s=0)
    decision = desired_replicas(
        with_gap(steady_poll(50_000, 5.0), kind), deployment(4), config, ScaleHistory()
    )
    assert decision.action == "hold"
    assert decision.reason.code == "incomplete"
    assert decision.estimate is not None and not decision.estimate.complete
    expected = {
        "down": "did not answer",
        "stale": "s old",
        "garbled": "bad /metrics",
        "no-series": "no series",
        "nan": "serves sendto NaN, not a rate ≥ 0 (garbled data)",
        "inf": "serves sendto +Inf, not a rate ≥ 0 (garbled data)",
        "negative": "serves sendto -12.5, not a rate ≥ 0 (garbled data)",
        "hidden": "is busy but has no sendto series: it may be inside syscall=other",
    }
    assert expected[kind] in decision.reason.detail


def test_a_lower_bound_may_still_scale_up() -> None:
    polls = [with_gap(steady_poll(t * STEP_MS, 60.0, pods=4), "down") for t in range(1, 3)]
    decisions = run(polls, replicas=1)
    assert decisions[-1].action == "up"
    assert "lower bound" in decisions[-1].reason.detail


def test_no_cpu_limit_and_no_pods_hold() -> None:
    poll = steady_poll(10_000, 30.0)
    no_limit = desired_replicas(poll, deployment(2, None), CONFIG, ScaleHistory())
    assert (no_limit.action, no_limit.reason.code) == ("hold", "no-cpu-limit")
    empty = Observations(10_000, (), poll.scrapes)
    no_pods = desired_replicas(empty, deployment(2), CONFIG, ScaleHistory())
    assert (no_pods.action, no_pods.reason.code) == ("hold", "no-pods")


def test_log_line_names_estimate_desired_decision_and_reason() -> None:
    decision = desired_replicas(
        with_gap(steady_poll(10_000, 30.0), "down"), deployment(1), CONFIG, ScaleHistory()
    )
    line = log_line(decision)
    assert line.startswith("estimate_rps=")
    assert "+ desired=" in line  # "+": a lower bound
    assert "decision=hold reason=confirming-up" in line


def test_config_problems_are_one_sentence() -> None:
    assert config_problem(CONFIG) is None
    bad = ScaleConfig("sendto", 0, 50)
    assert config_problem(bad) == (
        "--calls-per-request must be a finite number in [0.001, 1e+06] "
        "(syscalls of --syscall, or units of --signal, per request), got 0"
    )
    assert "--target" in (config_problem(ScaleConfig("sendto", 1, 50, target=1.5)) or "")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0.0, -1.0, 1e-300, 1e300])
@pytest.mark.parametrize(
    "field",
    ["calls_per_request", "cpu_per_request_ms", "target", "interval_s", "stabilization_s", "drain_s"],
)
def test_non_finite_zero_and_absurd_options_are_refused(field: str, value: float) -> None:
    if field == "stabilization_s" and value in (0.0, 1e-300):
        return  # no window at all is a valid choice
    problem = config_problem(attrs.evolve(CONFIG, **{field: value}))
    assert problem is not None and "must be a finite number in [" in problem and "\n" not in problem


# -- laws ------------------------------------------------------------------------------------------

configs = st.builds(
    ScaleConfig,
    syscall=st.just("sendto"),
    calls_per_request=st.just(CALLS_PER_REQUEST),
    cpu_per_request_ms=st.sampled_from([10.0, 50.0, 120.0]),
    target=st.sampled_from([0.5, 0.7, 1.0]),
    max_replicas=st.integers(1, 12),
    confirm_polls=st.integers(1, 4),
    stabilization_s=st.sampled_from([0.0, 6.0, 30.0, 300.0]),
)
rates = st.floats(0, 400, allow_nan=False)
poll_kinds = st.one_of(st.none(), st.sampled_from(GAP_KINDS))


def trace(rate_list: list[float], gaps: list[str | None]) -> list[Observations]:
    polls = []
    for t, (rate, gap) in enumerate(zip(rate_list, gaps, strict=False)):
        poll = steady_poll((t + 1) * STEP_MS, rate, pods=3)
        polls.append(poll if gap is None else with_gap(poll, gap))
    return polls


@given(configs, st.lists(st.tuples(rates, poll_kinds), max_size=40), st.integers(1, 12))
def test_replicas_stay_within_one_and_max(
    config: ScaleConfig, steps: list[tuple[float, str | None]], start: int
) -> None:
    start = min(start, config.max_replicas)
    for decision in run(trace([r for r, _ in steps], [g for _, g in steps]), start, config):
        assert 1 <= decision.replicas <= config.max_replicas


@given(configs, st.lists(st.tuples(rates, poll_kinds), max_size=40), st.integers(1, 12))
def test_a_gap_never_scales_down(
    config: ScaleConfig, steps: list[tuple[float, str | None]], start: int
) -> None:
    polls = trace([r for r, _ in steps], [g for _, g in steps])
    for (_, gap), decision in zip(steps, run(polls, min(start, config.max_replicas), config), strict=True):
        if gap is not None:
            assert decision.action != "down"
            assert decision.replicas >= decision.current


@given(configs, rates, st.integers(1, 12), st.integers(1, 200))
def test_a_steady_rate_never_flaps(config: ScaleConfig, rate: float, start: int, length: int) -> None:
    decisions = run(trace([rate] * length, [None] * length), min(start, config.max_replicas), config)
    changes = [d.action for d in decisions if d.action != "hold"]
    assert len(changes) <= 1


@given(configs, st.lists(st.tuples(rates, poll_kinds), max_size=30), st.integers(1, 12), rates)
def test_scale_up_never_waits_more_than_confirm_polls(
    config: ScaleConfig, prefix: list[tuple[float, str | None]], start: int, burst: float
) -> None:
    decisions = run(
        trace([r for r, _ in prefix], [g for _, g in prefix]), min(start, config.max_replicas), config
    )
    replicas = decisions[-1].replicas if decisions else min(start, config.max_replicas)
    history = decisions[-1].history if decisions else ScaleHistory()
    t0 = (len(prefix) + 1) * STEP_MS
    polls = [steady_poll(t0 + i * STEP_MS, burst, pods=3) for i in range(config.confirm_polls)]
    wanted = replicas_for(burst, LIMIT, config)
    after = run(polls, replicas, config, history)
    if wanted > replicas:
        ups = [d for d in after if d.action == "up"]
        assert ups, [d.reason for d in after]
        assert ups[0].replicas == wanted


def test_series_the_decision_does_not_ask_for_leave_the_estimate_as_it_is() -> None:
    """A collector of an older version ignores croft scale's query and serves every series: another
    container's, other syscalls', and other metrics that carry the same labels (a counter by syscall)
    change nothing; the estimate is the one from the series it asked for."""
    poll = steady_poll(STEP_MS, 30.0)
    first, *rest = poll.scrapes
    ours = poll.pods[0].container_ids[0]
    extra = (
        f'croft_container_syscall_rate{{container_id="{"f" * 64}",syscall="sendto"}} 900\n'
        f'croft_container_syscalls_total{{container_id="{ours}",syscall="sendto"}} 123456\n'
        f'croft_container_syscall_rate{{container_id="{ours}",syscall="recvfrom"}} 700\n'
        f'croft_container_memory_bytes{{container_id="{ours}"}} 1e9\n'
    )
    everything = attrs.evolve(first, body=(first.body or "") + extra)
    config = ScaleConfig("sendto", CALLS_PER_REQUEST, 50)
    asked = estimate_rate(poll, config)
    answered_all = estimate_rate(attrs.evolve(poll, scrapes=(everything, *rest)), config)
    assert asked.complete and answered_all == asked
    assert math.isclose(asked.request_rate, 30.0)
