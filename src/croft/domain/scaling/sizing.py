"""How many replicas an offered load and a backlog ask for, in one step.

With the offered request rate known (requests/s arriving, not only those answered), the replicas a
burst needs are known at once: `rate × CPU per request ÷ (CPU limit × target)`. Requests already
queued when the scale-up is decided (the listen and receive queues of the pods, counted in requests)
are work on top of that rate: draining `backlog` requests within `drain_s` seconds takes
`backlog ÷ drain_s` requests/s more, served at the full CPU limit (draining is temporary; the target's
headroom is for the steady rate). So

    need = rate × cpu ÷ (limit × target) + backlog × cpu ÷ (drain_s × limit)

replicas, rounded up once and clamped to [1, max_replicas]. Nothing here knows which signal measured
the rate or the backlog: `croft scale --signal` only changes how the estimate is read.
"""

from __future__ import annotations

import math

DRAIN_S = 60.0
"""The default `--drain-secs`. The backlog keeps growing after a scale-up until the new pods are
Ready, and every replica asked for to drain it is kept for the whole stabilization window (300 s,
the HPA's): a short drain turns that growth into a second scale-up and buys little, since a
request queued in a pod waits for that pod alone. On the simulated webapp burst (5 -> 75 req/s, 10
seeds, the offered-load signal) a 30 s drain scaled up a second time (6 -> 7) in 6 of 10 runs, for
55.7 s above the 500 ms p95 objective and 2163 replica-seconds; 60 s scaled once (1 -> 6) in all
10, for 61.6 s and 1990 replica-seconds (10 s: 46.5 s, 2517; 120 s: as 60 s). At 60 s a backlog
of a minute of one pod's work asks for one replica more."""


def replica_need(
    request_rate: float,
    backlog_requests: float,
    cpu_per_request_ms: float,
    cpu_limit_cores: float,
    target: float,
    drain_s: float,
) -> float:
    """The replicas (a real number, not yet rounded) that serve `request_rate` (requests/s) at
    `target` of `cpu_limit_cores` each and drain `backlog_requests` within `drain_s` seconds at the
    full limit. A negative rate or backlog counts as 0; NaN stays NaN (the caller clamps it)."""
    cpu_s = cpu_per_request_ms / 1000
    steady = max(request_rate, 0.0) * cpu_s / (cpu_limit_cores * target)
    drain = max(backlog_requests, 0.0) * cpu_s / (drain_s * cpu_limit_cores)
    return steady + drain


def clamp_replicas(need: float, max_replicas: int) -> int:
    """`need` rounded up into [1, max_replicas]; a need beyond any float (absurd rates), NaN or +Inf
    is max_replicas. A need of exactly n stays n despite float noise (2.0000000000000004 is 2)."""
    if not need < max_replicas:
        return max_replicas
    return min(max(math.ceil(need - 1e-9), 1), max_replicas)
