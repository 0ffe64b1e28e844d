#!/usr/bin/env python3
"""Write croft scale's recorded fixtures: fixtures/scale/{burst,outage}.jsonl and their .meta.json.

SYNTHETIC: these are simulated, not captured on a cluster. The simulation is the docs/experiments.md
burst at --scale 0.5: 30 s warm-up at 5 RPS, 180 s at 5 RPS, 120 s at 75 RPS, then 5 RPS (330 s, long
enough for a 300 s scale-down window to end). Requests arrive as a Poisson process; each makes 2 or 3
sendto calls (2.06 on average); the load is spread evenly over the running pods. Two collectors
(nodes) poll every 2 s at their own phase and serve the rate over their last poll; the scaler polls
every 2 s and sees each collector's newest poll. The Deployment starts at 1 replica and follows croft's
own decisions with default options (a new pod runs 5 s after it is asked for). The app is modelled
as serving the whole offered load (no saturation), so the syscall rate follows the offered rate.

outage.jsonl is the same run with collector croft-b refusing connections for 30 s during the burst
and serving a frozen (stale) poll for 40 s around the time the scale-down window ends.

    .venv/bin/python scripts/make-scale-fixtures.py [--out fixtures/scale]
"""

from __future__ import annotations

import argparse
import json
import math
import random
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
from croft.domain.scaling.record import RecordedPoll, encode_poll

START_MS = 1_767_000_000_000
STEP_MS = 2000
CALLS_PER_REQUEST = 2.06
CPU_PER_REQUEST_MS = 50.0
CPU_LIMIT = "1"
CPU_LIMIT_CORES = 1.0
POD_START_MS = 5000
COLLECTORS = ("croft-a", "croft-b")
COLLECTOR_PHASE_MS = (700, 1300)
PHASES = ((30_000, 5.0), (180_000, 5.0), (120_000, 75.0), (330_000, 5.0))
SEED = 20260601


def offered_rps(t_ms: int) -> float:
    """The profile's offered load at `t_ms` after the start."""
    edge = 0
    for length, rps in PHASES:
        edge += length
        if t_ms < edge:
            return rps
    return PHASES[-1][1]


def poisson(rng: random.Random, mean: float) -> int:
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def container_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


class Simulation:
    """The cluster, the load and two collectors, advanced in 100 ms ticks."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pods: list[tuple[str, str, int]] = []  # (name, container id, running from ms)
        self.next_pod = 0
        self.calls: dict[str, float] = {}  # container id -> sendto calls since its collector's last poll
        self.served: dict[str, tuple[int, dict[str, float]]] = {c: (0, {}) for c in COLLECTORS}
        self.others = {c: (container_id(self.rng), container_id(self.rng)) for c in COLLECTORS}
        self.resize(1, 0, immediately=True)

    def resize(self, replicas: int, now: int, immediately: bool = False) -> None:
        while len(self.pods) < replicas:
            name = f"webapp-7d4b9c-{self.next_pod:05d}"
            self.next_pod += 1
            self.pods.append((name, container_id(self.rng), now if immediately else now + POD_START_MS))
        while len(self.pods) > replicas:
            _, cid, _ = self.pods.pop()
            self.calls.pop(cid, None)

    def node_of(self, index: int) -> str:
        return COLLECTORS[index % len(COLLECTORS)]

    def tick(self, t: int, dt: int) -> None:
        running = [cid for _, cid, since in self.pods if since <= t]
        requests = poisson(self.rng, offered_rps(t) * dt / 1000)
        for _ in range(requests):
            if running:
                cid = running[self.rng.randrange(len(running))]
                self.calls[cid] = self.calls.get(cid, 0) + (3 if self.rng.random() < 0.06 else 2)
        for n, collector in enumerate(COLLECTORS):
            if (t - COLLECTOR_PHASE_MS[n]) % STEP_MS == 0 and t >= COLLECTOR_PHASE_MS[n]:
                rates = {}
                for index, (_, cid, since) in enumerate(self.pods):
                    if self.node_of(index) == collector and since <= t:
                        rates[cid] = round(self.calls.pop(cid, 0) / (STEP_MS / 1000), 2)
                for k, other in enumerate(self.others[collector]):
                    rates[other] = round(self.rng.uniform(1, 4) * (k + 1), 2)
                self.served[collector] = (t, rates)

    def body(self, collector: str) -> str:
        at, rates = self.served[collector]
        samples = [Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), (START_MS + at) / 1000)]
        for cid, rate in rates.items():
            samples.append(
                Sample(names.CONTAINER_CPU_CORES, ((names.LABEL_CONTAINER_ID, cid),), round(rate * 0.024, 4))
            )
            labels = ((names.LABEL_CONTAINER_ID, cid), (names.LABEL_SYSCALL, "sendto"))
            samples.append(Sample(names.CONTAINER_SYSCALL_RATE, labels, rate))
        return render_exposition(samples)


def simulate(outage: bool) -> tuple[list[RecordedPoll], dict[str, object]]:
    sim = Simulation(SEED)
    config = ScaleConfig("sendto", CALLS_PER_REQUEST, CPU_PER_REQUEST_MS)
    history = ScaleHistory()
    replicas = 1
    total = sum(length for length, _ in PHASES)
    onset = PHASES[0][0] + PHASES[1][0]
    burst_end = onset + PHASES[2][0]
    down = (onset + 60_000, onset + 90_000)
    stale = (burst_end + 280_000, burst_end + 320_000)
    frozen: str | None = None
    polls = []
    for t in range(0, total, 100):
        sim.tick(t, 100)
        if t == 0 or t % STEP_MS:
            continue
        now = START_MS + t
        scrapes = []
        for collector in COLLECTORS:
            body = sim.body(collector)
            if outage and collector == "croft-b" and down[0] <= t < down[1]:
                scrapes.append(CollectorScrape(collector, now, None, "[Errno 111] Connection refused"))
                continue
            if outage and collector == "croft-b" and stale[0] <= t < stale[1]:
                frozen = frozen or body
                body = frozen
            scrapes.append(CollectorScrape(collector, now, body))
        pods = tuple(PodView(name, (cid,) if since <= t else ()) for name, cid, since in sim.pods)
        deployment = DeploymentView("croft-exp", "webapp", replicas, CPU_LIMIT_CORES)
        observations = Observations(now, pods, tuple(scrapes))
        polls.append(RecordedPoll(deployment, observations))
        decision = desired_replicas(observations, deployment, config, history)
        history = decision.history
        if decision.replicas != replicas:
            replicas = decision.replicas
            sim.resize(replicas, t)
    meta: dict[str, object] = {
        "synthetic": True,
        "made_by": "scripts/make-scale-fixtures.py",
        "seed": SEED,
        "start_ms": START_MS,
        "burst_onset_ms": START_MS + onset,
        "burst_end_ms": START_MS + burst_end,
        "phases_ms_rps": [list(p) for p in PHASES],
        "calls_per_request": CALLS_PER_REQUEST,
        "cpu_per_request_ms": CPU_PER_REQUEST_MS,
        "cpu_limit": CPU_LIMIT,
        "pod_start_ms": POD_START_MS,
        "offered_rps": [[START_MS + t, offered_rps(t)] for t in range(0, total, 1000)],
    }
    if outage:
        meta["collector_down_ms"] = [START_MS + down[0], START_MS + down[1]]
        meta["collector_stale_ms"] = [START_MS + stale[0], START_MS + stale[1]]
    return polls, meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("fixtures/scale"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    for name, outage in (("burst", False), ("outage", True)):
        polls, meta = simulate(outage)
        (out / f"{name}.jsonl").write_text("".join(encode_poll(p) + "\n" for p in polls), encoding="utf-8")
        (out / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        print(f"{out / name}.jsonl: {len(polls)} polls")


if __name__ == "__main__":
    main()
