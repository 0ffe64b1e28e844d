"""croft scale's decision: how many replicas a Deployment needs, from its pods' syscall rate.

`desired_replicas(observations, deployment, config, history)` is the whole policy, a pure function:

- request rate (requests/s) = the summed `config.syscall` rate of the Deployment's containers,
  from every collector's /metrics, ÷ `calls_per_request`;
- desired = ceil(rate × CPU per request ÷ (CPU limit × target)), clamped to [1, max_replicas];
- up: only once `confirm_polls` consecutive polls asked for more than the current replicas;
- down: only when data is complete, the scaler has watched for a whole stabilization window, and
  every recommendation inside the window is below the current count (it scales to their maximum,
  as the HPA's scale-down stabilization does);
- missing or stale data (a collector that did not answer or garbled a series it reads, a running container
  with no series, a collector whose newest poll is older than two polls) makes the rate a lower
  bound: it may still confirm a scale-up (the true rate is at least as high) but it never scales
  down, and the window remembers such a poll as "keep the current count".

Every `Decision` carries its reason as data and the history for the next poll.
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import BadExposition, parse_exposition

Action = Literal["up", "down", "hold"]
ReasonCode = Literal[
    "scale-up",
    "confirming-up",
    "steady",
    "stabilizing",
    "scale-down",
    "incomplete",
    "no-cpu-limit",
    "no-pods",
]
MAX_GAPS_IN_REASON = 3
_WANTED = frozenset(
    {names.CONTAINER_SYSCALL_RATE, names.CONTAINER_CPU_CORES, names.LAST_POLL_TIMESTAMP_SECONDS}
)


@attrs.frozen
class ScaleConfig:
    """The options of `croft scale`. `stabilization_s` is the scale-down window (300 s by default,
    the HPA's, so both arms of an experiment scale down alike)."""

    syscall: str
    calls_per_request: float
    cpu_per_request_ms: float
    target: float = 0.7
    max_replicas: int = 10
    confirm_polls: int = 2
    interval_s: float = 2.0
    stabilization_s: float = 300.0

    @property
    def stale_after_ms(self) -> int:
        """Numbers older than two polls (of the scaler or of the collector, whichever is slower)."""
        return int(2 * max(self.interval_s, names.COLLECTOR_POLL_S) * 1000)


def config_problem(config: ScaleConfig) -> str | None:
    """One sentence naming the first invalid option, or None when the configuration is usable."""
    if not config.syscall:
        return "--syscall is empty; name the syscall that counts requests, e.g. sendto"
    if not config.calls_per_request > 0:
        return "--calls-per-request must be above 0 (syscalls of --syscall per request)"
    if not config.cpu_per_request_ms > 0:
        return "--cpu-per-request-ms must be above 0 (CPU milliseconds per request)"
    if not 0 < config.target <= 1:
        return "--target must be in (0, 1], a share of the CPU limit such as 0.7"
    if config.max_replicas < 1:
        return "--max-replicas must be at least 1"
    if config.confirm_polls < 1:
        return "--confirm-polls must be at least 1"
    if not config.interval_s > 0:
        return "--interval must be above 0 seconds"
    if config.stabilization_s < 0:
        return "--stabilization-secs must be 0 or more"
    return None


@attrs.frozen
class DeploymentView:
    """What the scaler knows of the Deployment: `replicas` is spec.replicas now; `cpu_limit_cores`
    the summed limits.cpu of its pod template's containers (None when none sets one)."""

    namespace: str
    name: str
    replicas: int
    cpu_limit_cores: float | None


@attrs.frozen
class PodView:
    """One of the Deployment's pods and the ids (64 hex, no `containerd://`) of its started containers."""

    name: str
    container_ids: tuple[str, ...]


@attrs.frozen
class CollectorScrape:
    """One collector's /metrics as fetched at `fetched_at_ms` (unix ms); `body` None when it did
    not answer, `error` then says why."""

    collector: str
    fetched_at_ms: int
    body: str | None
    error: str | None = None


@attrs.frozen
class Observations:
    """Everything one poll gathered, at `now_ms` (unix ms, read once by the shell)."""

    now_ms: int
    pods: tuple[PodView, ...]
    scrapes: tuple[CollectorScrape, ...]


@attrs.frozen
class Recommendation:
    at_ms: int
    replicas: int


@attrs.frozen
class ScaleHistory:
    """What the decision remembers: polls in a row that asked for more, the recommendations inside
    the stabilization window (oldest first), and when the scaler first polled (unix ms)."""

    up_streak: int = 0
    recommendations: tuple[Recommendation, ...] = ()
    first_poll_ms: int | None = None


@attrs.frozen
class Estimate:
    """The request rate (requests/s; a lower bound unless `complete`), the containers it summed and
    the gaps that made it incomplete, one sentence each."""

    request_rate: float
    containers_counted: int
    gaps: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.gaps


@attrs.frozen
class Reason:
    code: ReasonCode
    detail: str


@attrs.frozen
class Decision:
    """What to do this poll: have `replicas` (== `current` unless `action` says otherwise).
    `desired` is what the estimate alone asks for, clamped to [1, max]; None without an estimate."""

    action: Action
    replicas: int
    current: int
    desired: int | None
    estimate: Estimate | None
    reason: Reason
    history: ScaleHistory


def estimate_rate(observations: Observations, config: ScaleConfig) -> Estimate:
    """The Deployment's request rate from the collectors' scrapes, with every gap named."""
    gaps: list[str] = []
    known: set[str] = set()
    rates: dict[str, float] = {}
    now = observations.now_ms
    syscall = config.syscall
    if not observations.scrapes:
        gaps.append("no collector was found to scrape")
    for scrape in observations.scrapes:
        if scrape.body is None:
            gaps.append(f"collector {scrape.collector} did not answer: {scrape.error or 'no reply'}")
            continue
        if now - scrape.fetched_at_ms > config.stale_after_ms:
            gaps.append(
                f"collector {scrape.collector} was scraped {(now - scrape.fetched_at_ms) / 1000:.1f} s ago"
            )
            continue
        try:
            samples = parse_exposition(scrape.body, _WANTED, {names.CONTAINER_SYSCALL_RATE: f'"{syscall}"'})
        except BadExposition as exc:
            gaps.append(f"collector {scrape.collector} served bad /metrics: {exc}")
            continue
        last_poll = [s.value for s in samples if s.name == names.LAST_POLL_TIMESTAMP_SECONDS]
        if not last_poll or not math.isfinite(last_poll[0]):
            gaps.append(f"collector {scrape.collector} serves no {names.LAST_POLL_TIMESTAMP_SECONDS}")
            continue
        age_ms = now - last_poll[0] * 1000
        if age_ms > config.stale_after_ms:
            gaps.append(f"collector {scrape.collector}'s newest poll is {age_ms / 1000:.1f} s old")
            continue
        for sample in samples:
            container = sample.label(names.LABEL_CONTAINER_ID)
            if container is None or sample.name == names.LAST_POLL_TIMESTAMP_SECONDS:
                continue
            known.add(container)
            counts = (
                sample.name == names.CONTAINER_SYSCALL_RATE and sample.label(names.LABEL_SYSCALL) == syscall
            )
            if counts and math.isfinite(sample.value) and sample.value >= 0:
                rates[container] = max(rates.get(container, 0.0), sample.value)
    calls = 0.0
    counted = 0
    for pod in observations.pods:
        for container in pod.container_ids:
            if container in known:
                calls += rates.get(container, 0.0)
                counted += 1
            else:
                gaps.append(f"pod {pod.name} container {container[:12]} has no series")
    return Estimate(
        request_rate=calls / config.calls_per_request, containers_counted=counted, gaps=tuple(gaps)
    )


def replicas_for(request_rate: float, cpu_limit_cores: float, config: ScaleConfig) -> int:
    """ceil(rate × CPU per request ÷ (CPU limit × target)), clamped to [1, max_replicas]."""
    need = request_rate * (config.cpu_per_request_ms / 1000) / (cpu_limit_cores * config.target)
    # A need of exactly n must not become n + 1 through float noise (e.g. 2.0000000000000004).
    return min(max(math.ceil(need - 1e-9), 1), config.max_replicas)


def _gaps_text(gaps: tuple[str, ...]) -> str:
    shown = "; ".join(gaps[:MAX_GAPS_IN_REASON])
    more = len(gaps) - MAX_GAPS_IN_REASON
    return f"{shown}; and {more} more" if more > 0 else shown


def desired_replicas(
    observations: Observations, deployment: DeploymentView, config: ScaleConfig, history: ScaleHistory
) -> Decision:
    """This poll's decision. Invariants: `replicas` is within [1, max_replicas] whenever it differs
    from `current`; an incomplete estimate never scales down; `confirm_polls` consecutive polls
    asking for more always scale up by the last of them."""
    now = observations.now_ms
    current = deployment.replicas
    first = history.first_poll_ms if history.first_poll_ms is not None else now
    window_ms = int(config.stabilization_s * 1000)

    def remember(replicas: int) -> tuple[Recommendation, ...]:
        kept = tuple(r for r in history.recommendations if r.at_ms >= now - window_ms and r.at_ms <= now)
        return (*kept, Recommendation(now, replicas))

    def hold(code: ReasonCode, detail: str, estimate: Estimate | None, desired: int | None) -> Decision:
        keep = ScaleHistory(0, remember(max(current, desired or 0)), first)
        return Decision("hold", current, current, desired, estimate, Reason(code, detail), keep)

    if deployment.cpu_limit_cores is None or not deployment.cpu_limit_cores > 0:
        return hold(
            "no-cpu-limit", f"deployment {deployment.name}'s pod template sets no CPU limit", None, None
        )
    if not any(pod.container_ids for pod in observations.pods):
        return hold(
            "no-pods", f"deployment {deployment.name} has no pod with a started container", None, None
        )
    estimate = estimate_rate(observations, config)
    desired = replicas_for(estimate.request_rate, deployment.cpu_limit_cores, config)
    bound = "" if estimate.complete else f" (a lower bound: {_gaps_text(estimate.gaps)})"

    if desired > current:
        streak = history.up_streak + 1
        recs = remember(desired)
        if streak >= config.confirm_polls:
            reason = Reason("scale-up", f"{streak} polls in a row asked for more than {current}{bound}")
            return Decision("up", desired, current, desired, estimate, reason, ScaleHistory(0, recs, first))
        reason = Reason("confirming-up", f"{streak} of {config.confirm_polls} polls asked for more{bound}")
        return Decision(
            "hold", current, current, desired, estimate, reason, ScaleHistory(streak, recs, first)
        )
    if not estimate.complete:
        return hold(
            "incomplete",
            f"data is incomplete, so no scale-down: {_gaps_text(estimate.gaps)}",
            estimate,
            desired,
        )
    if desired == current:
        return hold("steady", f"{current} replicas match the estimate", estimate, desired)

    recs = remember(desired)
    keep = ScaleHistory(0, recs, first)
    highest = max(r.replicas for r in recs)
    watched_ms = now - first
    if watched_ms < window_ms:
        detail = f"watched {watched_ms / 1000:.0f} s of the {config.stabilization_s:.0f} s window"
        return Decision("hold", current, current, desired, estimate, Reason("stabilizing", detail), keep)
    if highest >= current:
        detail = f"the last {config.stabilization_s:.0f} s asked for up to {highest}"
        return Decision("hold", current, current, desired, estimate, Reason("stabilizing", detail), keep)
    detail = f"every poll of the last {config.stabilization_s:.0f} s asked for {highest} or fewer"
    return Decision("down", highest, current, desired, estimate, Reason("scale-down", detail), keep)


def log_line(decision: Decision) -> str:
    """The one line per poll: estimate, desired, decision and reason."""
    estimate = decision.estimate
    rate = "-" if estimate is None else f"{estimate.request_rate:.2f}"
    bound = "" if estimate is None or estimate.complete else "+"
    desired = "-" if decision.desired is None else str(decision.desired)
    return (
        f"estimate_rps={rate}{bound} desired={desired} replicas={decision.current}->{decision.replicas} "
        f"decision={decision.action} reason={decision.reason.code}: {decision.reason.detail}"
    )
