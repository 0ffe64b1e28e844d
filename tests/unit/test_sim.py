"""croft.sim's laws: replicas within [1, max], every request accounted for once, latency that grows
with the backlog, determinism per seed; and the croft arm decides through croft.domain.scaling.decision."""

from __future__ import annotations

import itertools
import math
import random
import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from croft.runs.load import send_times
from croft.sim import ARMS, CONNECTIONS, SERVICES, SimApp, SimOptions, simulate
from croft.sim.cluster import Cluster

APP = SimApp("webapp", "croft-exp", "webapp", cpu_limit_cores=1.0, cpu_per_request_ms=50, calls_per_request=2)


@attrs.frozen
class Steps:
    """Piecewise-constant load: (seconds, rps) segments."""

    segments: tuple[tuple[float, float], ...]

    @property
    def duration_s(self) -> float:
        return sum(d for d, _ in self.segments)

    def rate_at(self, t_s: float) -> float:
        for duration, rps in self.segments:
            if t_s < duration:
                return rps
            t_s -= duration
        return 0.0


apps = st.builds(
    SimApp,
    name=st.just("app"),
    namespace=st.just("ns"),
    deployment=st.just("app"),
    cpu_limit_cores=st.sampled_from([0.5, 1.0, 2.0]),
    cpu_per_request_ms=st.floats(5, 100),
    calls_per_request=st.floats(1, 4),
    service_cv=st.floats(0, 0.5),
    pod_start_s=st.just((0.5, 3.0)),
    readiness_s=st.just((0.5, 5.0)),
    max_replicas=st.integers(1, 10),
)
loads = st.builds(
    Steps, st.lists(st.tuples(st.floats(5, 60), st.floats(0, 60)), min_size=1, max_size=4).map(tuple)
)


@settings(max_examples=40, deadline=None)
@given(
    app=apps,
    load=loads,
    arm=st.sampled_from(ARMS),
    seed=st.integers(0, 2**32),
    connections=st.sampled_from(CONNECTIONS),
    service=st.sampled_from(SERVICES),
    accept_cpu_ms=st.sampled_from([0.0, 5.0, 20.0]),
)
def test_replicas_stay_within_one_and_max_and_every_request_is_accounted_for(
    app, load, arm, seed, connections, service, accept_cpu_ms
):
    app = attrs.evolve(app, service=service, accept_cpu_ms=accept_cpu_ms)
    burst = (load.segments[0][0] if len(load.segments) > 1 else 0.0, load.duration_s)  # the oracle's
    result = simulate("r", app, load, SimOptions(arm=arm, seed=seed, connections=connections), burst_s=burst)
    replicas = result.timeline.initial_replicas
    for rescale in result.timeline.rescales:
        assert rescale.from_replicas == replicas  # a chain: each rescale starts where the last ended
        assert 1 <= rescale.to_replicas <= app.max_replicas
        replicas = rescale.to_replicas
    if arm == "fixed":
        assert result.timeline.rescales == ()
    scheduled = len(send_times(load.rate_at, load.duration_s))
    assert sum(r.target_rps for r in result.rows) == scheduled
    for row in result.rows:
        assert row.ok + row.failures + row.timeouts == row.target_rps == row.achieved_rps
    alive = [p for p in result.timeline.pods if p.deleted_ms is None]
    # The ReplicaSet converged on spec.replicas, except for pods a scale-up within the controller's
    # delay of the end had asked for but not yet created (the timeline lists only created pods).
    missing = replicas - len(alive)
    assert missing >= 0
    if missing:
        last = result.timeline.rescales[-1]
        assert last.to_replicas - last.from_replicas >= missing
        assert result.timeline.end_ms - last.at_ms <= app.controller_delay_s[1] * 1000 + 1


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    load = Steps(((20, 5), (30, 60), (20, 5)))
    one, two = (simulate("r", APP, load, SimOptions(arm="croft", seed=7)) for _ in range(2))
    assert one == two
    assert simulate("r", APP, load, SimOptions(arm="croft", seed=8)).rows != one.rows


def test_below_capacity_latency_is_the_service_time_and_nothing_fails():
    # 8 RPS x 50 ms = 0.4 of one core.
    result = simulate("r", attrs.evolve(APP, service_cv=0), Steps(((30, 8),)), SimOptions(arm="fixed"))
    assert all(r.ok == 8 and r.p50_ms == 50.0 for r in result.rows)


def test_latency_grows_with_the_backlog_of_an_overloaded_pod():
    # 40 RPS into one pod that serves 20: the queue grows by 20 requests (1 s of work) every second.
    result = simulate(
        "r", attrs.evolve(APP, service_cv=0), Steps(((8, 40),)), SimOptions(arm="fixed", timeout_s=60)
    )
    p50 = [r.p50_ms for r in result.rows]
    assert all(b > a for a, b in itertools.pairwise(p50))
    assert 6000 < p50[-1] < 9000  # ~7.5 s of backlog by the last second


def test_the_croft_arm_scales_up_within_seconds_of_a_burst_through_the_real_decision():
    load = Steps(((60, 5), (60, 75), (60, 5)))
    result = simulate("r", APP, load, SimOptions(arm="croft", seed=3), burst_s=(60, 120))
    first_up = min(r.at_ms for r in result.timeline.rescales) - result.record.burst_onset_ms
    # collector poll (<= 2 s) + two scaler polls asking for more (2 x 2 s) + phase: at most ~8 s.
    assert 0 < first_up <= 8_000
    line = re.compile(
        r"^ts=\S+Z estimate_rps=[\d.]+\+? desired=\d+ replicas=\d+->\d+ decision=(up|down|hold) reason="
    )
    assert all(line.match(x) for x in result.scaler_log)
    ups = [x for x in result.scaler_log if "decision=up reason=scale-up" in x]
    assert len(ups) == sum(1 for r in result.timeline.rescales if r.to_replicas > r.from_replicas)
    assert all(r.source == "croft" for r in result.timeline.rescales)


def test_neither_arm_scales_down_before_its_300_s_window():
    load = Steps(((30, 5), (60, 75), (330, 5)))
    for arm in ("croft", "hpa"):
        result = simulate("r", APP, load, SimOptions(arm=arm, seed=1))
        ups = [r for r in result.timeline.rescales if r.to_replicas > r.from_replicas]
        downs = [r for r in result.timeline.rescales if r.to_replicas < r.from_replicas]
        assert ups, arm
        start = result.timeline.start_ms
        # No scale-down within 300 s of the last scale-up's recommendation, nor before 300 s of watching.
        assert all(d.at_ms - max(u.at_ms for u in ups) >= 300_000 - 15_000 for d in downs), arm
        assert all(d.at_ms - start >= 300_000 for d in downs), arm


def test_on_the_offered_load_the_croft_arm_is_sized_in_one_step():
    """5 -> 75 req/s: reading the requests that reach each pod (not its replies) and its queue, croft
    scale asks once, within a few polls of the onset, for what 75 req/s needs (50 ms each, 1 CPU,
    target 0.7: 5.4, so 6) and the backlog the one pod queued (at most a replica more)."""
    load = Steps(((60, 5), (60, 75), (60, 5)))
    for seed in range(1, 6):
        result = simulate(
            "r", APP, load, SimOptions(arm="croft", seed=seed, signal="offered"), burst_s=(60, 120)
        )
        ups = [r for r in result.timeline.rescales if r.to_replicas > r.from_replicas]
        assert [(r.from_replicas, r.source) for r in ups] == [(1, "croft")], (seed, ups)
        assert ups[0].to_replicas in (6, 7)
        assert 0 < ups[0].at_ms - (result.record.burst_onset_ms or 0) <= 8_000
        logged = [x for x in result.scaler_log if "decision=up" in x]
        assert len(logged) == 1 and " backlog_requests=" in logged[0] and "estimate_rps=75.00 " in logged[0]


@settings(max_examples=25, deadline=None)
@given(app=apps, load=loads, seed=st.integers(0, 2**32), probes=st.lists(st.floats(0, 1), max_size=8))
def test_a_pod_counts_every_request_it_receives_and_its_backlog_is_what_waits(app, load, seed, probes):
    """One pod, fixed service times: the arrivals it counts are the requests sent, and its backlog at
    any time is the number of requests that arrived and had not begun (FIFO, worked out here)."""
    import random

    from croft.sim.cluster import Cluster

    app = attrs.evolve(app, service_cv=0.0)
    service_s = app.cpu_per_request_ms / 1000 / app.cpu_limit_cores
    arrivals = send_times(load.rate_at, load.duration_s)
    starts, free = [], 0.0
    for arrival in arrivals:
        starts.append(max(arrival, free))
        free = starts[-1] + service_s
    cluster = Cluster(app, random.Random(seed), load.duration_s + 30)
    (pod,) = cluster.pods
    times = sorted(p * load.duration_s for p in probes)
    served = 0
    for t in [*times, load.duration_s]:
        while served < len(arrivals) and arrivals[served] <= t:
            cluster.send(arrivals[served], timeout_s=1e9)
            served += 1
        expected = sum(1 for a, b in zip(arrivals, starts, strict=True) if a <= t < b)
        assert cluster.backlog(pod, t) == expected
    assert cluster.arrivals_between(pod.name, 0, load.duration_s + 1) == len(arrivals)


def test_pod_delays_are_measured_from_the_scale_up_the_object_and_its_containers():
    from croft.runs.rundir import PodLife, Rescale, Timeline
    from croft.sim.delays import measure

    pods = (
        PodLife("old", -60_000, -58_000, -57_000, None, ("a" * 64,)),  # before the window: not counted
        PodLife("new-1", 10_400, 12_400, 13_900, None, ("b" * 64,)),
        PodLife("new-2", 10_200, 14_200, None, None, ("c" * 64,)),  # not Ready by the end
        PodLife("new-3", 30_300, None, None, None, ()),  # still starting
    )
    rescales = (
        Rescale(10_000, 1, 3, "croft"),
        Rescale(30_000, 3, 4, "croft"),
        Rescale(50_000, 4, 2, "croft"),
    )
    delays = measure([Timeline("ns", "web", 0, 60_000, 1, rescales, (), pods)])
    assert delays.controller.values_s == (0.4, 0.2, 0.3)
    assert delays.pod_start.values_s == (2.0, 4.0)
    assert delays.readiness.values_s == (1.5,)
    assert delays.sim_overrides() == {
        "controller_delay_s": (0.4, 0.2, 0.3),
        "pod_start_s": (2.0, 4.0),
        "readiness_s": (1.5,),
    }
    assert delays.pod_start.text() == "3.0 ± 1.4 s (range 2.0-4.0, n=2)"
    assert measure([]).sim_overrides() == {} and measure([]).readiness.text() == "not measured"


def test_a_pod_read_before_its_recorded_scale_up_belongs_to_that_scale_up():
    """The harness records a scale-up when it sees it (up to ~1.3 s late on the real node) and pods
    are created in whole seconds: a pod reading 1.3 s before the scale-up that made it has a delay
    of 0, not the time since the scale-up before (on the real runs: "delays" of 10.6-28.9 s)."""
    from croft.runs.rundir import PodLife, Rescale, Timeline
    from croft.sim.delays import measure

    pods = (
        PodLife("first", 96_600, 97_600, 103_600, None, ("a" * 64,)),
        PodLife("second", 124_600, 125_600, 138_600, None, ("b" * 64,)),  # its scale-up recorded at 125.8
        PodLife("late", 140_000, 141_000, 150_000, None, ("c" * 64,)),  # 14.171 s after its scale-up
    )
    rescales = (Rescale(97_400, 1, 2, "croft"), Rescale(125_829, 2, 3, "croft"))
    delays = measure([Timeline("ns", "web", 0, 300_000, 1, rescales, (), pods)])
    assert delays.controller.values_s == (0.0, 0.0, 14.171)


def test_a_pod_given_half_its_cpu_limit_serves_at_half_the_speed_and_uses_half_the_cores():
    # 8 RPS x 50 ms at half of one core: 100 ms each, 0.8 of the half core it gets.
    half = attrs.evolve(APP, service_cv=0, cpu_share=0.5)
    result = simulate("r", half, Steps(((30, 8),)), SimOptions(arm="fixed"))
    assert all(r.ok == 8 and r.p50_ms == 100.0 for r in result.rows)
    cores = [v for _, series, _, v in result.prometheus if series == "cpu_cores"]
    assert cores and all(v <= 0.5 for v in cores) and max(cores) > 0.3


@given(
    st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=12),
    st.integers(0, 2**32 - 1),
)
def test_a_sampled_delay_is_one_of_the_values_measured(values: list[float], seed: int) -> None:
    """Measured delays are skewed (most pods in a second, one in tens): drawn from the values, a
    new pod's delay is one of them, never a value between that no pod took."""
    app = attrs.evolve(APP, readiness_s=tuple(values), sampled_delays=frozenset({"readiness_s"}))
    cluster = Cluster(app, random.Random(seed), horizon_s=60.0)
    cluster.set_replicas(0.0, 6, "croft", "")
    for pod in cluster.pods[1:]:
        assert any(pod.ready_s - pod.started_s == pytest.approx(v) for v in values)


def test_a_range_not_named_sampled_is_drawn_uniformly_between_its_bounds() -> None:
    app = attrs.evolve(APP, readiness_s=(1.0, 3.0))
    cluster = Cluster(app, random.Random(7), horizon_s=60.0)
    cluster.set_replicas(0.0, 10, "croft", "")
    drawn = [p.ready_s - p.started_s for p in cluster.pods[1:]]
    assert all(1.0 <= d <= 3.0 for d in drawn) and len({round(d, 6) for d in drawn}) > 2


@settings(max_examples=25, deadline=None)
@given(app=apps, load=loads, seed=st.integers(0, 2**32), service=st.sampled_from(SERVICES))
def test_with_one_pod_keep_alive_connections_change_nothing(app, load, seed, service):
    """Routing only chooses among Ready pods: with one pod, reusing connections or opening one per
    request sends every request to the same pod at the same time, so every outcome is the same
    (with a pod that accepts at once: reused connections skip the listen queue, which costs)."""
    app = attrs.evolve(app, service=service)
    runs = [
        simulate("r", app, load, SimOptions(arm="fixed", seed=seed, connections=c)).rows for c in CONNECTIONS
    ]
    assert runs[0] == runs[1]


def _scaled_cluster(app, seed, load, service, steps):
    """A keep-alive cluster whose replicas follow `steps` ((t, replicas)), sent `load`."""
    app = attrs.evolve(app, service=service, accept_cpu_ms=5.0 if service == "shared" else 0.0)
    cluster = Cluster(app, random.Random(seed), load.duration_s + 30, connections="keep-alive")
    pending = sorted(steps)
    for arrival in send_times(load.rate_at, load.duration_s):
        while pending and pending[0][0] <= arrival:
            t, replicas = pending.pop(0)
            cluster.advance(t)
            cluster.set_replicas(t, replicas, "test", "")
        cluster.send(arrival, timeout_s=2.0)
    cluster.advance(math.inf)
    return cluster


steps = st.lists(st.tuples(st.floats(0, 60), st.integers(1, 6)), max_size=5)


@settings(max_examples=30, deadline=None)
@given(app=apps, load=loads, seed=st.integers(0, 2**32), service=st.sampled_from(SERVICES), steps=steps)
def test_a_pinned_connection_carries_one_request_at_a_time_to_a_pod_ready_when_it_opened(
    app, load, seed, service, steps
):
    """Every request over a connection goes to the pod it was pinned to, a pod that was Ready when
    the connection opened; a connection carries its next request only once the last was answered,
    never after its client gave up, and never after `keepalive_expiry_s` idle. Every request is
    answered, timed out or refused exactly once."""
    cluster = _scaled_cluster(app, seed, load, service, steps)
    pods = {p.name: p for p in cluster.pods}
    by_connection: dict[int, list] = {}
    for request in cluster.requests:
        if request.connection is not None:
            by_connection.setdefault(request.connection, []).append(request)
        assert request.pod is not None or request.connection is None
        assert request.pod is None or request.done_s is not None  # served to the end, even if abandoned
    for number, requests in by_connection.items():
        connection = cluster.connections[number]
        assert pods[connection.pod.name].ready(connection.opened_s)
        assert requests[0].scheduled_s == connection.opened_s
        for earlier, later in itertools.pairwise(requests):
            assert later.pod == connection.pod.name
            assert earlier.answered() and earlier.done_s <= later.scheduled_s
            assert later.scheduled_s - earlier.done_s <= cluster.keepalive_expiry_s
    outcomes = cluster.outcomes()
    assert len(outcomes) == len(send_times(load.rate_at, load.duration_s))
    assert all(o.outcome in ("ok", "timeout", "failed") for o in outcomes)


@settings(max_examples=30, deadline=None)
@given(app=apps, load=loads, seed=st.integers(0, 2**32))
def test_sharing_a_pod_reorders_replies_but_does_the_same_work(app, load, seed):
    """Processor sharing and FIFO are both work-conserving: one pod given the same requests is busy
    for the same seconds and sends its last reply at the same time either way."""
    clusters = []
    for service in SERVICES:
        cluster = Cluster(attrs.evolve(app, service=service), random.Random(seed), load.duration_s + 1e4)
        for arrival in send_times(load.rate_at, load.duration_s):
            cluster.send(arrival, timeout_s=1e9)
        cluster.advance(math.inf)
        clusters.append(cluster)
    fifo, shared = clusters
    (name,) = fifo.busy_s
    assert sum(shared.busy_s[name]) == pytest.approx(sum(fifo.busy_s[name]), rel=1e-9, abs=1e-9)
    last = [max((r.done_s for r in c.requests if r.done_s is not None), default=0.0) for c in clusters]
    assert last[1] == pytest.approx(last[0], rel=1e-9, abs=1e-9)


def test_a_threaded_pod_that_accepts_slowly_keeps_answering_under_overload_and_queues_the_rest():
    """One pod (1 core, 50 ms a request: 20/s) sent 60/s for 30 s. Under pure processor sharing
    (accepted at once) every request shares the pod with all the others, and the replies stop. When
    the acceptor takes its share of the CPU per connection, the busier pod accepts slower: the excess
    waits in the listen queue (the backlog croft reads) and the threads inside keep answering."""
    load = Steps(((30, 60),))
    replies = {}
    for accept_cpu_ms in (0.0, 20.0):
        app = attrs.evolve(APP, service_cv=0, service="shared", accept_cpu_ms=accept_cpu_ms)
        cluster = Cluster(app, random.Random(1), 60.0)
        (pod,) = cluster.pods
        for arrival in send_times(load.rate_at, load.duration_s):
            cluster.send(arrival, timeout_s=10.0)
        cluster.advance(30.0)
        replies[accept_cpu_ms] = cluster.replies_between(pod.name, 10.0, 30.0)
        backlog = cluster.backlog(pod, 30.0)
        assert (backlog == 0) if accept_cpu_ms == 0 else (backlog > 500)
    assert replies[0.0] < 0.25 * 20 * 20
    assert replies[20.0] > 0.6 * 20 * 20


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), poll=st.sampled_from([0.5, 1.0, 3.0]))
def test_a_harness_polling_spec_replicas_records_each_rescale_late_but_within_a_poll(seed, poll):
    """record_poll_s changes only when the rescales are recorded: at or after each, less than a poll
    later, in the same order; the run itself (every request) is the same."""
    load = Steps(((60, 5), (60, 60), (60, 5)))
    exact, seen = (
        simulate("r", APP, load, SimOptions(arm="croft", seed=seed, record_poll_s=p)) for p in (0.0, poll)
    )
    assert seen.rows == exact.rows
    late = seen.timeline.rescales
    assert [(r.from_replicas, r.to_replicas) for r in late] == [
        (r.from_replicas, r.to_replicas) for r in exact.timeline.rescales[: len(late)]
    ]
    for recorded, real in zip(late, exact.timeline.rescales, strict=False):
        assert 0 <= recorded.at_ms - real.at_ms <= poll * 1000


def test_an_idle_threaded_pod_accepts_at_once_and_the_acceptor_takes_no_cpu_from_the_threads():
    """One pod (1 core), 500 ms a request, a connection each, accept_cpu_ms 20: the first request
    finds no thread busy and starts at once; the second (at 0.1 s) waits 20 ms of turns beside the
    one busy thread, then both share the pod. A: 0.12 s alone, then 0.38 s at half speed, done at
    0.88 s; B: 0.38 s at half speed, then 0.12 s alone, done at 1.0 s. The pod worked 1.0 s: the
    requests' work and nothing more (an acceptor taking its turns as CPU makes that 1.02 s)."""
    app = attrs.evolve(APP, cpu_per_request_ms=500, service_cv=0, service="shared", accept_cpu_ms=20.0)
    cluster = Cluster(app, random.Random(1), 10.0)
    a = cluster.send(0.0, timeout_s=10.0)
    b = cluster.send(0.1, timeout_s=10.0)
    cluster.advance(math.inf)
    assert a.done_s == pytest.approx(0.88, abs=1e-9) and b.done_s == pytest.approx(1.0, abs=1e-9)
    (name,) = cluster.busy_s
    assert sum(cluster.busy_s[name]) == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), bound=st.sampled_from([1.0, 3.0, 8.0]), rps=st.sampled_from([4.0, 20.0]))
def test_a_bounded_connection_carries_no_reply_after_the_first_one_sent_at_its_age(seed, bound, rps):
    """With the server's bound on a connection's life, each connection's replies but its last were
    sent before it was `bound` old: the one at that age or older says Connection: close."""
    app = attrs.evolve(APP, service="shared", accept_cpu_ms=5.0, max_connection_age_s=bound)
    cluster = Cluster(app, random.Random(seed), 60.0, initial_replicas=2, connections="keep-alive")
    for arrival in send_times(Steps(((30, rps),)).rate_at, 30.0):
        cluster.send(arrival, timeout_s=10.0)
    cluster.advance(math.inf)
    for connection in cluster.connections:
        replies = sorted(
            r.done_s for r in cluster.requests if r.connection == connection.number and r.answered()
        )
        assert all(done - connection.opened_s < bound for done in replies[:-1]), (connection.number, replies)
    assert len(cluster.connections) > 30 / bound / 2  # renewed, not one for the whole run


@pytest.mark.parametrize("bound", [0.0, 5.0])
def test_with_the_bound_pods_started_later_take_load_and_without_it_they_idle(bound):
    """One pod at 8 req/s (50 ms each: 40 % of it), scaled to 3 at 10 s. Without the bound the
    client's oldest connection is never idle 5 s, so it carries every request to the first pod; with
    connections closed at 5 s of age the new pods take a share from then on."""
    app = attrs.evolve(APP, service="shared", accept_cpu_ms=5.0, max_connection_age_s=bound)
    cluster = Cluster(app, random.Random(3), 120.0, connections="keep-alive")
    for arrival in send_times(Steps(((90, 8),)).rate_at, 90.0):
        if arrival >= 10.0 and cluster.spec_replicas == 1:
            cluster.set_replicas(10.0, 3, "test", "more")
        cluster.send(arrival, timeout_s=10.0)
    cluster.advance(math.inf)
    first, *later = (p.name for p in cluster.pods)
    late = [cluster.arrivals_between(name, 30.0, 90.0) for name in later]
    total = cluster.arrivals_between(first, 30.0, 90.0) + sum(late)
    if bound == 0:
        assert late == [0, 0]
    else:
        assert all(n > 0.1 * total for n in late), (late, total)


def test_the_oracle_asks_for_the_peak_s_replicas_at_the_onset_and_its_start_at_the_end():
    load = Steps(((60, 5), (60, 75), (60, 5)))
    result = simulate("r", APP, load, SimOptions(arm="oracle", seed=2), burst_s=(60.0, 120.0))
    onset = result.timeline.start_ms + 60_000
    # 75 req/s x 50 ms / (1 core x 0.7) = 5.36: 6 replicas
    assert [
        (r.at_ms - onset, r.from_replicas, r.to_replicas, r.source) for r in result.timeline.rescales
    ] == [
        (0, 1, 6, "oracle"),
        (60_000, 6, 1, "oracle"),
    ]
    told = simulate("r", APP, load, SimOptions(arm="oracle", oracle_replicas=3), burst_s=(60.0, 120.0))
    assert [r.to_replicas for r in told.timeline.rescales] == [3, 1]
    with pytest.raises(ValueError, match="the oracle arm needs the burst"):
        simulate("r", APP, load, SimOptions(arm="oracle"))
