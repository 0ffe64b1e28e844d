"""Whether the collector is healthy, as `/healthz` answers it: a pure function of when the newest
poll was published and the monotonic clock now.

A poll is *current* while it is younger than `STALE_AFTER_POLLS` poll intervals: one slow poll on a
loaded node (or a scrape that lands just before a poll ends) does not flip readiness, but a
collector whose loop has stopped or hangs is reported within 10 s.

A collector that found its live file renamed or deleted under it (something else writes or removes
its dataset) is unhealthy for `LOST_LIVE_FILE_HOLD_NS` after it last found so, although it writes
on into a new live file: long enough for a probe or a person to see it.
"""

from __future__ import annotations

import attrs

from croft.domain.metrics.names import COLLECTOR_POLL_S

STALE_AFTER_POLLS = 5
STALE_AFTER_NS = int(STALE_AFTER_POLLS * COLLECTOR_POLL_S * 1e9)
LOST_LIVE_FILE_HOLD_NS = 300 * 1_000_000_000


@attrs.frozen
class HealthAnswer:
    """What /healthz says: 200 while polls are current, 503 otherwise, and one line why."""

    status: int
    text: str


def health(
    last_poll_ns: int | None,
    now_ns: int,
    stale_after_ns: int = STALE_AFTER_NS,
    live_file_lost_ns: int | None = None,
) -> HealthAnswer:
    """200 when the newest poll was published less than `stale_after_ns` ago (all monotonic ns),
    503 before the first poll, once the newest is stale, and for `LOST_LIVE_FILE_HOLD_NS` after
    `live_file_lost_ns` (when the live file was last found renamed or deleted)."""
    if live_file_lost_ns is not None and now_ns - live_file_lost_ns < LOST_LIVE_FILE_HOLD_NS:
        ago_s = max(now_ns - live_file_lost_ns, 0) / 1e9
        return HealthAnswer(
            503,
            f"the live file was renamed or deleted under the collector {ago_s:.0f} s ago: something "
            "else writes or removes its dataset (see its log and croft_live_files_lost_total)",
        )
    if last_poll_ns is None:
        return HealthAnswer(503, "no poll yet: the collector is starting")
    age_s = max(now_ns - last_poll_ns, 0) / 1e9
    limit_s = stale_after_ns / 1e9
    if now_ns - last_poll_ns < stale_after_ns:
        return HealthAnswer(200, f"ok: last poll {age_s:.1f} s ago")
    return HealthAnswer(503, f"stale: last poll {age_s:.1f} s ago, more than {limit_s:g} s")
