"""Times as users type them, to unix milliseconds (pure: `now_ms` is an input).

Accepted, as below and kubectl users expect:
- RFC 3339 / ISO 8601: `2026-10-20T14:20:00Z`, `2026-10-20T16:20:00.250+02:00`,
  `2026-10-20 14:20:00` (no offset: UTC), `2026-10-20` (midnight UTC);
- what croft prints (`croft.domain.utc.readable`): `2026-10-20 14:20:00 UTC`,
  `2026-10-20 14:20:00.250 UTC`;
- relative to now: `10m`, `10m ago`, `90s`, `1h30m`, `2d ago`, `now`;
- unix milliseconds (13 digits or so), as `--from-ms` takes them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d|w)")
_RELATIVE = re.compile(r"(?:\d+(?:\.\d+)?\s*(?:ms|min|s|m|h|d|w)\s*)+")
EXAMPLES = (
    "e.g. 2026-10-20T14:20:00Z, 2026-10-20 14:20:00 UTC, 10m (10 minutes ago), 1h30m ago, "
    "or unix milliseconds"
)
_UTC_SUFFIX = re.compile(r"\s*(?:UTC|GMT)$", re.IGNORECASE)


class BadTime(ValueError):
    """The text is no time croft reads; the message says what it accepts."""


def duration_ms(text: str) -> int | None:
    """`text` as a duration ("10m", "1h30m", "90s", "2d"), in milliseconds; None when it is not one."""
    compact = text.strip().lower()
    if not compact or not _RELATIVE.fullmatch(compact):
        return None
    return round(sum(float(n) * _UNIT_MS[unit] for n, unit in _PART.findall(compact)))


def parse_time(text: str, now_ms: int) -> int:
    """`text` (see the module docstring) as unix milliseconds; `BadTime` otherwise."""
    given = text.strip()
    lowered = given.lower()
    if lowered == "now":
        return now_ms
    ago = lowered.removesuffix("ago").strip()
    relative = duration_ms(ago)
    if relative is not None:
        return now_ms - relative
    if given.isdigit():
        return int(given)
    named_utc = _UTC_SUFFIX.search(given)  # croft's own spelling: "2026-10-20 14:20:00 UTC"
    written = given[: named_utc.start()] if named_utc else given
    try:
        moment = datetime.fromisoformat(written.replace("z", "Z"))
    except ValueError:
        raise BadTime(f"{text!r} is not a time; give one as {EXAMPLES}") from None
    if named_utc and moment.tzinfo is not None:  # "...+02:00 UTC" says two things
        raise BadTime(f"{text!r} names two time zones; give one, as {EXAMPLES}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)
