"""The open-loop load generator (asyncio + httpx): requests leave on the profile's schedule whatever
the answers, so a slow server gets a growing backlog, not fewer requests.

Each request is a task started at its scheduled time (croft.runs.load.send_times); its latency is
measured from the scheduled time, so a client that fell behind shows as latency too. A request
without an answer after `timeout_s` is a timeout; an error status or a failed connection is a
failure. Rows per second (croft.runs.load.second_stats) go to workload.csv.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import httpx

from croft.runs.load import Outcome, RequestOutcome, SecondStats, second_stats, send_times
from croft.runs.rundir import write_workload
from profiles import Profile

PROGRESS_EVERY_S = 30


@attrs.frozen
class Target:
    """Where requests go: `base_url` + each of `paths` in turn."""

    base_url: str
    paths: tuple[str, ...] = ("/",)
    timeout_s: float = 10.0
    keepalive: bool = True

    def urls(self) -> itertools.cycle[str]:
        base = self.base_url.rstrip("/")
        return itertools.cycle(f"{base}{p if p.startswith('/') else '/' + p}" for p in self.paths)


@attrs.frozen
class LoadResult:
    start_unix_s: float
    end_unix_s: float
    rows: tuple[SecondStats, ...]


async def _one(
    client: httpx.AsyncClient,
    url: str,
    scheduled_s: float,
    t0: float,
    timeout_s: float,
    out: list[RequestOutcome],
) -> None:
    loop = asyncio.get_running_loop()
    sent_s = loop.time() - t0
    outcome: Outcome = "ok"
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.get(url)
            await response.aread()
        if response.status_code >= 400:
            outcome = "failed"
    except TimeoutError:
        outcome = "timeout"
    except (httpx.HTTPError, OSError):
        outcome = "failed"
    latency = loop.time() - t0 - scheduled_s
    out.append(RequestOutcome(scheduled_s, sent_s, latency, outcome))


async def run_profile(
    profile: Profile, target: Target, progress: Callable[[str], None] | None = None
) -> tuple[float, list[RequestOutcome]]:
    """Send `profile` to `target`; returns the load's start (unix s) and every request's outcome."""
    schedule = send_times(profile.rate_at, profile.duration_s)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None if target.keepalive else 0)
    outcomes: list[RequestOutcome] = []
    urls = target.urls()
    async with httpx.AsyncClient(limits=limits, timeout=None) as client:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        start_unix = time.time()
        tasks: set[asyncio.Task[None]] = set()
        next_report = PROGRESS_EVERY_S
        for scheduled in schedule:
            delay = t0 + scheduled - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(_one(client, next(urls), scheduled, t0, target.timeout_s, outcomes))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if progress is not None and scheduled >= next_report:
                done = [o for o in outcomes if o.scheduled_s >= scheduled - PROGRESS_EVERY_S]
                bad = sum(o.outcome != "ok" for o in done)
                progress(
                    f"t={scheduled:.0f}s rate={profile.rate_at(scheduled):.1f}/s "
                    f"in-flight={len(tasks)} not-ok={bad}"
                )
                next_report += PROGRESS_EVERY_S
        left = t0 + profile.duration_s - loop.time()
        if left > 0:
            await asyncio.sleep(left)
        if tasks:
            await asyncio.gather(*tasks)
    return start_unix, outcomes


def run_open_loop(
    profile: Profile, target: Target, workload_csv: Path | None = None, quiet: bool = False
) -> LoadResult:
    """Run the profile to the end (plus the stragglers' timeout); write workload.csv if asked."""

    def say(line: str) -> None:
        print(f"load: {line}", file=sys.stderr, flush=True)

    start, outcomes = asyncio.run(run_profile(profile, target, None if quiet else say))
    rows = tuple(second_stats(outcomes, profile.duration_s, start))
    if workload_csv is not None:
        write_workload(workload_csv, rows)
    return LoadResult(start, start + profile.duration_s, rows)


class NotAnswering(RuntimeError):
    """Nothing answered at the target's first URL in time; the message says where and what failed."""


def wait_answering(target: Target, timeout_s: float, every_s: float = 0.5) -> float:
    """Ask the target's first URL until an HTTP answer comes back (any status: a server took the
    connection and spoke HTTP); returns the seconds waited. A Deployment's pods going Ready is not
    enough: kube-proxy writes a Service's rules after the endpoints change, and until then every
    connection to its ClusterIP is refused, so a run started then fails every request."""
    url = next(target.urls())
    start = time.monotonic()
    deadline = start + timeout_s
    while True:
        try:
            httpx.get(url, timeout=min(5.0, max(timeout_s, 0.1)))
            return time.monotonic() - start
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if time.monotonic() + every_s > deadline:
            raise NotAnswering(
                f"{url} gave no HTTP answer within {timeout_s:.0f} s (last try: {last}); check that "
                "the Service has Ready endpoints and that kube-proxy (or the host) routes to them"
            )
        time.sleep(every_s)


def summary(rows: Sequence[SecondStats]) -> str:
    sent = sum(r.achieved_rps for r in rows)
    target = sum(r.target_rps for r in rows)
    bad = sum(r.failures + r.timeouts for r in rows)
    worst = max((r.p95_ms for r in rows if r.p95_ms is not None), default=0.0)
    return f"{sent} of {target} requests sent, {bad} failed or timed out, worst p95 {worst:.0f} ms"
