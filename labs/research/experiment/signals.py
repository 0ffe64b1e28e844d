"""Which signal of offered load keeps rising once a pod saturates: step one pod's
open-loop load past its capacity while reading the collector's /metrics at every poll, then print,
for each candidate, its value per offered request before and after saturation, its noise at steady
load and its delay after the onset (croft.runs.signals says how each is computed).

    python signals.py --target http://10.96.0.20:8080 --metrics http://10.244.31.7:9464/metrics \\
        --container-id 3f2a... --steps 5:40,10:30,15:30,25:40,40:40 [--settle-secs 8] [--json out.json]

`--steps` are rate:seconds pairs, held in turn. Requests go as the harness's load generator sends
them (loadgen.py: open loop, HTTP/1.1 keep-alive, a new connection whenever every open one is busy).
`--container-id` (a prefix is enough) or `--cgroup` picks the series of the pod's container. The
candidates: the syscall rates of `sendto` (replies: croft scale's default) and `recvfrom` (read
calls, a control), every `croft_container_ingress_rate{signal}`, and the queues
`croft_container_listen_backlog` and `croft_container_unread_bytes` (levels, not rates: their
ratios are per offered request/s).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import httpx

import loadgen
from croft.domain.metrics import names as metric_names
from croft.domain.metrics import parse_exposition
from croft.runs.load import RequestOutcome, second_stats
from croft.runs.signals import PollRecord, Step, figures, table
from profiles import Profile

SYSCALLS = ("sendto", "recvfrom")
CANDIDATES: tuple[str, ...] = (
    *(f"syscall:{s}" for s in SYSCALLS),
    *(f"ingress:{s}" for s in metric_names.INGRESS_SIGNALS),
    "listen_backlog",
    "unread_bytes",
)
SCRAPE_EVERY_S = 0.5


def parse_steps(text: str) -> tuple[Step, ...]:
    """`5:40,10:30` -> steps of 5 RPS for 40 s, then 10 RPS for 30 s."""
    steps: list[Step] = []
    start = 0.0
    for part in text.split(","):
        rate, _, seconds = part.partition(":")
        try:
            rps, duration = float(rate), float(seconds)
        except ValueError:
            raise SystemExit(f"--steps {part!r} is not rate:seconds, e.g. 5:40") from None
        if rps < 0 or duration <= 0:
            raise SystemExit(f"--steps {part!r} needs a rate >= 0 and seconds > 0")
        steps.append(Step(start, start + duration, rps))
        start += duration
    return tuple(steps)


def profile_of(steps: Sequence[Step]) -> Profile:
    points: list[tuple[float, float]] = []
    for step in steps:
        points += [(step.start_s, step.offered_rps), (step.end_s, step.offered_rps)]
    return Profile("steps", tuple(points))


@attrs.frozen
class Pick:
    """Which series are the pod's: by container id prefix, or by cgroup."""

    container_id: str = ""
    cgroup: str = ""

    def __call__(self, labels: dict[str, str]) -> bool:
        if self.container_id:
            return labels.get(metric_names.LABEL_CONTAINER_ID, "").startswith(self.container_id)
        return labels.get(metric_names.LABEL_CGROUP) == self.cgroup


def values_of(body: str, pick: Pick) -> tuple[float | None, dict[str, float]]:
    """The collector's newest poll time (unix s) and every candidate's value in `body`."""
    wanted = (
        metric_names.CONTAINER_SYSCALL_RATE,
        metric_names.CONTAINER_INGRESS_RATE,
        metric_names.CONTAINER_LISTEN_BACKLOG,
        metric_names.CONTAINER_UNREAD_BYTES,
        metric_names.LAST_POLL_TIMESTAMP_SECONDS,
    )
    last: float | None = None
    values: dict[str, float] = {}
    for sample in parse_exposition(body):
        if sample.name not in wanted:
            continue
        if sample.name == metric_names.LAST_POLL_TIMESTAMP_SECONDS:
            last = sample.value
            continue
        labels = dict(sample.labels)
        if not pick(labels):
            continue
        if sample.name == metric_names.CONTAINER_SYSCALL_RATE:
            syscall = labels.get(metric_names.LABEL_SYSCALL, "")
            if syscall in SYSCALLS:
                values[f"syscall:{syscall}"] = values.get(f"syscall:{syscall}", 0.0) + sample.value
        elif sample.name == metric_names.CONTAINER_INGRESS_RATE:
            values[f"ingress:{labels.get(metric_names.LABEL_SIGNAL, '')}"] = sample.value
        elif sample.name == metric_names.CONTAINER_LISTEN_BACKLOG:
            values["listen_backlog"] = sample.value
        else:
            values["unread_bytes"] = sample.value
    if values:
        for syscall in SYSCALLS:  # a container with series but no calls of one made none
            values.setdefault(f"syscall:{syscall}", 0.0)
    return last, values


async def scrape(url: str, pick: Pick, until_unix_s: float) -> list[tuple[float, dict[str, float]]]:
    """(collector poll time, values) of every new poll until `until_unix_s`."""
    seen: dict[float, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.time() < until_unix_s:
            try:
                response = await client.get(url)
                last, values = values_of(response.text, pick)
                if last is not None and values and last not in seen:
                    seen[last] = values
            except httpx.HTTPError as exc:
                print(f"signals: /metrics: {exc}", file=sys.stderr)
            await asyncio.sleep(SCRAPE_EVERY_S)
    return sorted(seen.items())


def records(
    polls: Sequence[tuple[float, dict[str, float]]],
    outcomes: Sequence[RequestOutcome],
    start_unix_s: float,
    profile: Profile,
) -> list[PollRecord]:
    """Each collector poll as a `PollRecord` over the interval since the poll before it."""
    done = sorted(o.scheduled_s + o.latency_s for o in outcomes if o.outcome == "ok")
    dispatched = sorted(o.sent_s for o in outcomes)
    out: list[PollRecord] = []
    for (before, _), (at, values) in itertools.pairwise(polls):
        t0, t1 = before - start_unix_s, at - start_unix_s
        interval = t1 - t0
        if interval <= 0:
            continue
        served = sum(1 for d in done if t0 < d <= t1) / interval
        sent = sum(1 for d in dispatched if t0 < d <= t1) / interval
        offered = profile.rate_at((t0 + t1) / 2)
        out.append(PollRecord(t_s=t1, offered_rps=offered, served_rps=served, values=values, sent_rps=sent))
    return out


async def measure(
    target: loadgen.Target, profile: Profile, metrics_url: str, pick: Pick
) -> tuple[float, list[RequestOutcome], list[tuple[float, dict[str, float]]]]:
    until = time.time() + profile.duration_s + 2
    scraper = asyncio.create_task(scrape(metrics_url, pick, until))
    start, outcomes = await loadgen.run_profile(
        profile, target, lambda line: print(f"load: {line}", file=sys.stderr, flush=True)
    )
    return start, outcomes, await scraper


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--target", required=True, help="the pod's (or its Service's) base URL")
    parser.add_argument("--path", default="/work")
    parser.add_argument("--metrics", required=True, help="the collector's /metrics URL")
    parser.add_argument("--container-id", default="", help="the pod's container id (a prefix will do)")
    parser.add_argument("--cgroup", default="", help="or the cgroup label of its series")
    parser.add_argument("--steps", default="5:40,10:30,15:30,25:40,40:40", help="rate:seconds,...")
    parser.add_argument(
        "--settle-secs", type=float, default=8.0, help="polls this soon after a step are left out"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="a request's timeout, s")
    parser.add_argument("--json", type=Path, help="write the polls and figures here")
    args = parser.parse_args(argv)
    if not args.container_id and not args.cgroup:
        parser.error("name the pod's series with --container-id or --cgroup")
    steps = parse_steps(args.steps)
    profile = profile_of(steps)
    pick = Pick(args.container_id, args.cgroup)
    target = loadgen.Target(args.target, (args.path,), args.timeout)
    start, outcomes, polls = asyncio.run(measure(target, profile, args.metrics, pick))
    rows = records(polls, outcomes, start, profile)
    result = figures(rows, steps, CANDIDATES, args.settle_secs)
    print(loadgen.summary(second_stats(outcomes, profile.duration_s, start)))
    print(f"polls: {len(rows)}; steps (RPS): {', '.join(f'{s.offered_rps:g}' for s in steps)}")
    print(table(result))
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "steps": [attrs.asdict(s) for s in steps],
                    "polls": [attrs.asdict(r) for r in rows],
                    "figures": [attrs.asdict(f) for f in result],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
