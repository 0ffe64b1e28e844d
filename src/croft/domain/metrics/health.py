"""Whether the collector is healthy, as `/healthz` (ready) and `/livez` (alive) answer it: pure
functions of when the newest poll was published and the monotonic clock now.

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

LIVE_STALE_AFTER_NS = 120 * 1_000_000_000
"""/livez fails once no poll was published for this long: the loop has stopped or hangs. Far above a
poll's interval, so that a loaded node's slow polls, a full disk (polls go on, their rows dropped)
or a found-missing live file never restart the collector; the kubelet restarts it after
`failureThreshold` more probes."""

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


def liveness(started_ns: int, last_poll_ns: int | None, now_ns: int) -> HealthAnswer:
    """200 while the collector's loop is alive: a poll published within `LIVE_STALE_AFTER_NS`, or
    none yet but started less than that ago (the first load, however long it takes up to it); 503
    once its polls have stopped (`started_ns`: when the server started; all monotonic ns)."""
    since = started_ns if last_poll_ns is None else last_poll_ns
    age_s = max(now_ns - since, 0) / 1e9
    limit_s = LIVE_STALE_AFTER_NS / 1e9
    if now_ns - since < LIVE_STALE_AFTER_NS:
        what = "no poll yet" if last_poll_ns is None else "last poll"
        return HealthAnswer(200, f"alive: {what} {age_s:.1f} s ago")
    what = "no poll since the start" if last_poll_ns is None else "last poll"
    return HealthAnswer(503, f"stopped: {what} {age_s:.0f} s ago, more than {limit_s:g} s")
