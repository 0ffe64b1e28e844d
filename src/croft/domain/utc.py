"""UTC times as croft writes them: the one place a unix-ms instant becomes text and back.

The calendar is `datetime`'s (pure arithmetic on a given instant; reading the clock stays banned
in the domain). Every formatter clamps to 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z, the
instants all four spellings can write.
"""

from __future__ import annotations

import datetime as dt
import re

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last instant a stamp can spell
_ONE_MS = dt.timedelta(milliseconds=1)


def moment(unix_ms: int) -> dt.datetime:
    """`unix_ms` (clamped to years 1970..9999) as an aware UTC datetime, exactly (no float)."""
    return EPOCH + min(max(unix_ms, 0), MAX_MS) * _ONE_MS


def stamp(unix_ms: int) -> str:
    """`%Y%m%dT%H%M%SZ` to the second, as in the dataset's segment names."""
    t = moment(unix_ms)
    return f"{t.year:04d}{t.month:02d}{t.day:02d}T{t.hour:02d}{t.minute:02d}{t.second:02d}Z"


_STAMP = re.compile(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z")


def parse_stamp(text: str) -> int | None:
    """The unix ms of a `%Y%m%dT%H%M%SZ` stamp, or None when it is not a real UTC second from 1970 on
    (31 February, 24:00:00, 1969)."""
    match = _STAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups())
    try:
        t = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
    except ValueError:
        return None
    unix_ms = (t - EPOCH) // _ONE_MS
    return unix_ms if unix_ms >= 0 else None


def iso_ms(unix_ms: int) -> str:
    """ISO 8601 with milliseconds and `Z`: `2026-10-20T13:00:00.123Z` (croft scale's log, runs)."""
    return moment(unix_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rfc3339(unix_ms: int | None) -> str | None:
    """`unix_ms` as RFC 3339 in UTC, to the millisecond (`2026-10-20T13:00:00.123Z`), beside the unix
    milliseconds of croft's JSON outputs for the person reading them; None stays None."""
    return None if unix_ms is None else iso_ms(unix_ms)


def readable(unix_ms: int, *, ms: bool = False) -> str:
    """`2026-10-20 13:00:00 UTC`, or with `ms` `2026-10-20 13:00:00.123 UTC` (top, stats)."""
    text = moment(unix_ms).isoformat(sep=" ", timespec="milliseconds" if ms else "seconds")
    return text.replace("+00:00", "") + " UTC"
