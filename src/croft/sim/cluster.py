"""The simulated Deployment: pods with start and readiness delays, the client's connections to them,
and the per-pod CPU use and replies the metrics pipelines read.

A pod's capacity is its CPU limit: a request needing c CPU-seconds takes c / limit seconds of the
whole pod, so a pod serves at most limit / c requests per second and a burst above that builds a
backlog. How a pod shares itself among the requests it holds (`service`):

- `fifo`: one at a time, in arrival order; every later request waits for the backlog ahead of it.
- `shared`: the webapp's thread per connection. A new connection waits in the pod's listen queue
  (FIFO) until the accepting thread accepts it and starts its thread; a request on a connection
  already accepted goes to its thread at once. The threads share the pod equally (processor
  sharing: the pod's CPU limit and the GIL, which switches threads every 5 ms), so with n threads
  busy each runs n times slower. The acceptor needs `accept_cpu_ms` of GIL turns per connection
  (accepting, then starting the thread, which waits for its first turn), taken in turn with the n
  busy threads: a connection waits n x accept_cpu_ms / the pod's CPU for them, and is accepted at
  once by a pod with no thread busy (at 0: always at once, pure processor sharing). The turns are
  waiting, not work: the acceptor takes no CPU from the threads. So the busier a pod, the slower it
  accepts: the excess waits in the listen queue and the threads inside stay few enough to keep
  answering. (The acceptor once took its turns as CPU from the threads: a pod then paid
  accept_cpu_ms of CPU per connection and took as long to accept one when idle, which no real pod
  does and which, with connections renewed every few seconds, starves pods that have room.)

A request is served to the end even after its client gave up (the server does not know: the
webapp burns its CPU, then its send fails), so its CPU and its reply still count. How requests reach
pods (`connections`):

- `per-request`: each request opens its own connection, which kube-proxy sends to a Ready pod at
  random (the load generator with keep-alive off).
- `keep-alive`: the load generator's httpx pool. A request takes the oldest idle connection
  (httpcore 1.0 scans its connections in the order it opened them); only when none is idle does it
  open one, which kube-proxy pins to a Ready pod chosen at random at that moment, for the
  connection's life. HTTP/1.1: one request at a time per connection. A connection closes when its
  request times out (the client cancels it), after `keepalive_expiry_s` idle (httpx's default 5 s),
  when its pod is gone, or, when the server bounds a connection's life (`SimApp.max_connection_age_s`,
  the webapp's MAX_CONNECTION_AGE_S, as nginx's keepalive_requests, envoy's
  max_connection_duration or gRPC's MaxConnectionAge do), with the first reply it sends at that age
  or older (`Connection: close`): the client's next request then opens a new connection, which
  kube-proxy sends to any Ready pod, new ones included. Without such a bound the connections opened
  while few pods were Ready keep carrying the load after new pods come up: those are used only when
  every older connection is busy.

With no Ready pod a new connection fails at once (connection refused). A deleted pod leaves the
endpoints at once and finishes what it holds (graceful termination).

Each pod also counts the requests that reach it (at arrival, before any queue: what a kernel-side
count of offered load sees, however saturated the pod) and knows its backlog at any time: the
requests it holds beyond the one it would be serving alone (fifo: those not yet begun).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from typing import Literal

import attrs

from croft.runs.load import RequestOutcome
from croft.runs.rundir import PodLife, Rescale

BIN_S = 0.1
KEEPALIVE_EXPIRY_S = 5.0  # httpx.Limits' default keepalive_expiry

Connections = Literal["per-request", "keep-alive"]
CONNECTIONS: tuple[Connections, ...] = ("per-request", "keep-alive")
Service = Literal["fifo", "shared"]
SERVICES: tuple[Service, ...] = ("fifo", "shared")


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
    uniform range over them moves the mean towards the outlier. `service` is how a pod serves the
    requests it holds (fifo or shared, below), `accept_cpu_ms` what a shared pod's acceptor takes per
    connection, `max_connection_age_s` the server's bound on a keep-alive connection's life (0: none;
    module docstring)."""

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
    service: Service = "fifo"
    accept_cpu_ms: float = 0.0
    max_connection_age_s: float = 0.0


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


@attrs.define(eq=False)
class SimRequest:
    """One request: sent at `scheduled_s`, served by `pod` (None: refused) over connection number
    `connection` (None: its own, per-request), its reply at `done_s` (None: not yet)."""

    scheduled_s: float
    timeout_s: float
    pod: str | None
    connection: int | None
    done_s: float | None = None
    work_s: float = 0.0  # seconds of the whole pod it needs

    def answered(self) -> bool:
        """The client got the reply (before it gave up)."""
        return self.done_s is not None and self.done_s - self.scheduled_s <= self.timeout_s

    def outcome(self) -> RequestOutcome:
        if self.pod is None:
            return RequestOutcome(self.scheduled_s, self.scheduled_s, 0.001, "failed")
        if self.answered():
            assert self.done_s is not None
            return RequestOutcome(self.scheduled_s, self.scheduled_s, self.done_s - self.scheduled_s, "ok")
        return RequestOutcome(self.scheduled_s, self.scheduled_s, self.timeout_s, "timeout")


@attrs.define(eq=False)
class SimConnection:
    """Keep-alive connection number `number`, pinned to `pod` (the one kube-proxy chose at
    `opened_s`); `request` its latest request."""

    number: int
    pod: SimPod
    opened_s: float
    request: SimRequest | None = None

    def state(self, t: float, expiry_s: float, max_age_s: float = 0.0) -> Literal["idle", "busy", "closed"]:
        """At `t`: busy with its request, idle (its reply came, and less than `expiry_s` ago, and
        its pod is still there) or closed (its client gave up, or idle too long, or its pod gone, or
        its reply came when the connection was `max_age_s` old or older, when that is above 0)."""
        r = self.request
        if r is None:
            return "busy"  # just opened, for the request being sent
        if r.answered():
            assert r.done_s is not None
            if r.done_s > t:
                return "busy"
            aged = 0 < max_age_s <= r.done_s - self.opened_s
            if aged or t - r.done_s > expiry_s or not self.pod.listed(t):
                return "closed"
            return "idle"
        return "closed" if t >= r.scheduled_s + r.timeout_s else "busy"


@attrs.define
class _Shared:
    """A pod under processor sharing: `v` the work (s of the whole pod) each job in it has received
    since the pod began (virtual time); `jobs` a heap of (v at which it is done, n, request);
    `accept_queue` the first requests of the connections it has not accepted yet (the listen queue,
    FIFO), `accept_left` the turns (s of the whole pod) the acceptor still needs for the oldest of
    them; `accepted` the connections whose thread runs."""

    clock: float = -math.inf
    v: float = 0.0
    jobs: list[tuple[float, int, SimRequest]] = attrs.field(factory=list)
    accept_queue: deque[SimRequest] = attrs.field(factory=deque)
    accepted: set[int] = attrs.field(factory=set)
    accept_left: float = 0.0


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
        connections: Connections = "per-request",
        keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S,
    ) -> None:
        self.app = app
        self.start_unix_ms = start_unix_ms
        self.connections_kind: Connections = connections
        self.service: Service = app.service
        self.keepalive_expiry_s = keepalive_expiry_s
        self._accept_work_s = app.accept_cpu_ms / 1000 / (app.cpu_limit_cores * app.cpu_share)
        self._rng = rng
        # Routing and service times draw from streams of their own, so that how requests are routed
        # does not change the work they bring.
        self._route_rng = random.Random(rng.getrandbits(64))
        self._work_rng = random.Random(rng.getrandbits(64))
        self.requests: list[SimRequest] = []
        self.connections: list[SimConnection] = []  # every connection opened, in order
        self._replying: list[tuple[float, int]] = []  # (reply time, connection): idle from then
        self._idle: list[int] = []  # connections idle since their reply, by number (age)
        self._shared: dict[str, _Shared] = {}
        self._seq = itertools.count()
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
        self._shared[name] = _Shared()
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

    def send(self, scheduled_s: float, timeout_s: float) -> SimRequest:
        """One request sent at `scheduled_s` (in time order, after every earlier one): routed to a
        pod and queued there. Its reply time is set now (fifo) or once the pod has served it
        (shared: `advance`); `outcomes` has it once known."""
        self.advance(scheduled_s)
        pod, connection = self._route(scheduled_s)
        request = SimRequest(scheduled_s, timeout_s, None if pod is None else pod.name, connection)
        self.requests.append(request)
        if pod is None:
            return request
        if connection is not None:
            self.connections[connection].request = request
        arrived = int(scheduled_s / BIN_S)
        if 0 <= arrived < self._bins:
            self.arrivals[pod.name][arrived] += 1
        work_s = self._service_cpu_s() / (self.app.cpu_limit_cores * self.app.cpu_share)
        request.work_s = work_s
        if self.service == "fifo":
            start = max(scheduled_s, pod.free_at_s)
            finish = start + work_s
            pod.free_at_s = finish
            if start > scheduled_s:
                pod.waiting.append(start)
            self._busy(pod.name, start, finish)
            self._reply(pod.name, finish)
            request.done_s = finish
            self._answered(request)
        elif connection is not None and connection in self._shared[pod.name].accepted:
            self._start(self._shared[pod.name], request)  # its connection's thread reads it at once
        else:
            self._listen(self._shared[pod.name], request)
        return request

    def _start(self, shared: _Shared, request: SimRequest) -> None:
        """A request begins to share its pod."""
        heapq.heappush(shared.jobs, (shared.v + request.work_s, next(self._seq), request))

    def _listen(self, shared: _Shared, request: SimRequest) -> None:
        """A new connection, with `request` on it, waits in the listen queue for the acceptor."""
        if not shared.accept_queue:
            shared.accept_left = self._accept_work_s
        shared.accept_queue.append(request)

    def _accept(self, shared: _Shared) -> None:
        """The acceptor had its turns: it accepts the oldest connection waiting (served even if its
        client has gone: the request is in the socket) and starts its thread."""
        request = shared.accept_queue.popleft()
        if request.connection is not None:
            shared.accepted.add(request.connection)
        self._start(shared, request)
        shared.accept_left = self._accept_work_s if shared.accept_queue else 0.0

    def _route(self, t: float) -> tuple[SimPod | None, int | None]:
        """The pod of a request sent at `t`, and the connection it goes over (None: its own)."""
        if self.connections_kind == "keep-alive":
            while self._replying and self._replying[0][0] <= t:
                heapq.heappush(self._idle, heapq.heappop(self._replying)[1])
            while self._idle:  # the oldest idle connection; expired ones and those of gone pods close
                connection = self.connections[heapq.heappop(self._idle)]
                if connection.state(t, self.keepalive_expiry_s, self.app.max_connection_age_s) == "idle":
                    return connection.pod, connection.number
        ready = [p for p in self.pods if p.ready(t)]
        if not ready:
            return None, None
        pod = self._route_rng.choice(ready)
        if self.connections_kind == "per-request":
            return pod, None
        connection = SimConnection(len(self.connections), pod, t)
        self.connections.append(connection)
        return pod, connection.number

    def _answered(self, request: SimRequest) -> None:
        """`request` has its reply time: its connection, if answered, is idle from then on."""
        if request.connection is not None and request.answered():
            assert request.done_s is not None
            heapq.heappush(self._replying, (request.done_s, request.connection))

    def advance(self, t: float) -> None:
        """Serve what every pod holds up to `t` (shared service; fifo already has): replies, CPU,
        and the reply time of each request done by then. `math.inf` serves everything."""
        if self.service != "shared":
            return
        for pod in self.pods:
            shared = self._shared[pod.name]
            while True:
                n = len(shared.jobs)
                if shared.accept_queue and (n == 0 or shared.accept_left <= 1e-12):
                    self._accept(shared)  # its turns are over, or no thread holds the GIL
                    continue
                if n == 0:
                    break
                v_next = shared.jobs[0][0]
                end = shared.clock + (v_next - shared.v) * n
                if shared.accept_queue:
                    end = min(end, shared.clock + shared.accept_left * n)
                stop = min(end, t)
                step = (stop - shared.clock) / n
                self._busy(pod.name, shared.clock, stop)
                shared.v += step
                if shared.accept_queue:
                    shared.accept_left -= step
                shared.clock = stop
                if end > t:
                    break
                while shared.jobs and shared.jobs[0][0] <= shared.v + 1e-12:
                    request = heapq.heappop(shared.jobs)[2]
                    request.done_s = end
                    self._reply(pod.name, end)
                    self._answered(request)
            shared.clock = max(shared.clock, t)

    def outcomes(self) -> list[RequestOutcome]:
        """Every request's outcome for the client, in the order sent; call after `advance(math.inf)`
        (shared service) so that every request has been served."""
        return [r.outcome() for r in self.requests]

    def _service_cpu_s(self) -> float:
        mean = self.app.cpu_per_request_ms / 1000
        cv = self.app.service_cv
        if cv <= 0:
            return mean
        sigma2 = math.log(1 + cv * cv)
        return mean * self._work_rng.lognormvariate(-sigma2 / 2, math.sqrt(sigma2))

    def _busy(self, name: str, start: float, finish: float) -> None:
        """The pod worked at its full share over [start, finish)."""
        busy = self.busy_s[name]
        first, last = int(start / BIN_S), int(finish / BIN_S)
        for b in range(max(first, 0), min(last, self._bins - 1) + 1):
            overlap = min(finish, (b + 1) * BIN_S) - max(start, b * BIN_S)
            if overlap > 0:
                busy[b] += overlap

    def _reply(self, name: str, at: float) -> None:
        done = int(at / BIN_S)
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
        """Requests that reached `pod` by `t` (every request up to `t` must have been sent) and wait
        at `t`: fifo, those not begun; shared, the connections in its listen queue (what the kernel
        shows as the listening socket's Recv-Q)."""
        if self.service == "shared":
            self.advance(t)
            return len(self._shared[pod.name].accept_queue)
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
