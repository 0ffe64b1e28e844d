"""The scaler's law under hostile scrapes (hypothesis): for any sequence of polls whose collectors
answer, fall silent, go stale, serve garbage lines, or serve NaN, ±Inf or negative rates, or leave
a busy container's --syscall out of its top syscalls, croft scale never scales down on a poll whose
data was incomplete, never leaves [1, max_replicas], and never raises.

"Incomplete" is judged here by a reference model of what the generator built, not by the
decision's own gap list."""

from __future__ import annotations

import math

import attrs
from hypothesis import given, note, settings
from hypothesis import strategies as st

from croft.domain.metrics import names
from croft.domain.scaling.decision import (
    CollectorScrape,
    DeploymentView,
    Observations,
    PodView,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
)
from croft.domain.scaling.log import decision_fields, render
from tests.helpers.scale import cid

SYSCALL = "sendto"
STEP_MS = 2000
BAD_VALUES = ("NaN", "+Inf", "-Inf", "-3", "-0.5", "1e999")
CONFIGS = st.builds(
    ScaleConfig,
    syscall=st.just(SYSCALL),
    calls_per_request=st.sampled_from([0.001, 1.0, 2.06, 1e6]),
    cpu_per_request_ms=st.sampled_from([0.001, 50.0, 1e6]),
    target=st.sampled_from([0.01, 0.7, 1.0]),
    max_replicas=st.integers(1, 12),
    confirm_polls=st.integers(1, 3),
    interval_s=st.just(2.0),
    stabilization_s=st.sampled_from([0.0, 4.0, 30.0]),
)


@attrs.frozen
class Container:
    """What one collector says of one container: its --syscall value (a text as exposed; None: no
    series), its `other` value, its CPU."""

    rate: str | None
    other: str | None
    cpu: str


@attrs.frozen
class CollectorPlan:
    state: str  # "ok", "down", "stale", "garbage"
    containers: dict[int, Container]


def _sound(value: str | None) -> bool:
    if value is None:
        return True
    number = float(value)
    return math.isfinite(number) and number >= 0


def _positive(value: str | None) -> bool:
    return value is not None and float(value) > 0


values = st.one_of(
    st.floats(0, 1e5, allow_nan=False).map(repr),
    st.sampled_from(BAD_VALUES),
    st.sampled_from(["0", "0.0", "1e300"]),
)
containers = st.builds(
    Container,
    rate=st.one_of(st.none(), values),
    other=st.one_of(st.none(), values),
    cpu=st.one_of(st.sampled_from(["0", "0.2", "NaN", "-1"]), st.floats(0, 8).map(repr)),
)


@st.composite
def polls(draw: st.DrawFn) -> tuple[int, list[CollectorPlan]]:
    pods = draw(st.integers(1, 4))
    collectors = draw(
        st.lists(
            st.builds(
                CollectorPlan,
                state=st.sampled_from(["ok", "ok", "ok", "down", "stale", "garbage"]),
                containers=st.dictionaries(st.integers(0, pods), containers, max_size=pods + 1),
            ),
            min_size=0,
            max_size=3,
        )
    )
    return pods, collectors


def body(plan: CollectorPlan, now_ms: int) -> str:
    polled = now_ms - (30_000 if plan.state == "stale" else 0)
    lines = [f"{names.LAST_POLL_TIMESTAMP_SECONDS} {polled / 1000!r}"]
    for index, c in plan.containers.items():
        label = f'container_id="{cid(index)}"'
        lines.append(f"{names.CONTAINER_CPU_CORES}{{{label}}} {c.cpu}")
        if c.rate is not None:
            lines.append(f'{names.CONTAINER_SYSCALL_RATE}{{{label},syscall="{SYSCALL}"}} {c.rate}')
        if c.other is not None:
            lines.append(f'{names.CONTAINER_SYSCALL_RATE}{{{label},syscall="other"}} {c.other}')
    if plan.state == "garbage":
        # a series the decision reads (a Deployment's container), cut short; foreign series are
        # not parsed at all (tests/unit/test_scaling.py)
        lines.append(f'{names.CONTAINER_SYSCALL_RATE}{{container_id="{cid(0)}",syscall="{SYSCALL}" 1')
    return "\n".join(lines) + "\n"


def complete(pods: int, plans: list[CollectorPlan]) -> bool:
    """The reference model: every collector answered fresh and sound, and every pod's container is
    seen with sound values and, when busy, with a --syscall series."""
    if not plans or any(p.state != "ok" for p in plans):
        return False
    for index in range(pods):
        seen = [p.containers[index] for p in plans if index in p.containers]
        if not seen:
            return False
        for c in seen:
            if not (_sound(c.rate) and _sound(c.other)):
                return False
        if all(c.rate is None for c in seen):
            cpu_busy = any(not _sound(c.cpu) or _positive(c.cpu) for c in seen if c.other is None)
            if any(_positive(c.other) for c in seen) or cpu_busy:
                return False
    return True


@settings(max_examples=300)
@given(config=CONFIGS, start=st.integers(1, 12), sequence=st.lists(polls(), min_size=1, max_size=12))
def test_an_incomplete_poll_never_scales_down_and_nothing_raises(
    config: ScaleConfig, start: int, sequence: list[tuple[int, list[CollectorPlan]]]
) -> None:
    replicas = min(start, config.max_replicas)
    history = ScaleHistory()
    for step, (pods, plans) in enumerate(sequence):
        now = 1_800_000_000_000 + step * STEP_MS
        observations = Observations(
            now,
            tuple(PodView(f"web-{i}", (cid(i),)) for i in range(pods)),
            tuple(
                CollectorScrape(f"croft-{n}", now, None if p.state == "down" else body(p, now), "refused")
                for n, p in enumerate(plans)
            ),
        )
        view = DeploymentView("ns", "web", replicas, 0.5)
        decision = desired_replicas(observations, view, config, history)
        note(f"poll {step}: {decision.action} {decision.reason}")
        render("2027-01-15T08:00:00.000Z", decision_fields(decision), "json")  # loggable, finite
        if decision.action == "down":
            assert complete(pods, plans), decision.reason
            assert decision.estimate is not None and decision.estimate.complete
        if not complete(pods, plans):
            assert decision.estimate is None or not decision.estimate.complete
        assert 1 <= decision.replicas <= max(config.max_replicas, replicas)
        if decision.action != "hold":
            assert 1 <= decision.replicas <= config.max_replicas
        replicas, history = decision.replicas, decision.history
