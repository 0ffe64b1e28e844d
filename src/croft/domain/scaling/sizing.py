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

DRAIN_S = 30.0
"""The default `--drain-secs`. Every replica asked for to drain the backlog is kept for the whole
stabilization window (300 s, the HPA's), and halving the drain time doubles those replicas, so a
short drain is dear in replica-seconds. At 30 s the backlog a step burst queues before its scale-up
(the webapp's 5 -> 75 req/s: about 55 req/s of excess for the 4-5 s of two confirm polls, some 250
requests of 50 ms) asks for under half a replica more than the load itself; a backlog of half a
minute of one pod's work or more asks for a whole one."""


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
