"""croft scale's decision: how many replicas a Deployment needs, from its pods' syscall rate.

`desired_replicas(observations, deployment, config, history)` is the whole policy, a pure function:

- request rate (requests/s) = the summed `config.syscall` rate of the Deployment's containers,
  from every collector's /metrics, ÷ `calls_per_request`; with `config.signal` other than
  `syscall`, the `croft_container_ingress_rate` of that signal instead, taken once per pod (the
  containers of a pod share the network namespace it counts), ÷ `calls_per_request`, and the
  requests queued in the pods (`croft.domain.scaling.backlog`: connections waiting to be accepted,
  and unread bytes ÷ `bytes_per_request` when it is given);
- desired = ceil(rate × CPU per request ÷ (CPU limit × target) + backlog × CPU per request ÷
  (`drain_s` × CPU limit)), clamped to [1, max_replicas] (`croft.domain.scaling.sizing`): the
  replicas the load needs and those that drain the backlog within `drain_s`, in one step;
- up: only once `confirm_polls` consecutive polls asked for more than the current replicas, straight
  to what the last of them asked for (never one replica at a time);
- down: only when data is complete, the scaler has watched for a whole stabilization window, and
  every recommendation inside the window is below the current count (it scales to their maximum,
  as the HPA's scale-down stabilization does);
- missing or stale data (a collector that did not answer or garbled a series it reads, a running container
  with no series, a collector whose newest poll is older than two polls) makes the rate a lower
  bound: it may still confirm a scale-up (the true rate is at least as high) but it never scales
  down, and the window remembers such a poll as "keep the current count".

Every `Decision` carries its reason as data and the history for the next poll. `decide` is the
policy on an estimate alone, whichever signal produced it; `desired_replicas` reads the estimate from
the collectors' scrapes first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import attrs

from croft.domain.metrics import (
    COLLECTOR_POLL_S,
    CONTAINER_CPU_CORES,
    CONTAINER_INGRESS_RATE,
    CONTAINER_SYSCALL_RATE,
    INGRESS_SIGNALS,
    LABEL_CONTAINER_ID,
    LABEL_SIGNAL,
    LABEL_SYSCALL,
    LAST_POLL_TIMESTAMP_SECONDS,
    OTHER_SYSCALLS,
    SYSCALLS_PER_CONTAINER,
    BadExposition,
    Sample,
    SeriesQuery,
    parse_exposition,
    select,
)
from croft.domain.scaling.backlog import QUEUE_GAUGES, queued_requests
from croft.domain.scaling.sizing import DRAIN_S, clamp_replicas, replica_need

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
_WANTED = frozenset({CONTAINER_SYSCALL_RATE, CONTAINER_CPU_CORES, LAST_POLL_TIMESTAMP_SECONDS})
_WANTED_INGRESS = frozenset(
    {CONTAINER_INGRESS_RATE, CONTAINER_CPU_CORES, LAST_POLL_TIMESTAMP_SECONDS, *QUEUE_GAUGES}
)
SYSCALL_SIGNAL = "syscall"
SIGNALS: tuple[str, ...] = (SYSCALL_SIGNAL, *INGRESS_SIGNALS)
"""The choices of `--signal`: `syscall` (the `--syscall` rate, the default) or an ingress signal."""


@attrs.frozen
class ScaleConfig:
    """The options of `croft scale`. `stabilization_s` is the scale-down window (300 s by default,
    the HPA's, so both arms of an experiment scale down alike). `signal` is what counts requests:
    `syscall` (the `syscall` rate) or one of `INGRESS_SIGNALS`; `calls_per_request` is how many of
    it one request makes (syscalls, data segments, connections, bytes, ...). With an ingress
    signal, `bytes_per_request` (0: not given) turns the pods' unread bytes into queued requests."""

    syscall: str
    calls_per_request: float
    cpu_per_request_ms: float
    target: float = 0.7
    max_replicas: int = 10
    confirm_polls: int = 2
    interval_s: float = 2.0
    stabilization_s: float = 300.0
    drain_s: float = DRAIN_S
    signal: str = SYSCALL_SIGNAL
    bytes_per_request: float = 0.0

    @property
    def stale_after_ms(self) -> int:
        """Numbers older than two polls (of the scaler or of the collector, whichever is slower)."""
        return int(2 * max(self.interval_s, COLLECTOR_POLL_S) * 1000)


# The ranges options must fall in: beyond them an option is a typo or a unit mistake, and the
# arithmetic of the decision (ms from seconds, a need of rate x cost / share) stays finite.
OPTION_RANGES: dict[str, tuple[float, float, str]] = {
    "--calls-per-request": (1e-3, 1e6, "syscalls of --syscall, or units of --signal, per request"),
    "--cpu-per-request-ms": (1e-3, 1e6, "CPU milliseconds per request"),
    "--target": (0.01, 1.0, "a share of the CPU limit such as 0.7"),
    "--interval": (0.1, 3600.0, "seconds between polls"),
    "--stabilization-secs": (0.0, 86400.0, "seconds of the scale-down window"),
    "--drain-secs": (1.0, 86400.0, "seconds to drain the queued requests in"),
    "--bytes-per-request": (
        0.0,
        1e9,
        "a request's bytes as the server reads them; 0: unread bytes not counted",
    ),
}


def _out_of_range(option: str, value: float) -> str | None:
    low, high, what = OPTION_RANGES[option]
    if math.isfinite(value) and low <= value <= high:
        return None
    return f"{option} must be a finite number in [{low:g}, {high:g}] ({what}), got {value!r}"


def config_problem(config: ScaleConfig) -> str | None:
    """One sentence naming the first invalid option, or None when the configuration is usable.
    NaN, infinities and values outside `OPTION_RANGES` are invalid."""
    if config.signal not in SIGNALS:
        return f"--signal {config.signal!r:.40} is not one croft measures; give one of {', '.join(SIGNALS)}"
    if not config.syscall:
        return "--syscall is empty; name the syscall that counts requests, e.g. sendto"
    if not config.syscall.isprintable() or '"' in config.syscall or "\\" in config.syscall:
        return f"--syscall {config.syscall!r:.60} is not a syscall name; give e.g. sendto"
    floats = (
        ("--calls-per-request", config.calls_per_request),
        ("--cpu-per-request-ms", config.cpu_per_request_ms),
        ("--target", config.target),
        ("--interval", config.interval_s),
        ("--stabilization-secs", config.stabilization_s),
        ("--drain-secs", config.drain_s),
        ("--bytes-per-request", config.bytes_per_request),
    )
    for option, value in floats:
        if (problem := _out_of_range(option, value)) is not None:
            return problem
    if not 1 <= config.max_replicas <= 10_000:
        return "--max-replicas must be from 1 to 10000"
    if not 1 <= config.confirm_polls <= 1000:
        return "--confirm-polls must be from 1 to 1000"
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
    the gaps that made it incomplete, one sentence each; `backlog_requests` the requests queued in
    the Deployment's pods (0 when the signal measures none)."""

    request_rate: float
    containers_counted: int
    gaps: tuple[str, ...]
    backlog_requests: float = 0.0

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


def scrape_query(config: ScaleConfig) -> SeriesQuery:
    """What croft scale asks each collector's /metrics for: the series the estimate reads (the last
    poll's time, the containers' CPU and the signal's rate), of the signal only (`--syscall` and
    `other`, or the ingress signal). A collector that ignores the query answers every series; the
    estimate reads the same samples from it."""
    if config.signal == SYSCALL_SIGNAL:
        return SeriesQuery.of(_WANTED, {LABEL_SYSCALL: (config.syscall, OTHER_SYSCALLS)})
    return SeriesQuery.of(_WANTED_INGRESS, {LABEL_SIGNAL: (config.signal,)})


def estimate_rate(observations: Observations, config: ScaleConfig) -> Estimate:
    """The Deployment's request rate from the collectors' scrapes, with every gap named."""
    if config.signal != SYSCALL_SIGNAL:
        return _estimate_from_ingress(observations, config)
    read = _Readings.of(observations, config)
    gaps = list(read.gaps)
    calls = 0.0
    counted = 0
    for pod in observations.pods:
        for container in pod.container_ids:
            where = f"pod {pod.name} container {container[:12]}"
            if not read.seen(where, container, gaps):
                continue
            counted += 1
            calls += read.rates.get(container, 0.0)
            if container in read.garbled or container in read.rates:
                continue
            if read.others.get(container, False):
                gaps.append(
                    f"{where} is busy but has no {config.syscall} series: it may be inside syscall=other, "
                    f"outside the {SYSCALLS_PER_CONTAINER} exported"
                )
            elif read.busy.get(container, False):
                gaps.append(f"{where} is busy but has no {config.syscall} series")
    return Estimate(
        request_rate=calls / config.calls_per_request, containers_counted=counted, gaps=tuple(gaps)
    )


def _fresh_samples(
    observations: Observations, config: ScaleConfig, gaps: list[str]
) -> list[tuple[str, tuple[Sample, ...]]]:
    """(collector, the samples of `scrape_query(config)` it served) of every collector that answered
    with current numbers; the others are named in `gaps`. The whole body is parsed: a collector
    serves only what was asked, one of an older version everything (`select` then keeps the same
    samples), and a malformed line makes the collector a gap."""
    now = observations.now_ms
    query = scrape_query(config)
    out: list[tuple[str, tuple[Sample, ...]]] = []
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
            samples = select(parse_exposition(scrape.body), query)
        except BadExposition as exc:
            gaps.append(f"collector {scrape.collector} served bad /metrics: {exc}")
            continue
        last_poll = [s.value for s in samples if s.name == LAST_POLL_TIMESTAMP_SECONDS]
        if not last_poll or not math.isfinite(last_poll[0]):
            gaps.append(f"collector {scrape.collector} serves no {LAST_POLL_TIMESTAMP_SECONDS}")
            continue
        age_ms = now - last_poll[0] * 1000
        if age_ms > config.stale_after_ms:
            gaps.append(f"collector {scrape.collector}'s newest poll is {age_ms / 1000:.1f} s old")
            continue
        out.append((scrape.collector, samples))
    return out


@attrs.frozen
class _Readings:
    """What the collectors' scrapes say: the samples of those with current numbers (`fresh`) and
    the `gaps` of the others; of each container, that it has series (`known`), its rate of the
    signal (the largest served, `rates`), a rate that is not one ≥ 0 (`garbled`: which collector
    served what), a rate above 0 under another value of the rate's label (`others`:
    syscall="other"), and whether it is busy (CPU or other calls above 0, or a garbled CPU)."""

    fresh: tuple[tuple[str, tuple[Sample, ...]], ...]
    gaps: tuple[str, ...]
    known: frozenset[str]
    rates: Mapping[str, float]
    garbled: Mapping[str, str]
    others: Mapping[str, bool]
    busy: Mapping[str, bool]

    @classmethod
    def of(cls, observations: Observations, config: ScaleConfig) -> _Readings:
        """The readings of `config.signal`: the `--syscall` rate, or the ingress rate of the signal."""
        gaps: list[str] = []
        fresh = _fresh_samples(observations, config, gaps)
        if config.signal == SYSCALL_SIGNAL:
            rate_name, label, value = CONTAINER_SYSCALL_RATE, LABEL_SYSCALL, config.syscall
        else:
            rate_name, label, value = CONTAINER_INGRESS_RATE, LABEL_SIGNAL, config.signal
        known: set[str] = set()
        rates: dict[str, float] = {}
        garbled: dict[str, str] = {}
        others: dict[str, bool] = {}
        busy: dict[str, bool] = {}
        for collector, samples in fresh:
            for sample in samples:
                container = sample.label(LABEL_CONTAINER_ID)
                if container is None or sample.name == LAST_POLL_TIMESTAMP_SECONDS:
                    continue
                known.add(container)
                sound = math.isfinite(sample.value) and sample.value >= 0
                if sample.name == CONTAINER_CPU_CORES:
                    busy[container] = busy.get(container, False) or not sound or sample.value > 0
                    continue
                which = sample.label(label)
                if sample.name != rate_name or which is None:  # a queue gauge; a rate without its label
                    continue
                if not sound:
                    garbled.setdefault(container, f"{collector} serves {which} {_value(sample.value)}")
                elif which == value:
                    rates[container] = max(rates.get(container, 0.0), sample.value)
                else:
                    others[container] = others.get(container, False) or sample.value > 0
                    busy[container] = busy.get(container, False) or sample.value > 0
        return cls(tuple(fresh), tuple(gaps), frozenset(known), rates, garbled, others, busy)

    def seen(self, where: str, container: str, gaps: list[str]) -> bool:
        """Whether `container` has series; `gaps` names it when it has none, or a garbled rate."""
        if container not in self.known:
            gaps.append(f"{where} has no series")
            return False
        if container in self.garbled:
            gaps.append(f"{where}: collector {self.garbled[container]}, not a rate ≥ 0 (garbled data)")
        return True


def _estimate_from_ingress(observations: Observations, config: ScaleConfig) -> Estimate:
    """The request rate from `config.signal`'s ingress rate: per pod the largest of its containers'
    (they share one namespace and serve the same number), summed over pods, ÷ calls per request.
    A busy container (CPU above 0) whose pod has no series of the signal makes it a lower bound.
    The backlog is the requests queued in the pods (`croft.domain.scaling.backlog`)."""
    read = _Readings.of(observations, config)
    gaps = list(read.gaps)
    total = 0.0
    counted = 0
    for pod in observations.pods:
        pod_rate: float | None = None
        pod_busy = ""
        for container in pod.container_ids:
            where = f"pod {pod.name} container {container[:12]}"
            if not read.seen(where, container, gaps):
                continue
            counted += 1
            if container in read.rates:
                pod_rate = max(pod_rate or 0.0, read.rates[container])
            elif read.busy.get(container, False):
                pod_busy = where
        if pod_rate is not None:
            total += pod_rate
        elif pod_busy:
            gaps.append(f"{pod_busy} is busy but has no {config.signal} series (no ingress measured yet)")
    backlog, garbled_queues = queued_requests(
        ((collector, sample) for collector, samples in read.fresh for sample in samples),
        [(pod.name, pod.container_ids) for pod in observations.pods],
        config.bytes_per_request,
    )
    return Estimate(
        request_rate=total / config.calls_per_request,
        containers_counted=counted,
        gaps=(*gaps, *garbled_queues),
        backlog_requests=backlog,
    )


def _value(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value == math.inf else repr(value))


def replicas_for(
    request_rate: float, cpu_limit_cores: float, config: ScaleConfig, backlog_requests: float = 0.0
) -> int:
    """ceil(rate × CPU per request ÷ (CPU limit × target) + backlog × CPU per request ÷ (drain_s ×
    CPU limit)), clamped to [1, max_replicas] (a need beyond any float, from absurd rates, is
    max_replicas). See `croft.domain.scaling.sizing`."""
    need = replica_need(
        request_rate,
        backlog_requests,
        config.cpu_per_request_ms,
        cpu_limit_cores,
        config.target,
        config.drain_s,
    )
    return clamp_replicas(need, config.max_replicas)


def _gaps_text(gaps: tuple[str, ...]) -> str:
    shown = "; ".join(gaps[:MAX_GAPS_IN_REASON])
    more = len(gaps) - MAX_GAPS_IN_REASON
    return f"{shown}; and {more} more" if more > 0 else shown


def desired_replicas(
    observations: Observations, deployment: DeploymentView, config: ScaleConfig, history: ScaleHistory
) -> Decision:
    """This poll's decision: the estimate read from the collectors' scrapes, then `decide`.
    Invariants: `replicas` is within [1, max_replicas] whenever it differs from `current`; an
    incomplete estimate never scales down; `confirm_polls` consecutive polls asking for more always
    scale up by the last of them."""
    now = observations.now_ms
    if not _has_cpu_limit(deployment):
        return _hold(now, deployment, config, history, _no_cpu_limit(deployment))
    if not any(pod.container_ids for pod in observations.pods):
        reason = Reason("no-pods", f"deployment {deployment.name} has no pod with a started container")
        return _hold(now, deployment, config, history, reason)
    return decide(now, estimate_rate(observations, config), deployment, config, history)


def _no_cpu_limit(deployment: DeploymentView) -> Reason:
    return Reason("no-cpu-limit", f"deployment {deployment.name}'s pod template sets no CPU limit")


def _has_cpu_limit(deployment: DeploymentView) -> bool:
    return deployment.cpu_limit_cores is not None and deployment.cpu_limit_cores > 0


def _remember(
    now_ms: int, history: ScaleHistory, config: ScaleConfig, replicas: int
) -> tuple[Recommendation, ...]:
    """The window's recommendations with this poll's appended and those older than the window dropped."""
    window_ms = int(config.stabilization_s * 1000)
    kept = tuple(r for r in history.recommendations if now_ms - window_ms <= r.at_ms <= now_ms)
    return (*kept, Recommendation(now_ms, replicas))


def _hold(
    now_ms: int,
    deployment: DeploymentView,
    config: ScaleConfig,
    history: ScaleHistory,
    reason: Reason,
    estimate: Estimate | None = None,
    desired: int | None = None,
) -> Decision:
    """Keep the current count; the window remembers it (or more, when `desired` asked for more)."""
    current = deployment.replicas
    first = history.first_poll_ms if history.first_poll_ms is not None else now_ms
    keep = ScaleHistory(0, _remember(now_ms, history, config, max(current, desired or 0)), first)
    return Decision("hold", current, current, desired, estimate, reason, keep)


def decide(
    now_ms: int,
    estimate: Estimate,
    deployment: DeploymentView,
    config: ScaleConfig,
    history: ScaleHistory,
) -> Decision:
    """The policy on an estimate, whichever signal produced it. One step up: once `confirm_polls`
    polls in a row asked for more than the current replicas, scale to what the last of them asked
    for (load and backlog together). Down only on a complete estimate, after a whole stabilization
    window, to the most the window asked for."""
    now = now_ms
    current = deployment.replicas
    first = history.first_poll_ms if history.first_poll_ms is not None else now
    window_ms = int(config.stabilization_s * 1000)
    cpu_limit = deployment.cpu_limit_cores
    if cpu_limit is None or not cpu_limit > 0:
        return _hold(now, deployment, config, history, _no_cpu_limit(deployment))
    desired = replicas_for(estimate.request_rate, cpu_limit, config, estimate.backlog_requests)
    bound = "" if estimate.complete else f" (a lower bound: {_gaps_text(estimate.gaps)})"

    if desired > current:
        streak = history.up_streak + 1
        recs = _remember(now, history, config, desired)
        if streak >= config.confirm_polls:
            reason = Reason("scale-up", f"{streak} polls in a row asked for more than {current}{bound}")
            return Decision("up", desired, current, desired, estimate, reason, ScaleHistory(0, recs, first))
        reason = Reason("confirming-up", f"{streak} of {config.confirm_polls} polls asked for more{bound}")
        return Decision(
            "hold", current, current, desired, estimate, reason, ScaleHistory(streak, recs, first)
        )
    if not estimate.complete:
        detail = f"data is incomplete, so no scale-down: {_gaps_text(estimate.gaps)}"
        return _hold(now, deployment, config, history, Reason("incomplete", detail), estimate, desired)
    if desired == current:
        reason = Reason("steady", f"{current} replicas match the estimate")
        return _hold(now, deployment, config, history, reason, estimate, desired)

    recs = _remember(now, history, config, desired)
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
