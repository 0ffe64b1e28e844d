"""The simulated Deployment: pods with start and readiness delays, a FIFO queue per pod, and the
per-pod CPU use and replies the metrics pipelines read.

A pod's capacity is its CPU limit: a request needing c CPU-seconds holds the pod for c / limit
seconds, so a pod serves at most limit / c requests per second and a burst above that builds a
backlog whose wait every later request of that pod pays (latency grows with the backlog). Requests
are spread at random over the Ready pods (kube-proxy picks an endpoint per connection, at random);
with no Ready pod a request fails at once (connection refused). A request is answered even after
its client gave up (the server does not know), so its CPU and its reply still count. A deleted pod
leaves the endpoints at once and finishes its queue (graceful termination).

Each pod also counts the requests that reach it (at arrival, before any queue: what a kernel-side
count of offered load sees, however saturated the pod) and knows its backlog at any time: the
requests that reached it and have not yet begun to be served (what waits in its listen and receive
queues).
"""

from __future__ import annotations

import math
import random
from collections import deque

import attrs

from croft.runs.load import Outcome, RequestOutcome
from croft.runs.rundir import PodLife, Rescale

BIN_S = 0.1


@attrs.frozen
class SimApp:
    """One application as the simulator needs it (from apps.json): the Deployment, its per-pod CPU
    limit, the true CPU per request (ms, mean) and its spread (coefficient of variation), the true
    number of `syscall` calls per request, and the ranges (s, uniform) of the delays of a new pod:
    `controller_delay_s` from the scale decision to the pod object, `pod_start_s` from the object to
    its containers running (the pod start delay: scheduling, sandbox, image, process start) and
    `readiness_s` from running to Ready (the Ready delay: the readiness probe's first success). The
    defaults are the webapp's values before they were measured; `croft.sim.delays` measures them
    from real runs' timelines. `cpu_share` is the share of its CPU limit a pod really gets (1: all
    of it; a loaded node gives less, and a pod then serves `cpu_share × limit ÷ CPU per request`
    requests/s and uses at most `cpu_share × limit` cores); `cpu_request_cores` the pods' CPU
    request, which the HPA's utilization divides by (None: the limit). A delay named in
    `sampled_delays` is drawn from its values as measured (each equally likely) instead of uniformly
    between its two bounds: measured delays are skewed (most pods in a second, one in tens), and a
    uniform range over them moves the mean towards the outlier."""

    name: str
    namespace: str
    deployment: str
    cpu_limit_cores: float
    cpu_per_request_ms: float
    calls_per_request: float
    syscall: str = "sendto"
    service_cv: float = 0.1
    controller_delay_s: tuple[float, ...] = (0.1, 0.5)
    pod_start_s: tuple[float, ...] = (1.0, 3.0)
    readiness_s: tuple[float, ...] = (1.0, 2.0)
    max_replicas: int = 10
    target: float = 0.7
    cpu_share: float = 1.0
    cpu_request_cores: float | None = None
    sampled_delays: frozenset[str] = frozenset()


@attrs.define
class SimPod:
    name: str
    container_id: str
    created_s: float
    started_s: float
    ready_s: float
    deleted_s: float | None = None
    free_at_s: float = 0.0
    waiting: deque[float] = attrs.field(factory=deque)  # start times of requests not yet begun, FIFO

    def listed(self, t: float) -> bool:
        """The API lists it: created and not yet deleted."""
        return self.created_s <= t and (self.deleted_s is None or t < self.deleted_s)

    def running(self, t: float) -> bool:
        return self.listed(t) and self.started_s <= t

    def ready(self, t: float) -> bool:
        return self.listed(t) and self.ready_s <= t


class Cluster:
    """Mutable state of one run. `horizon_s` bounds the per-bin accounting (later work is dropped
    from the bins, not from the latencies)."""

    def __init__(
        self,
        app: SimApp,
        rng: random.Random,
        horizon_s: float,
        initial_replicas: int = 1,
        start_unix_ms: int = 0,
    ) -> None:
        self.app = app
        self.start_unix_ms = start_unix_ms
        self._rng = rng
        self._bins = math.ceil(horizon_s / BIN_S) + 1
        self.pods: list[SimPod] = []
        self.busy_s: dict[str, list[float]] = {}
        self.replies: dict[str, list[int]] = {}
        self.arrivals: dict[str, list[int]] = {}
        self.rescales: list[Rescale] = []
        self.spec_replicas = 0
        self._made = 0
        for _ in range(initial_replicas):
            self._new_pod(created_s=-60.0, started_s=-58.0, ready_s=-57.0)
        self.spec_replicas = initial_replicas

    def _new_pod(self, created_s: float, started_s: float, ready_s: float) -> SimPod:
        self._made += 1
        name = f"{self.app.deployment}-{self._made:03d}"
        cid = f"{self._rng.getrandbits(256):064x}"
        pod = SimPod(name, cid, created_s, started_s, ready_s)
        self.pods.append(pod)
        self.busy_s[name] = [0.0] * self._bins
        self.replies[name] = [0] * self._bins
        self.arrivals[name] = [0] * self._bins
        return pod

    def _delay(self, field: str, values: tuple[float, ...]) -> float:
        if field in self.app.sampled_delays:
            return self._rng.choice(values)
        low, high = values
        return self._rng.uniform(low, high)

    def set_replicas(self, now_s: float, replicas: int, source: str, reason: str) -> None:
        """spec.replicas := `replicas` at `now_s`: the ReplicaSet creates pods (after the controller
        delay) or deletes the not-Ready ones first, then the newest."""
        if replicas == self.spec_replicas:
            return
        self.rescales.append(
            Rescale(self.start_unix_ms + round(now_s * 1000), self.spec_replicas, replicas, source, reason)
        )
        if replicas > self.spec_replicas:
            for _ in range(replicas - self.spec_replicas):
                created = now_s + self._delay("controller_delay_s", self.app.controller_delay_s)
                started = created + self._delay("pod_start_s", self.app.pod_start_s)
                self._new_pod(created, started, started + self._delay("readiness_s", self.app.readiness_s))
        else:
            alive = [p for p in self.pods if p.deleted_s is None]
            alive.sort(key=lambda p: (p.ready(now_s), p.created_s), reverse=True)
            for pod in alive[replicas:]:
                pod.deleted_s = now_s
        self.spec_replicas = replicas

    def listed(self, t: float) -> list[SimPod]:
        return [p for p in self.pods if p.listed(t)]

    def ready_count(self, t: float) -> int:
        return sum(1 for p in self.pods if p.ready(t))

    def serve(self, scheduled_s: float, timeout_s: float) -> RequestOutcome:
        """One request arriving at `scheduled_s`: routed, queued, served; its outcome for the client."""
        ready = [p for p in self.pods if p.ready(scheduled_s)]
        if not ready:
            return RequestOutcome(scheduled_s, scheduled_s, 0.001, "failed")
        pod = self._rng.choice(ready)
        cpu_s = self._service_cpu_s()
        start = max(scheduled_s, pod.free_at_s)
        finish = start + cpu_s / (self.app.cpu_limit_cores * self.app.cpu_share)
        pod.free_at_s = finish
        if start > scheduled_s:
            pod.waiting.append(start)
        arrived = int(scheduled_s / BIN_S)
        if 0 <= arrived < self._bins:
            self.arrivals[pod.name][arrived] += 1
        self._account(pod.name, start, finish)
        latency = finish - scheduled_s
        outcome: Outcome = "ok"
        if latency > timeout_s:
            latency, outcome = timeout_s, "timeout"
        return RequestOutcome(scheduled_s, scheduled_s, latency, outcome)

    def _service_cpu_s(self) -> float:
        mean = self.app.cpu_per_request_ms / 1000
        cv = self.app.service_cv
        if cv <= 0:
            return mean
        sigma2 = math.log(1 + cv * cv)
        return mean * self._rng.lognormvariate(-sigma2 / 2, math.sqrt(sigma2))

    def _account(self, name: str, start: float, finish: float) -> None:
        busy = self.busy_s[name]
        first, last = int(start / BIN_S), int(finish / BIN_S)
        for b in range(max(first, 0), min(last, self._bins - 1) + 1):
            overlap = min(finish, (b + 1) * BIN_S) - max(start, b * BIN_S)
            if overlap > 0:
                busy[b] += overlap
        done = int(finish / BIN_S)
        if 0 <= done < self._bins:
            self.replies[name][done] += 1

    def cpu_cores(self, name: str, t0: float, t1: float) -> float:
        """Mean CPU cores the pod used over [t0, t1) (bin resolution), at most its share of its limit."""
        if t1 <= t0:
            return 0.0
        busy = self.busy_s[name]
        first, last = max(int(t0 / BIN_S + 1e-9), 0), min(int(t1 / BIN_S + 1e-9), self._bins)
        cores = self.app.cpu_limit_cores * self.app.cpu_share
        return sum(busy[first:last]) * cores / max(t1 - t0, 1e-9)

    def arrivals_between(self, name: str, t0: float, t1: float) -> int:
        """Requests that reached the pod in [t0, t1) (bin resolution), served yet or not."""
        first, last = max(int(t0 / BIN_S + 1e-9), 0), min(int(t1 / BIN_S + 1e-9), self._bins)
        return sum(self.arrivals[name][first:last])

    def backlog(self, pod: SimPod, t: float) -> int:
        """Requests that reached `pod` by `t` (all requests up to `t` must have been served) and had
        not begun to be served at `t`."""
        while pod.waiting and pod.waiting[0] <= t:
            pod.waiting.popleft()
        return len(pod.waiting)

    def replies_between(self, name: str, t0: float, t1: float) -> int:
        """Replies the pod sent in [t0, t1) (bin resolution)."""
        first, last = max(int(t0 / BIN_S + 1e-9), 0), min(int(t1 / BIN_S + 1e-9), self._bins)
        return sum(self.replies[name][first:last])

    def lives(self, start_unix_ms: int, end_s: float) -> tuple[PodLife, ...]:
        """Every pod as timeline.json has it (unix ms), events after `end_s` left out."""

        def ms(t: float | None) -> int | None:
            return None if t is None or t > end_s else start_unix_ms + round(t * 1000)

        return tuple(
            PodLife(
                p.name,
                start_unix_ms + round(p.created_s * 1000),
                ms(p.started_s),
                ms(p.ready_s),
                ms(p.deleted_s),
                (p.container_id,),
            )
            for p in self.pods
            if p.created_s <= end_s
        )
