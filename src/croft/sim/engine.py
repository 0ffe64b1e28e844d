"""The simulation loop: open-loop requests into the simulated Deployment, and the autoscaler of the
arm reading its own metrics pipeline on its own schedule.

- croft: `croft run` polls every 2 s (rates of `syscall` per container over the last poll; a
  container gets a series from its second poll on, as a first sighting has no rate yet); `croft
  scale` polls every 2 s on its own phase, reads the newest collector poll and calls the real
  `croft.domain.scaling.decision.desired_replicas` with what its live loop would observe. With
  `signal="offered"` the collector also serves the requests reaching each pod (counted where the
  kernel receives them, so they keep rising past saturation) as its `tcp_data_segments` ingress
  rate (one data segment per request, as small requests on keep-alive connections make) and each
  pod's queued requests at its poll as its listen backlog (one waiting connection per request, as
  for clients that connect per request), and croft scale reads them with `--signal
  tcp_data_segments --calls-per-request 1`: rate and backlog through the same `desired_replicas`.
- hpa: metrics-server scrapes every `metric_resolution_s` (15 s) the mean CPU of each pod over the
  last interval (a pod needs two scrapes after its containers started); the HPA syncs every 15 s
  with `croft.sim.hpa.sync`.
- fixed: nobody scales.

Every periodic event starts at a random phase (from the seed), as real schedules are not aligned
with the burst. Nothing here reads a clock or a file: time is the simulation's own, from 0 at the
start of the load; results carry unix times from `start_unix_ms`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs

from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, render_exposition
from croft.domain.scaling.decision import (
    CollectorScrape,
    DeploymentView,
    Observations,
    PodView,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
)
from croft.domain.scaling.log import log_line
from croft.domain.scaling.sizing import DRAIN_S
from croft.domain.utc import iso_ms
from croft.runs.load import SecondStats, second_stats, send_times
from croft.runs.rundir import Rescale, RunRecord, Timeline
from croft.sim.cluster import KEEPALIVE_EXPIRY_S, Cluster, Connections, SimApp
from croft.sim.hpa import HpaConfig, HpaPod, HpaState, PodMetric, sync

Arm = Literal["hpa", "croft", "fixed"]
ARMS: tuple[Arm, ...] = ("hpa", "croft", "fixed")
Signal = Literal["sendto", "offered"]
SIGNALS: tuple[Signal, ...] = ("sendto", "offered")
OFFERED_SIGNAL = "tcp_data_segments"  # the ingress signal the offered-load collector serves


class OfferedLoad(Protocol):
    """An open-loop profile: `rate_at(t)` requests/s at `t` seconds, for `duration_s` seconds."""

    @property
    def duration_s(self) -> float: ...

    def rate_at(self, t_s: float) -> float: ...


@attrs.frozen
class SimOptions:
    """How to simulate one run; `seed` fixes every random draw (phases, delays, service times).
    `signal` is what the croft arm's collector measures: `sendto` (replies, the app's syscall) or
    `offered` (requests reaching each pod, and each pod's queue); `drain_s` is croft scale's
    --drain-secs. `connections` is how requests reach pods (croft.sim.cluster): the default, a
    connection per request, is the simplest model; the lab's load generator is `keep-alive` (closed
    after `keepalive_expiry_s` idle). How a pod serves is the app's (`SimApp.service`)."""

    arm: Arm
    seed: int = 0
    timeout_s: float = 10.0
    start_unix_ms: int = 1_767_225_600_000
    initial_replicas: int = 1
    collector_interval_s: float = names.COLLECTOR_POLL_S
    scaler_interval_s: float = 2.0
    confirm_polls: int = 2
    stabilization_s: float = 300.0
    metric_resolution_s: float = 15.0
    prometheus_interval_s: float = 15.0
    hpa: HpaConfig = attrs.field(factory=HpaConfig)
    signal: Signal = "sendto"
    drain_s: float = DRAIN_S
    connections: Connections = "per-request"
    keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S
    record_poll_s: float = 0.0


@attrs.frozen
class SimResult:
    """One simulated run, in the shapes of the run directory."""

    record: RunRecord
    rows: tuple[SecondStats, ...]
    timeline: Timeline
    prometheus: tuple[tuple[float, str, str, float], ...]
    scaler_log: tuple[str, ...]


class _Croft:
    """croft run's exposition and croft scale's loop, fed from the cluster."""

    def __init__(self, app: SimApp, options: SimOptions, cluster: Cluster) -> None:
        self.app, self.options, self.cluster = app, options, cluster
        self.config = ScaleConfig(
            syscall=app.syscall,
            calls_per_request=app.calls_per_request,
            cpu_per_request_ms=app.cpu_per_request_ms,
            target=app.target,
            max_replicas=app.max_replicas,
            confirm_polls=options.confirm_polls,
            interval_s=options.scaler_interval_s,
            stabilization_s=options.stabilization_s,
            drain_s=options.drain_s,
        )
        if options.signal == "offered":
            self.config = attrs.evolve(self.config, signal=OFFERED_SIGNAL, calls_per_request=1.0)
        self.history = ScaleHistory()
        self.body: str | None = None
        self.previous_poll_s: float | None = None
        self.seen: set[str] = set()
        self.log: list[str] = []

    def ms(self, t: float) -> int:
        return self.options.start_unix_ms + round(t * 1000)

    def collector_poll(self, t: float) -> None:
        samples = [Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), self.ms(t) / 1000)]
        seen: set[str] = set()
        for pod in self.cluster.pods:
            if not pod.running(t):
                continue
            cid = pod.container_id
            seen.add(cid)
            if cid not in self.seen or self.previous_poll_s is None:
                continue  # a first sighting has no rate yet
            t0 = max(self.previous_poll_s, pod.started_s)
            replies = self.cluster.replies_between(pod.name, t0, t)
            rate = replies * self.app.calls_per_request / (t - self.previous_poll_s)
            label = ((names.LABEL_CONTAINER_ID, cid),)
            samples.append(Sample(names.CONTAINER_CPU_CORES, label, self.cluster.cpu_cores(pod.name, t0, t)))
            samples.append(
                Sample(names.CONTAINER_SYSCALL_RATE, (*label, (names.LABEL_SYSCALL, self.app.syscall)), rate)
            )
            if self.options.signal == "offered":
                arrived = self.cluster.arrivals_between(pod.name, t0, t) / (t - self.previous_poll_s)
                signal = (*label, (names.LABEL_SIGNAL, OFFERED_SIGNAL))
                samples.append(Sample(names.CONTAINER_INGRESS_RATE, signal, arrived))
                queued = float(self.cluster.backlog(pod, t))
                samples.append(Sample(names.CONTAINER_LISTEN_BACKLOG, label, queued))
        self.body = render_exposition(samples)
        self.seen, self.previous_poll_s = seen, t

    def scaler_poll(self, t: float) -> None:
        now_ms = self.ms(t)
        pods = tuple(
            PodView(p.name, (p.container_id,) if p.running(t) else ()) for p in self.cluster.listed(t)
        )
        scrape = CollectorScrape("croft-sim", now_ms, self.body, None if self.body else "not polled yet")
        view = DeploymentView(
            self.app.namespace, self.app.deployment, self.cluster.spec_replicas, self.app.cpu_limit_cores
        )
        observations = Observations(now_ms, pods, (scrape,))
        decision = desired_replicas(observations, view, self.config, self.history)
        self.history = decision.history
        self.log.append(f"{iso_ms(now_ms)} {log_line(decision)}")
        if decision.action != "hold":
            self.cluster.set_replicas(t, decision.replicas, "croft", decision.reason.code)


class _Hpa:
    """metrics-server and the HPA controller, fed from the cluster."""

    def __init__(self, app: SimApp, options: SimOptions, cluster: Cluster) -> None:
        self.app, self.options, self.cluster = app, options, cluster
        self.config = attrs.evolve(
            options.hpa, max_replicas=app.max_replicas, target_utilization=round(app.target * 100)
        )
        self.state = HpaState()
        self.metrics: dict[str, PodMetric] = {}
        self.previous_scrape_s: float | None = None
        self.events: list[dict[str, Any]] = []

    def scrape(self, t: float) -> None:
        previous = self.previous_scrape_s
        if previous is not None:
            for pod in self.cluster.pods:
                if pod.running(t) and pod.started_s <= previous:
                    cores = self.cluster.cpu_cores(pod.name, previous, t)
                    self.metrics[pod.name] = PodMetric(round(cores * 1000), t, t - previous)
        listed = {p.name for p in self.cluster.listed(t)}
        self.metrics = {name: m for name, m in self.metrics.items() if name in listed}
        self.previous_scrape_s = t

    def sync(self, t: float) -> None:
        cpu_request = self.app.cpu_request_cores or self.app.cpu_limit_cores
        request = round(cpu_request * 1000)
        pods = tuple(
            HpaPod(
                p.name,
                p.running(t),
                p.created_s,
                p.ready(t),
                p.ready_s if p.ready(t) else p.created_s,
                request,
            )
            for p in self.cluster.listed(t)
        )
        current = self.cluster.spec_replicas
        decision = sync(t, current, pods, self.metrics, self.state, self.config)
        self.state = decision.state
        if decision.replicas != current:
            self.events.append(
                {
                    "at_ms": self.options.start_unix_ms + round(t * 1000),
                    "reason": "SuccessfulRescale",
                    "object": f"HorizontalPodAutoscaler/{self.app.deployment}",
                    "message": f"New size: {decision.replicas}; reason: {decision.reason}",
                }
            )
            self.cluster.set_replicas(t, decision.replicas, "hpa", decision.reason)


def _periodic(
    rng: random.Random, interval_s: float, until_s: float, order: int, kind: str
) -> list[tuple[float, int, str]]:
    phase = rng.uniform(0, interval_s)
    count = int((until_s - phase) // interval_s) + 1 if until_s > phase else 0
    return [(phase + k * interval_s, order, kind) for k in range(count)]


def simulate(
    run: str,
    app: SimApp,
    offered: OfferedLoad,
    options: SimOptions,
    load: Mapping[str, Any] | None = None,
    burst_s: tuple[float, float] | None = None,
) -> SimResult:
    """Simulate `offered` against `app` under `options.arm`, deterministically for a seed.
    Invariants: spec.replicas stays within [1, app.max_replicas]; every scheduled request gets
    exactly one outcome (ok, failed or timeout)."""
    # The same seed gives both arms the same draws (paired runs); another app gets other draws.
    rng = random.Random(f"{options.seed}/{app.name}")
    duration = offered.duration_s
    horizon = duration + options.timeout_s + 1
    cluster = Cluster(
        app,
        random.Random(rng.getrandbits(64)),
        horizon,
        options.initial_replicas,
        options.start_unix_ms,
        options.connections,
        options.keepalive_expiry_s,
    )
    croft = _Croft(app, options, cluster) if options.arm == "croft" else None
    hpa = _Hpa(app, options, cluster) if options.arm == "hpa" else None
    events: list[tuple[float, int, str]] = []
    if croft is not None:
        events += _periodic(rng, options.collector_interval_s, duration, 0, "collector")
        events += _periodic(rng, options.scaler_interval_s, duration, 1, "scaler")
    if hpa is not None:
        events += _periodic(rng, options.metric_resolution_s, duration, 0, "scrape")
        events += _periodic(rng, options.hpa.sync_period_s, duration, 1, "sync")
    events += _periodic(rng, options.prometheus_interval_s, duration, 2, "prometheus")
    events.sort()
    prometheus: list[tuple[float, str, str, float]] = []
    last_sample: float | None = None

    def handle(t: float, kind: str) -> None:
        nonlocal last_sample
        cluster.advance(t)
        if kind == "collector" and croft is not None:
            croft.collector_poll(t)
        elif kind == "scaler" and croft is not None:
            croft.scaler_poll(t)
        elif kind == "scrape" and hpa is not None:
            hpa.scrape(t)
        elif kind == "sync" and hpa is not None:
            hpa.sync(t)
        elif kind == "prometheus":
            unix_s = round(options.start_unix_ms / 1000 + t, 3)
            since = t - options.prometheus_interval_s if last_sample is None else last_sample
            for pod in cluster.listed(t):
                prometheus.append(
                    (unix_s, "cpu_cores", pod.name, round(cluster.cpu_cores(pod.name, since, t), 4))
                )
            prometheus.append((unix_s, "replicas", "", float(cluster.spec_replicas)))
            last_sample = t

    next_event = 0
    for arrival in send_times(offered.rate_at, duration):
        while next_event < len(events) and events[next_event][0] <= arrival:
            handle(events[next_event][0], events[next_event][2])
            next_event += 1
        cluster.send(arrival, options.timeout_s)
    for t, _, kind in events[next_event:]:
        handle(t, kind)
    cluster.advance(math.inf)
    outcomes = cluster.outcomes()

    start_ms = options.start_unix_ms
    end_ms = start_ms + round(duration * 1000)
    pods = cluster.lives(start_ms, duration)
    timeline = Timeline(
        namespace=app.namespace,
        deployment=app.deployment,
        start_ms=start_ms,
        end_ms=end_ms,
        initial_replicas=options.initial_replicas,
        rescales=_recorded(cluster.rescales, options, app, end_ms),
        pods=pods,
        events=tuple(hpa.events if hpa is not None else ()),
    )
    record = RunRecord(
        run=run,
        app=app.name,
        namespace=app.namespace,
        deployment=app.deployment,
        autoscaler=options.arm,
        window_start_ms=start_ms,
        window_end_ms=end_ms,
        load=dict(load or {}),
        burst_onset_ms=None if burst_s is None else start_ms + round(burst_s[0] * 1000),
        burst_end_ms=None if burst_s is None else start_ms + round(burst_s[1] * 1000),
        containers=tuple((p.name, cid) for p in pods for cid in p.container_ids),
        simulated={
            "seed": options.seed,
            "timeout_s": options.timeout_s,
            "connections": options.connections,
            "app": attrs.asdict(app, value_serializer=_json_value),
        },
    )
    return SimResult(
        record=record,
        rows=tuple(second_stats(outcomes, duration, start_ms / 1000)),
        timeline=timeline,
        prometheus=tuple(prometheus),
        scaler_log=tuple(croft.log if croft is not None else ()),
    )


def _recorded(rescales: list[Rescale], options: SimOptions, app: SimApp, end_ms: int) -> tuple[Rescale, ...]:
    """The rescales up to `end_ms` as a harness polling every `options.record_poll_s` records them:
    at its first poll at or after each (its phase drawn from a stream of its own, so that the run
    itself is the same)."""
    if options.record_poll_s <= 0:
        return tuple(r for r in rescales if r.at_ms <= end_ms)
    poll_ms = options.record_poll_s * 1000
    phase_ms = options.start_unix_ms + random.Random(f"{options.seed}/{app.name}/harness").uniform(0, poll_ms)
    out = []
    for rescale in rescales:
        seen = phase_ms + math.ceil((rescale.at_ms - phase_ms) / poll_ms) * poll_ms
        out.append(attrs.evolve(rescale, at_ms=round(seen)))
    return tuple(r for r in out if r.at_ms <= end_ms)


def _json_value(instance: object, field: object, value: object) -> object:
    """A set (`SimApp.sampled_delays`) as a sorted list: the record is JSON."""
    return sorted(value) if isinstance(value, frozenset) else value
