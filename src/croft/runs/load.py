"""Open-loop load: the send schedule of a rate profile and the per-second statistics of its answers.

Shared by the experiment harness's load generator and the simulator, so that a real run and a
simulated one are scheduled and summarised by the same code.

- `send_times(rate_at, duration_s)`: request k is sent when the integral of the rate reaches k + 1/2,
  so a constant r RPS sends exactly r requests in each whole second, evenly spaced. The schedule
  never depends on answers (open loop): a slow server gets a growing backlog, not fewer requests.
- `second_stats(outcomes, ...)`: one row per second of *scheduled send time*. Latency is measured
  from the scheduled send time (not from when the client got round to it), so client-side delay
  shows too; a request that timed out counts at the timeout (a lower bound of its latency).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import attrs

Outcome = Literal["ok", "failed", "timeout"]
INTEGRATION_STEP_S = 0.01


def send_times(rate_at: Callable[[float], float], duration_s: float) -> list[float]:
    """Scheduled send times in seconds from the start, ascending, all in [0, duration_s).
    `rate_at(t)` is the offered rate (requests/s, >= 0) at `t` seconds; it is integrated with the
    midpoint rule in 10 ms steps."""
    times: list[float] = []
    steps = math.ceil(duration_s / INTEGRATION_STEP_S)
    total = 0.0
    due = 0.5
    for i in range(steps):
        t0 = i * INTEGRATION_STEP_S
        h = min(INTEGRATION_STEP_S, duration_s - t0)
        if h <= 0:
            break
        added = max(rate_at(t0 + h / 2), 0.0) * h
        while added > 0 and total + added >= due:
            times.append(t0 + h * (due - total) / added)
            due += 1.0
        total += added
    return times


@attrs.frozen
class RequestOutcome:
    """One request: scheduled at `scheduled_s`, dispatched at `sent_s` (both seconds from the load's
    start), its `latency_s` from the scheduled time (the timeout for a timeout) and what came back."""

    scheduled_s: float
    sent_s: float
    latency_s: float
    outcome: Outcome


@attrs.frozen
class SecondStats:
    """One row of workload.csv: second `second` since the load started (at `unix_s`), the requests
    scheduled (`target_rps`) and dispatched (`achieved_rps`) in it, how many were answered without
    error (`ok`), latency percentiles in ms (None when nothing was sent), failures (an error answer
    or no connection) and timeouts."""

    second: int
    unix_s: float
    target_rps: int
    achieved_rps: int
    ok: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    failures: int
    timeouts: int


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank `q` percentile (0 < q <= 100) of `ordered`, ascending and non-empty."""
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def second_stats(
    outcomes: Iterable[RequestOutcome], duration_s: float, start_unix_s: float
) -> list[SecondStats]:
    """One `SecondStats` per whole second of [0, duration_s), empty seconds included."""
    seconds = max(math.ceil(duration_s - 1e-9), 0)
    scheduled = [0] * seconds
    dispatched = [0] * seconds
    ok = [0] * seconds
    failures = [0] * seconds
    timeouts = [0] * seconds
    latencies: list[list[float]] = [[] for _ in range(seconds)]
    for item in outcomes:
        s = min(int(item.scheduled_s), seconds - 1)
        if s < 0:
            continue
        scheduled[s] += 1
        sent = min(max(int(item.sent_s), 0), seconds - 1)
        dispatched[sent] += 1
        latencies[s].append(item.latency_s)
        ok[s] += item.outcome == "ok"
        failures[s] += item.outcome == "failed"
        timeouts[s] += item.outcome == "timeout"
    rows = []
    for s in range(seconds):
        ordered = sorted(latencies[s])
        p50, p95, p99 = (
            (round(percentile(ordered, q) * 1000, 3) for q in (50, 95, 99)) if ordered else (None,) * 3
        )
        rows.append(
            SecondStats(
                s,
                round(start_unix_s + s, 3),
                scheduled[s],
                dispatched[s],
                ok[s],
                p50,
                p95,
                p99,
                failures[s],
                timeouts[s],
            )
        )
    return rows
