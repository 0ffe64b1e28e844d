"""A model of the Kubernetes HPA's CPU algorithm (autoscaling/v2beta2 defaults), pure.

Follows pkg/controller/podautoscaler (replica_calculator.go `GetResourceReplicas`, `groupPods`;
horizontal.go `normalizeDesiredReplicasWithBehaviors`), one sync at a time:

1. Pods: deleted or failed ones are skipped; Pending ones are ignored; a Running pod without a
   metric is missing; a Running pod is ignored while inside the CPU initialization period (300 s
   from its start) if it is not Ready or its metric's window began before it became Ready.
2. utilization = integer percent of summed usage over summed requests of the counted pods;
   ratio = utilization / target. No missing pod and nothing to rebalance: within the tolerance
   (10 %) keep the current count, else ceil(ratio x counted pods).
3. Otherwise missing pods count as 100 % of their request when scaling down and as 0 when scaling
   up; ignored pods count as 0 when scaling up. If the new ratio is within the tolerance or flips
   direction, keep the current count; else ceil(new ratio x pods with a metric).
4. Stabilization: the recommendation is held between the minimum of the last 0 s (scale-up window)
   and the maximum of the last 300 s (scale-down window) of raw recommendations.
5. Rate limits: up to max(+4 pods, +100 %) per 15 s (replicas added inside the period count
   against it), down 100 % per 15 s; always within [min, max].

Times are seconds on the simulation's clock; CPU in millicores, as the metrics API reports it.
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

PolicyKind = Literal["Pods", "Percent"]


@attrs.frozen
class Policy:
    kind: PolicyKind
    value: int
    period_s: float


@attrs.frozen
class HpaConfig:
    """The HPA's spec and the controller's flags; the defaults are Kubernetes' own."""

    target_utilization: int = 70
    min_replicas: int = 1
    max_replicas: int = 10
    tolerance: float = 0.1
    up_stabilization_s: float = 0.0
    down_stabilization_s: float = 300.0
    up_policies: tuple[Policy, ...] = (Policy("Pods", 4, 15.0), Policy("Percent", 100, 15.0))
    down_policies: tuple[Policy, ...] = (Policy("Percent", 100, 15.0),)
    cpu_initialization_period_s: float = 300.0
    initial_readiness_delay_s: float = 30.0
    sync_period_s: float = 15.0


@attrs.frozen
class HpaPod:
    """A pod as the HPA lists it: `running` once its containers started (else Pending), `start_s`
    its status.startTime, `ready` and when that condition last changed."""

    name: str
    running: bool
    start_s: float
    ready: bool
    ready_transition_s: float
    request_millicores: int
    deleted: bool = False


@attrs.frozen
class PodMetric:
    """metrics.k8s.io's answer for one pod: mean usage over [timestamp - window, timestamp]."""

    millicores: int
    timestamp_s: float
    window_s: float


@attrs.frozen
class HpaState:
    """What the controller remembers per HPA: raw recommendations and scale events (time, change)."""

    recommendations: tuple[tuple[float, int], ...] = ()
    up_events: tuple[tuple[float, int], ...] = ()
    down_events: tuple[tuple[float, int], ...] = ()


@attrs.frozen
class HpaDecision:
    replicas: int
    current: int
    metric_replicas: int
    utilization: int | None
    reason: str
    state: HpaState


def _ratio(values: dict[str, int], requests: dict[str, int], target: int) -> tuple[float, int]:
    total_requests = sum(requests[name] for name in values)
    if total_requests <= 0:
        return 0.0, 0
    utilization = sum(values.values()) * 100 // total_requests
    return utilization / target, utilization


def metric_replicas(
    now_s: float, current: int, pods: tuple[HpaPod, ...], metrics: dict[str, PodMetric], config: HpaConfig
) -> tuple[int, int | None, str]:
    """Steps 1-3: the count the CPU metric alone asks for, the utilization (%) and why."""
    ready_count = 0
    ignored: list[str] = []
    missing: list[str] = []
    counted: dict[str, int] = {}
    requests = {p.name: p.request_millicores for p in pods if not p.deleted}
    for pod in pods:
        if pod.deleted:
            continue
        if not pod.running:
            ignored.append(pod.name)
            continue
        metric = metrics.get(pod.name)
        if metric is None:
            missing.append(pod.name)
            continue
        if pod.start_s + config.cpu_initialization_period_s > now_s:
            ignore = not pod.ready or metric.timestamp_s < pod.ready_transition_s + metric.window_s
        else:
            ignore = not pod.ready and pod.start_s + config.initial_readiness_delay_s > pod.ready_transition_s
        if ignore:
            ignored.append(pod.name)
            continue
        counted[pod.name] = metric.millicores
        ready_count += 1
    if not counted:
        return current, None, "no pod has a usable metric"
    ratio, utilization = _ratio(counted, requests, config.target_utilization)
    rebalance = bool(ignored) and ratio > 1.0
    if not rebalance and not missing:
        if abs(1.0 - ratio) <= config.tolerance:
            return current, utilization, f"utilization {utilization}% within tolerance"
        return math.ceil(ratio * ready_count), utilization, f"utilization {utilization}%"
    values = dict(counted)
    for name in missing:
        if ratio < 1.0:
            values[name] = requests[name]
        elif ratio > 1.0:
            values[name] = 0
    if rebalance:
        for name in ignored:
            values[name] = 0
    new_ratio, _ = _ratio(values, requests, config.target_utilization)
    flips = (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio)
    if abs(1.0 - new_ratio) <= config.tolerance or flips:
        return current, utilization, f"utilization {utilization}%, rebalanced within tolerance"
    wanted = math.ceil(new_ratio * len(values))
    if (new_ratio < 1.0 and wanted > current) or (new_ratio > 1.0 and wanted < current):
        return current, utilization, f"utilization {utilization}%, rebalanced against its direction"
    return wanted, utilization, f"utilization {utilization}% ({len(ignored)} ignored, {len(missing)} missing)"


def _change_in_period(events: tuple[tuple[float, int], ...], now_s: float, period_s: float) -> int:
    return sum(change for at, change in events if at > now_s - period_s)


def scale_up_limit(current: int, now_s: float, state: HpaState, config: HpaConfig) -> int:
    """The most replicas the scale-up policies allow now (select policy Max)."""
    limit = -(2**31)
    for policy in config.up_policies:
        start = current - _change_in_period(state.up_events, now_s, policy.period_s)
        if policy.kind == "Pods":
            proposed = start + policy.value
        else:
            proposed = math.ceil(start * (1 + policy.value / 100))
        limit = max(limit, proposed)
    return max(limit, current)


def scale_down_limit(current: int, now_s: float, state: HpaState, config: HpaConfig) -> int:
    """The fewest replicas the scale-down policies allow now (select policy Max: the largest drop)."""
    limit = 2**31
    for policy in config.down_policies:
        start = current + _change_in_period(state.down_events, now_s, policy.period_s)
        if policy.kind == "Pods":
            proposed = start - policy.value
        else:
            proposed = math.ceil(start * (1 - policy.value / 100))
        limit = min(limit, proposed)
    return min(limit, current)


def sync(
    now_s: float,
    current: int,
    pods: tuple[HpaPod, ...],
    metrics: dict[str, PodMetric],
    state: HpaState,
    config: HpaConfig,
) -> HpaDecision:
    """One HPA sync at `now_s` with spec.replicas == `current`. Invariant: `replicas` is within
    [min_replicas, max_replicas] and obeys the rate limits; the state remembers the scale event."""
    if current > config.max_replicas or current < config.min_replicas:
        wanted = min(max(current, config.min_replicas), config.max_replicas)
        return HpaDecision(
            wanted,
            current,
            wanted,
            None,
            "outside [min, max]",
            _stored(state, now_s, current, wanted, config),
        )
    raw, utilization, why = metric_replicas(now_s, current, pods, metrics, config)
    longest = max(config.up_stabilization_s, config.down_stabilization_s)
    kept = tuple((at, r) for at, r in state.recommendations if at > now_s - longest)
    up_floor = min([raw, *(r for at, r in kept if at > now_s - config.up_stabilization_s)])
    down_ceiling = max([raw, *(r for at, r in kept if at > now_s - config.down_stabilization_s)])
    stabilized = min(max(current, up_floor), down_ceiling)
    state = attrs.evolve(state, recommendations=(*kept, (now_s, raw)))
    wanted = stabilized
    if stabilized > current:
        allowed = min(config.max_replicas, scale_up_limit(current, now_s, state, config))
        if wanted > allowed:
            wanted, why = allowed, f"{why}; limited by the scale-up policies to {allowed}"
    elif stabilized < current:
        allowed = max(config.min_replicas, scale_down_limit(current, now_s, state, config))
        if wanted < allowed:
            wanted, why = allowed, f"{why}; limited by the scale-down policies to {allowed}"
    elif raw < current:
        why = (
            f"{why}; stabilization keeps {current} (highest of the last {config.down_stabilization_s:.0f} s)"
        )
    wanted = min(max(wanted, config.min_replicas), config.max_replicas)
    return HpaDecision(wanted, current, raw, utilization, why, _stored(state, now_s, current, wanted, config))


def _stored(state: HpaState, now_s: float, current: int, wanted: int, config: HpaConfig) -> HpaState:
    periods = [p.period_s for p in (*config.up_policies, *config.down_policies)]
    keep_s = max(periods, default=0.0)
    up = tuple(e for e in state.up_events if e[0] > now_s - keep_s)
    down = tuple(e for e in state.down_events if e[0] > now_s - keep_s)
    if wanted > current:
        up = (*up, (now_s, wanted - current))
    elif wanted < current:
        down = (*down, (now_s, current - wanted))
    return attrs.evolve(state, up_events=up, down_events=down)
