"""croft scale against the Kubernetes HPA on the recorded 5 -> 75 -> 5 RPS burst, and croft's decision
time for 200 pods across 20 collectors, in one run.

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
import statistics
import time
from pathlib import Path

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


def decision_time_ms(repeat: int, others: int = 5, quiet: bool = False) -> tuple[float, float]:
    """Median and p99 of desired_replicas (parsing every body) for 200 pods on 20 collectors, each
    collector also exporting `others` containers that are not the Deployment's."""
    now_ms = 1_767_000_000_000
    syscalls = ("sendto", "recvfrom", "read", "write", "epoll_wait", "futex", "openat", "close")
    pods, scrapes = [], []
    for c in range(20):
        samples = [Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), now_ms / 1000)]
        containers = [f"{c * 1000 + i:064x}" for i in range(10 + others)]  # 10 of the Deployment's
        for i, cid in enumerate(containers):
            label = ((names.LABEL_CONTAINER_ID, cid),)
            samples += [
                Sample(names.CONTAINER_CPU_CORES, label, 0.3),
                Sample(names.CONTAINER_MEMORY_BYTES, label, 2e8),
            ]
            samples.append(Sample(names.CONTAINER_CPU_THROTTLED_FRACTION, label, 0.01))
            for resource in names.PRESSURE_RESOURCES:
                samples.append(
                    Sample(names.CONTAINER_PRESSURE_AVG10, (*label, (names.LABEL_RESOURCE, resource)), 1.5)
                )
            for s in syscalls:
                samples.append(Sample(names.CONTAINER_SYSCALL_RATE, (*label, (names.LABEL_SYSCALL, s)), 12.5))
            if i < 10:
                pods.append(PodView(f"webapp-{c}-{i}", (cid,)))
        scrapes.append(CollectorScrape(f"croft-{c}", now_ms, render_exposition(samples)))
    observations = Observations(now_ms, tuple(pods), tuple(scrapes))
    deployment = DeploymentView("croft-exp", "webapp", 8, 1.0)
    config = ScaleConfig("sendto", 2.06, 50, max_replicas=300)
    lines = sum(s.body.count("\n") for s in scrapes if s.body)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        decision = desired_replicas(observations, deployment, config, ScaleHistory())
        times.append((time.perf_counter() - started) * 1000)
    assert decision.estimate is not None and decision.estimate.containers_counted == 200
    times.sort()
    if not quiet:
        print(f"  decision input: 200 pods, 20 collectors, {lines} exposition lines")
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


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
    median_ms, p99_ms = decision_time_ms(args.repeat)
    print(
        f"  decision time per poll: median {median_ms:.2f} ms, p99 {p99_ms:.2f} ms; "
        f"goal p99 < {GOAL_DECISION_MS:.0f} ms: {'met' if p99_ms < GOAL_DECISION_MS else 'MISSED'} "
        f"(goal/p99 {GOAL_DECISION_MS / p99_ms:.1f}x)"
    )
    # How the cost grows: the Deployment's 200 pods fixed, more containers on the collectors.
    growth = {others: decision_time_ms(args.repeat, others, quiet=True)[0] for others in (5, 20, 80)}
    print(
        "  median decision time vs other containers per collector (200 pods fixed): "
        + ", ".join(f"{others}: {ms:.2f} ms" for others, ms in growth.items())
        + f" ({growth[80] / growth[5]:.1f}x from 5 to 80)"
    )


if __name__ == "__main__":
    main()
