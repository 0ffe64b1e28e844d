"""Whether the collector is healthy, as `/healthz` answers it: a pure function of when the newest
poll was published and the monotonic clock now.

A poll is *current* while it is younger than `STALE_AFTER_POLLS` poll intervals: one slow poll on a
loaded node (or a scrape that lands just before a poll ends) does not flip readiness, but a
collector whose loop has stopped or hangs is reported within 10 s.
"""

from __future__ import annotations

import attrs

from croft.domain.metrics.names import COLLECTOR_POLL_S

STALE_AFTER_POLLS = 5
STALE_AFTER_NS = int(STALE_AFTER_POLLS * COLLECTOR_POLL_S * 1e9)


@attrs.frozen
class HealthAnswer:
    """What /healthz says: 200 while polls are current, 503 otherwise, and one line why."""

    status: int
    text: str


def health(last_poll_ns: int | None, now_ns: int, stale_after_ns: int = STALE_AFTER_NS) -> HealthAnswer:
    """200 when the newest poll was published less than `stale_after_ns` ago (both monotonic ns),
    503 before the first poll and once the newest is stale."""
    if last_poll_ns is None:
        return HealthAnswer(503, "no poll yet: the collector is starting")
    age_s = max(now_ns - last_poll_ns, 0) / 1e9
    limit_s = stale_after_ns / 1e9
    if now_ns - last_poll_ns < stale_after_ns:
        return HealthAnswer(200, f"ok: last poll {age_s:.1f} s ago")
    return HealthAnswer(503, f"stale: last poll {age_s:.1f} s ago, more than {limit_s:g} s")
