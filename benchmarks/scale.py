"""croft scale against the Kubernetes HPA on the recorded 5 -> 75 -> 5 RPS burst, and croft scale's
decision time for 200 pods across 20 collectors, in one run.

The decision reads what the collectors really answer: croft scale asks each for only the series its
estimate reads (`GET /metrics?name[]=...&syscall=sendto&syscall=other`, `scrape_query`), the collector
picks them from its newest poll (croft.domain.metrics.series: per container 24 busiest syscalls +
`other`, the gauges, the counters; each container with 2 processes making 28 syscalls) and renders
them with exposition_body, and the scaler parses the small answers whole and decides. Measured, in
rounds (median and p99 per round; the figure is the median of the rounds [their min-max]):

- the decision from the 20 answers (the scaler's CPU per poll: parse, select, estimate, decide),
  beside the same decision from whole pages (a collector of a version before the query);
- the collector rendering one answer (parse the query, pick, render), beside rendering its page;
- a poll end to end over HTTP: 20 croft collectors (croft's HttpServer and /metrics route, in another
  process) fetched 8 at a time as croft scale does, then the decision;
- the decision time as the Deployment's pods grow (50, 200, 800) and as other Deployments'
  containers on the same collectors grow (50, 200, 800).

    .venv/bin/python benchmarks/scale.py [--repeat 200] [--rounds 5]

The burst is fixtures/scale/burst.jsonl (SYNTHETIC, see scripts/make-scale-fixtures.py): croft's
decisions are a replay of it with default options. The HPA arm is a model of the HPA's algorithm
(pkg/controller/podautoscaler, autoscaling/v2 defaults) fed the same offered load
(burst.meta.json): metrics-server samples each pod's CPU every 15 s as the mean over the last 15 s,
capped at the pod's CPU limit (1 core; request = limit, so both arms assume the same capacity); the
HPA syncs every 15 s; utilization = summed usage over all pods (a not-yet-Ready pod counts as 0, as
the HPA does when scaling up) ÷ (pods × request); no change within 10 % tolerance; desired =
ceil(pods × utilization ÷ 0.7); scale-up limited to max(+4 pods, +100 %) per 15 s; scale-down to the
highest recommendation of the last 300 s; [1, 10]. New pods are Ready 5 s after they are asked for,
as in the recording. The HPA's two 15 s phases relative to the burst are not known, so it is run for
every combination of phases in 1 s steps and reported as median [min-max].
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import httpx

from croft.adapters.http.metrics import (
    CONTENT_TYPE,
    MetricsPage,
    SnapshotCollector,
    exposition_body,
    metrics_handler,
    metrics_page,
)
from croft.adapters.http.server import Handler, HttpServer, Response
from croft.domain.collector.snapshot import CgroupMembership, Instant, Poll, ProcessSample
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage
from croft.domain.metrics.exposition import Sample
from croft.domain.metrics.query import parse_query, query_string
from croft.domain.metrics.series import Health, MetricsMemory, series
from croft.domain.scaling.decision import (
    CollectorScrape,
    DeploymentView,
    Observations,
    PodView,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
    scrape_query,
)
from croft.domain.scaling.record import decode_poll, replay

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "scale" / "burst.jsonl"
META = ROOT / "fixtures" / "scale" / "burst.meta.json"
SYNC_S, METRIC_S, TOLERANCE, TARGET, WINDOW_S, MAX_REPLICAS = 15, 15, 0.1, 0.7, 300, 10
GOAL_CROFT_S, GOAL_LEAD_S, GOAL_DECISION_MS = 6.0, 10.0, 20.0
OTHERS = 100
"""Containers of other Deployments on the collectors, beside the Deployment's pods."""


def croft_arm(meta: dict[str, object]) -> dict[str, float]:
    polls = [decode_poll(line) for line in FIXTURE.read_text().splitlines()]
    config = ScaleConfig("sendto", float(meta["calls_per_request"]), float(meta["cpu_per_request_ms"]))
    onset, end = int(meta["burst_onset_ms"]), int(meta["burst_end_ms"])
    need = math.ceil(75 * config.cpu_per_request_ms / 1000 / (1.0 * TARGET))
    first_up = reach = None
    downs_in_burst, peak = 0, 0
    for poll, decision in replay(polls, config):
        t = poll.observations.now_ms
        peak = max(peak, decision.replicas)
        if t >= onset and decision.action == "up" and first_up is None:
            first_up = (t - onset) / 1000
        if t >= onset and decision.replicas >= need and reach is None:
            reach = (t - onset) / 1000
        if onset <= t <= end and decision.action == "down":
            downs_in_burst += 1
    return {
        "first_up_s": first_up or math.inf,
        "reach_s": reach or math.inf,
        "downs": downs_in_burst,
        "peak": peak,
    }


def hpa_arm(meta: dict[str, object], metric_phase: int, sync_phase: int) -> dict[str, float]:
    """One run of the HPA model, times in whole seconds from the recording's start."""
    offered = {int((t - int(meta["start_ms"])) / 1000): rps for t, rps in meta["offered_rps"]}
    cpu_s = float(meta["cpu_per_request_ms"]) / 1000
    start_s = int(meta["pod_start_ms"]) // 1000
    onset = (int(meta["burst_onset_ms"]) - int(meta["start_ms"])) // 1000
    end = (int(meta["burst_end_ms"]) - int(meta["start_ms"])) // 1000
    need = math.ceil(75 * cpu_s / TARGET)
    ready_at = [0]  # one pod, Ready from the start
    usage_by_s: list[float] = []  # total CPU used by Ready pods, per second
    metric = 0.0
    recommendations: list[tuple[int, int]] = []
    first_up = reach = None
    downs, peak = 0, 1
    for t in range(len(offered)):
        ready = sum(1 for r in ready_at if r <= t)
        usage_by_s.append(min(offered[t] * cpu_s, ready * 1.0))  # capped at the Ready pods' limits
        if t % METRIC_S == metric_phase and t >= METRIC_S:
            metric = statistics.fmean(usage_by_s[-METRIC_S:])
        if t % SYNC_S != sync_phase or t < METRIC_S:
            continue
        current = len(ready_at)
        utilization = metric / current  # not-yet-Ready pods count as 0 usage
        ratio = utilization / TARGET
        desired = current if abs(ratio - 1) <= TOLERANCE else math.ceil(current * ratio)
        desired = min(max(desired, 1), MAX_REPLICAS)
        recommendations = [(at, r) for at, r in recommendations if at > t - WINDOW_S] + [(t, desired)]
        if desired > current:
            desired = min(desired, max(current + 4, current * 2))
        elif desired < current:
            desired = max(r for _, r in recommendations)
        if desired > current:
            ready_at += [t + start_s] * (desired - current)
            if t >= onset and first_up is None:
                first_up = float(t - onset)
        elif desired < current:
            ready_at = ready_at[:desired]
            downs += onset <= t <= end
        peak = max(peak, len(ready_at))
        if t >= onset and len(ready_at) >= need and reach is None:
            reach = float(t - onset)
    return {"first_up_s": first_up or math.inf, "reach_s": reach or math.inf, "downs": downs, "peak": peak}


SYSCALLS = [
    "sendto", "recvfrom", "read", "write", "epoll_wait", "futex", "openat", "close", "mmap", "munmap",
    "fstat", "lseek", "ioctl", "clock_gettime", "nanosleep", "getpid", "poll", "brk", "accept4", "writev",
    "readv", "sendmsg", "recvmsg", "select", "madvise", "rt_sigaction", "rt_sigprocmask", "getrandom",
]  # fmt: skip
ZERO_RATES = (
    "ctx_voluntary_s", "ctx_involuntary_s", "read_bytes_s", "write_bytes_s",
    "network_rx_bytes_s", "network_tx_bytes_s", "runqueue_s",
)  # fmt: skip
NOW_MS = 1_767_000_000_000


def served_samples(containers: list[str]) -> tuple[Sample, ...]:
    """A collector's series after a poll of `containers`, 2 processes each making the 28 `SYSCALLS`
    (so 24 busiest + `other` per container): croft.domain.metrics.series of the poll's rows."""
    processes, rows = [], []
    for c, cid in enumerate(containers):
        pod = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{c:08x}.slice"
        path = f"{pod}/cri-containerd-{cid}.scope"
        membership = CgroupMembership(unified=path)
        usage = CgroupUsage(
            cpu_cores=0.3,
            cpu_throttled_fraction=0.01,
            memory_bytes=200 << 20,
            oom_kills=0,
            cpu_pressure_avg10=1.5,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.25,
        )
        for p in range(2):
            tgid = 1000 + 2 * c + p
            processes.append(ProcessSample(tgid, "web", "/srv/web", "/", ("web",), membership, *[1] * 10))
            calls = tuple(SyscallRate(name=n, rate_per_sec=100.0 - s + p) for s, n in enumerate(SYSCALLS))
            process = Process(comm="web", exe="/srv/web", cgroup=path, container_id=cid, cwd="/")
            usage_p = Usage(cpu_cores=0.15, rss_bytes=1 << 20, threads=4, **dict.fromkeys(ZERO_RATES, 0.0))
            rows.append(
                Row(
                    unix_ms=NOW_MS,
                    tgid=tgid,
                    process=process,
                    workload="no-gpu",
                    usage=usage_p,
                    cgroup_usage=usage,
                    syscalls=calls,
                )
            )
    poll = Poll(Instant(NOW_MS, 0), 100, tuple(processes), ())
    samples, _ = series(poll, rows, Health(0.01, 10_000, 0, 0, 0), MetricsMemory())
    return samples


def served_page(containers: list[str]) -> MetricsPage:
    """The collector's /metrics after a poll of `containers`: its series, then its own registry
    (build info, process_*, poll histogram)."""
    collector = SnapshotCollector()
    collector.publish(served_samples(containers))
    return metrics_page(collector, version="bench")


DEPLOYMENT = DeploymentView("croft-exp", "webapp", 8, 1.0)
CONFIG = ScaleConfig("sendto", 2.06, 50, max_replicas=300)
QUERY = query_string(scrape_query(CONFIG))
"""What croft scale asks each collector for (the part of the URL after `?`)."""


def answer(page: MetricsPage, query: str = QUERY) -> bytes:
    """The collector's answer to `GET /metrics?<query>`, as its /metrics route renders it."""
    return exposition_body(page, parse_query(query))


@attrs.frozen
class Cluster:
    """`pods` of the Deployment and other containers spread evenly over collectors (one container
    each), and each collector's page."""

    pods: tuple[PodView, ...]
    pages: tuple[MetricsPage, ...]

    @classmethod
    def of(cls, pods: int, others: int, collectors: int = 20) -> Cluster:
        ours = [f"{1 << 200 | i:064x}" for i in range(pods)]
        theirs = [f"{2 << 200 | i:064x}" for i in range(others)]
        pages = tuple(served_page(ours[c::collectors] + theirs[c::collectors]) for c in range(collectors))
        return cls(tuple(PodView(f"webapp-{i}", (cid,)) for i, cid in enumerate(ours)), pages)

    def observations(self, bodies: list[str]) -> Observations:
        scrapes = tuple(CollectorScrape(f"croft-{c}", NOW_MS, body) for c, body in enumerate(bodies))
        return Observations(NOW_MS, self.pods, scrapes)

    def asked(self) -> Observations:
        """The poll croft scale sees: each collector's answer to its query."""
        return self.observations([answer(page).decode() for page in self.pages])

    def whole(self) -> Observations:
        """The poll croft scale sees from collectors that ignore the query: their whole pages."""
        return self.observations([exposition_body(page).decode() for page in self.pages])


Timing = tuple[float, float, float, float]
"""Median and p99 of the wall time, then of the thread's CPU time (which a busy machine disturbs
less), ms."""


def timed_ms(action: Callable[[], object], repeat: int) -> Timing:
    """`Timing` of `action` over `repeat` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), time.thread_time()
        action()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - used) * 1000)
    wall.sort()
    cpu.sort()
    p99 = min(repeat - 1, int(repeat * 0.99))
    return statistics.median(wall), wall[p99], statistics.median(cpu), cpu[p99]


def rounds_ms(action: Callable[[], object], repeat: int, rounds: int) -> list[Timing]:
    """`timed_ms` of `action`, `rounds` times."""
    return [timed_ms(action, repeat) for _ in range(rounds)]


def spread_ms(timings: list[Timing], index: int) -> str:
    """Figure `index` of a `Timing` over rounds: the median of the rounds [min-max]."""
    values = sorted(t[index] for t in timings)
    return f"{statistics.median(values):.2f} [{values[0]:.2f}-{values[-1]:.2f}]"


def decide(seen: Observations) -> None:
    """desired_replicas on `seen`; it must count every pod with complete data."""
    decision = desired_replicas(seen, DEPLOYMENT, CONFIG, ScaleHistory())
    estimate = decision.estimate
    assert estimate is not None and estimate.complete, decision.reason
    assert estimate.containers_counted == len(seen.pods)


def decision_ms(seen: Observations, repeat: int, rounds: int = 1) -> list[Timing]:
    """Timings of desired_replicas on `seen` (every scrape's body read as a live poll reads it), in a
    process whose garbage collector walks what croft scale's does: what is alive is frozen first, as
    croft scale freezes what it holds before its loop (the collectors' pages built here are not in
    its process; walked by every full collection, they made the p99 several times the median)."""
    decide(seen)
    gc.collect()
    gc.freeze()
    return rounds_ms(lambda: decide(seen), repeat, rounds)


def whole_page_route(page: MetricsPage) -> Handler:
    """/metrics as croft's collector answered before the query: the whole page, whatever is asked."""
    return lambda _: Response(200, CONTENT_TYPE, exposition_body(page))


def serve(pods: int, others: int, old: int) -> None:
    """Serve `Cluster.of(pods, others)`'s pages from croft's HttpServer and /metrics route (`old`:
    the route before the query, the whole page whatever is asked), one server per collector on
    127.0.0.1; print their ports as a JSON list, serve until stdin closes."""
    servers = []
    for page in Cluster.of(pods, others).pages:
        server = HttpServer("127.0.0.1", 0)
        server.route("/metrics", whole_page_route(page) if old else metrics_handler(page))
        server.start()
        servers.append(server)
    print(json.dumps([server.address[1] for server in servers]), flush=True)
    sys.stdin.read()
    for server in servers:
        server.close()


def http_poll_ms(cluster: Cluster, repeat: int, rounds: int, old: bool = False) -> list[Timing]:
    """A poll end to end over HTTP: every collector (croft's server, in another process; `old`: as
    before the query) asked with `QUERY`, 8 at a time as croft scale's loop does, then the decision
    from the answers."""
    argv = [sys.executable, __file__, "--serve", str(len(cluster.pods)), str(OTHERS), str(int(old))]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as servers:
        assert servers.stdout is not None and servers.stdin is not None
        ports = json.loads(servers.stdout.readline())
        urls = [f"http://127.0.0.1:{port}/metrics?{QUERY}" for port in ports]
        with httpx.Client(timeout=10) as client, ThreadPoolExecutor(max_workers=8) as pool:

            def poll() -> None:
                bodies = list(pool.map(lambda url: client.get(url).raise_for_status().text, urls))
                decide(cluster.observations(bodies))

            gc.collect()
            gc.freeze()
            timings = rounds_ms(poll, repeat, rounds)
        servers.stdin.close()
    return timings


def seconds(value: float) -> str:
    return f"{value:.0f}" if math.isfinite(value) else "never"


def ratio(a: float, b: float) -> str:
    return "n/a" if not (math.isfinite(a) and math.isfinite(b)) or a == 0 else f"{b / a:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", nargs=3, type=int, help=argparse.SUPPRESS)  # http_poll_ms' servers
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    meta = json.loads(META.read_text())
    croft = croft_arm(meta)
    runs = [hpa_arm(meta, m, s) for m in range(METRIC_S) for s in range(SYNC_S)]

    def spread(key: str) -> tuple[float, str]:
        values = sorted(r[key] for r in runs)
        mid = statistics.median(values)
        return mid, f"{seconds(mid)} [{seconds(values[0])}-{seconds(values[-1])}]"

    print("croft scale vs HPA model on fixtures/scale/burst.jsonl (synthetic 5 -> 75 -> 5 RPS)")
    print(f"  {'figure':38} {'croft':>8} {'HPA median [min-max]':>22} {'HPA/croft':>10}")
    for key, label in (
        ("first_up_s", "burst onset -> first scale-up, s"),
        ("reach_s", "burst onset -> 6 replicas, s"),
    ):
        mid, text = spread(key)
        print(f"  {label:38} {seconds(croft[key]):>8} {text:>22} {ratio(croft[key], mid):>10}")
    for key, label in (("downs", "scale-downs inside the burst"), ("peak", "peak replicas")):
        _, text = spread(key)
        print(f"  {label:38} {croft[key]:>8.0f} {text:>22}")
    lead = spread("first_up_s")[0] - croft["first_up_s"]
    verdicts = (
        f"croft <= {GOAL_CROFT_S:.0f} s: {'met' if croft['first_up_s'] <= GOAL_CROFT_S else 'MISSED'}",
        f">= {GOAL_LEAD_S:.0f} s ahead of the HPA (median lead {lead:.0f} s): "
        + ("met" if lead >= GOAL_LEAD_S else "MISSED"),
        f"0 scale-downs in the burst: {'met' if croft['downs'] == 0 else 'MISSED'}",
    )
    print("  goals: " + "; ".join(verdicts))
    cluster = Cluster.of(200, OTHERS)
    asked, whole = cluster.asked(), cluster.whole()

    def size(seen: Observations) -> str:
        lines = sum((s.body or "").count("\n") for s in seen.scrapes)
        return f"{lines} lines, {sum(len(s.body or '') for s in seen.scrapes) / 1e3:.0f} kB"

    print(
        f"  decision input: 200 pods + {OTHERS} other containers on 20 collectors; /metrics?{QUERY[:40]}...: "
        f"{size(asked)} (whole pages: {size(whole)})"
    )
    rounds, repeat = args.rounds, args.repeat
    small = decision_ms(asked, repeat, rounds)
    full = decision_ms(whole, max(repeat // 20, 5), rounds)
    p99 = statistics.median(t[1] for t in small)
    print(
        f"  decision time per poll over {rounds} rounds of {repeat}, ms, median of the rounds [min-max]: "
        f"median {spread_ms(small, 0)}, p99 {spread_ms(small, 1)}; goal p99 < {GOAL_DECISION_MS:.0f} ms: "
        f"{'met' if p99 < GOAL_DECISION_MS else 'MISSED'} (goal/p99 {GOAL_DECISION_MS / p99:.1f}x; "
        f"thread CPU median {spread_ms(small, 2)}, p99 {spread_ms(small, 3)}; load {os.getloadavg()[0]:.1f})"
    )
    print(
        f"  the same decision from whole pages (a collector older than the query): median "
        f"{spread_ms(full, 0)}, p99 {spread_ms(full, 1)} "
        f"({statistics.median(t[0] for t in full) / statistics.median(t[0] for t in small):.0f}x "
        "the answers')"
    )
    page = cluster.pages[0]
    render = rounds_ms(lambda: answer(page), repeat, rounds)
    render_all = rounds_ms(lambda: exposition_body(page), max(repeat // 10, 5), rounds)
    print(
        f"  a collector rendering its answer ({len(cluster.pods) // 20 + OTHERS // 20} containers, "
        f"{len(answer(page))} B): median {spread_ms(render, 0)}, p99 {spread_ms(render, 1)} ms (thread CPU "
        f"median {spread_ms(render, 2)}, p99 {spread_ms(render, 3)}); its whole "
        f"page ({len(exposition_body(page))} B): median {spread_ms(render_all, 0)}, "
        f"p99 {spread_ms(render_all, 1)} ms"
    )
    http = http_poll_ms(cluster, max(repeat // 4, 10), rounds)
    http_old = http_poll_ms(cluster, max(repeat // 40, 5), rounds, old=True)
    print(
        f"  a poll end to end over HTTP (20 croft collectors in one other process, fetched 8 at a time, "
        f"then the decision): median {spread_ms(http, 0)}, p99 {spread_ms(http, 1)} ms; from collectors "
        f"older than the query: median {spread_ms(http_old, 0)}, p99 {spread_ms(http_old, 1)} ms"
    )
    # How the cost grows: with the Deployment's pods (others fixed), and with other Deployments'
    # containers on the same collectors (the Deployment's 200 pods fixed).
    for label, shapes in (
        (f"the Deployment's pods ({OTHERS} others)", [(n, OTHERS) for n in (50, 200, 800)]),
        ("other containers (200 pods)", [(200, n) for n in (50, 200, 800)]),
    ):
        figures = {
            shape: decision_ms(Cluster.of(*shape).asked(), max(repeat // 2, 20))[0] for shape in shapes
        }
        counts = [shape[0] if "pods (" in label else shape[1] for shape in shapes]
        first, last = figures[shapes[0]], figures[shapes[-1]]
        print(
            f"  decision time vs {label}: "
            + ", ".join(
                f"{n}: {t[0]:.2f} ms (p99 {t[1]:.2f}, CPU {t[2]:.2f})"
                for n, t in zip(counts, figures.values(), strict=True)
            )
            + f"; from {counts[0]} to {counts[-1]}: median x{last[0] / first[0]:.1f}, "
            + f"CPU x{last[2] / first[2]:.1f}"
        )


if __name__ == "__main__":
    main()
