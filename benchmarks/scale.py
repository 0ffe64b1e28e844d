"""croft scale against the Kubernetes HPA on the recorded 5 -> 75 -> 5 RPS burst, and croft's decision
time for 200 pods across 20 collectors, in one run.

The decision reads the /metrics bodies the collectors really serve: croft's series of a poll
(croft.domain.metrics.series: per container 24 busiest syscalls + `other`, the gauges, the counters)
then the collector's own registry, rendered by exposition_body, each container with 2 processes
making 28 syscalls. Beside it, parsing every line of the same bodies; then the decision time as the
Deployment's pods grow (50, 200, 800) and as other Deployments' containers on the same collectors
grow (50, 200, 800).

    .venv/bin/python benchmarks/scale.py [--repeat 200]

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
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.domain.collector.snapshot import CgroupMembership, Instant, Poll, ProcessSample
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage
from croft.domain.metrics.exposition import parse_exposition
from croft.domain.metrics.series import Health, MetricsMemory, series
from croft.domain.scaling.decision import (
    CollectorScrape,
    DeploymentView,
    Observations,
    PodView,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
)
from croft.domain.scaling.record import decode_poll, replay

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "scale" / "burst.jsonl"
META = ROOT / "fixtures" / "scale" / "burst.meta.json"
SYNC_S, METRIC_S, TOLERANCE, TARGET, WINDOW_S, MAX_REPLICAS = 15, 15, 0.1, 0.7, 300, 10
GOAL_CROFT_S, GOAL_LEAD_S, GOAL_DECISION_MS = 6.0, 10.0, 20.0


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


def served_body(containers: list[str]) -> str:
    """A collector's /metrics as it serves it after a poll of `containers`, 2 processes each making
    the 28 `SYSCALLS` (so 24 busiest + `other` per container): croft's series
    (croft.domain.metrics.series) with the one renderer, then the collector's own registry (build
    info, process_*, poll histogram), as exposition_body writes them."""
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
    collector = SnapshotCollector()
    collector.publish(samples)
    return exposition_body(metrics_page(collector, version="bench")).decode("utf-8")


def observations(pods: int, others: int, collectors: int = 20) -> Observations:
    """`pods` pods of the Deployment and `others` containers of other Deployments, spread evenly over
    `collectors` collectors (one container each)."""
    ours = [f"{1 << 200 | i:064x}" for i in range(pods)]
    theirs = [f"{2 << 200 | i:064x}" for i in range(others)]
    scrapes = tuple(
        CollectorScrape(f"croft-{c}", NOW_MS, served_body(ours[c::collectors] + theirs[c::collectors]))
        for c in range(collectors)
    )
    views = tuple(PodView(f"webapp-{i}", (cid,)) for i, cid in enumerate(ours))
    return Observations(NOW_MS, views, scrapes)


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


DEPLOYMENT = DeploymentView("croft-exp", "webapp", 8, 1.0)
CONFIG = ScaleConfig("sendto", 2.06, 50, max_replicas=300)


def decision_ms(seen: Observations, repeat: int) -> Timing:
    """Median and p99 of desired_replicas on `seen` (every scrape's body read as a live poll reads it)."""
    decision = desired_replicas(seen, DEPLOYMENT, CONFIG, ScaleHistory())
    estimate = decision.estimate
    assert estimate is not None and estimate.complete, decision.reason
    assert estimate.containers_counted == len(seen.pods)
    return timed_ms(lambda: desired_replicas(seen, DEPLOYMENT, CONFIG, ScaleHistory()), repeat)


def full_parse_ms(seen: Observations, repeat: int) -> Timing:
    """Median and p99 of parsing every line of every body (what a decision reading all it is served
    would pay before any arithmetic)."""
    return timed_ms(lambda: [parse_exposition(s.body or "") for s in seen.scrapes], repeat)


def seconds(value: float) -> str:
    return f"{value:.0f}" if math.isfinite(value) else "never"


def ratio(a: float, b: float) -> str:
    return "n/a" if not (math.isfinite(a) and math.isfinite(b)) or a == 0 else f"{b / a:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
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
    seen = observations(200, 100)
    lines = sum((s.body or "").count("\n") for s in seen.scrapes)
    size = sum(len(s.body or "") for s in seen.scrapes) / 1e6
    print(
        f"  decision input: 200 pods + 100 other containers on 20 collectors, /metrics as served: "
        f"{lines} lines, {size:.1f} MB"
    )
    median_ms, p99_ms, cpu_median, cpu_p99 = decision_ms(seen, args.repeat)
    full_median, full_p99, _, _ = full_parse_ms(seen, max(args.repeat // 10, 5))
    print(
        f"  decision time per poll: median {median_ms:.2f} ms, p99 {p99_ms:.2f} ms; "
        f"goal p99 < {GOAL_DECISION_MS:.0f} ms: {'met' if p99_ms < GOAL_DECISION_MS else 'MISSED'} "
        f"(goal/p99 {GOAL_DECISION_MS / p99_ms:.1f}x; thread CPU median {cpu_median:.2f} ms, "
        f"p99 {cpu_p99:.2f} ms; load {os.getloadavg()[0]:.1f}); parsing every line of the same bodies "
        f"instead: median {full_median:.2f} ms, p99 {full_p99:.2f} ms ({full_median / median_ms:.0f}x)"
    )
    # How the cost grows: with the Deployment's pods (others fixed at 100), and with other
    # Deployments' containers on the same collectors (the Deployment's 200 pods fixed).
    for label, shapes in (
        ("the Deployment's pods (100 others)", [(n, 100) for n in (50, 200, 800)]),
        ("other containers (200 pods)", [(200, n) for n in (50, 200, 800)]),
    ):
        figures = {shape: decision_ms(observations(*shape), max(args.repeat // 2, 20)) for shape in shapes}
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
