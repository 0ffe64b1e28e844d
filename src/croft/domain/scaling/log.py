"""croft scale's decision log: one line per poll, as logfmt (the default) or JSON.

logfmt: `key=value` pairs, a value quoted (`"..."`, with `\\` and `"` escaped) when it holds a space,
a quote, an `=` or is empty, so that logfmt parsers (Loki, humanlog, go-logfmt) read every field:

    ts=2026-10-20T13:00:02.000Z estimate_rps=75.00+ desired=6 replicas=1->6 decision=up
    reason=scale-up detail="2 polls in a row asked for more than 1 (a lower bound: ...)"

(one line in the log).

`backlog_requests` (requests queued in the pods) follows `replicas=` when the estimate measured a
backlog above 0. `estimate_rps` ends in `+` when the estimate is a lower bound (data was incomplete:
a collector did not answer, was stale, or served a value that is not a rate ≥ 0); such a poll never
scales down.
JSON: one object per line with the same facts, numbers as numbers and `lower_bound` as a boolean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

from croft.domain.scaling.decision import Decision

LogFormat = Literal["logfmt", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("logfmt", "json")
_BARE = re.compile(r'[^\s"=\\]+')

Fields = Mapping[str, str | int | float | bool | None]


def quote(value: str) -> str:
    """`value` as a logfmt value: bare when it can be, else double-quoted with `\\`, `"` and control
    characters escaped."""
    if _BARE.fullmatch(value) and value.isprintable():
        return value
    return json.dumps(value, ensure_ascii=False)


def decision_fields(decision: Decision) -> dict[str, str | int | float | bool | None]:
    """The facts of one poll's decision, for either format."""
    estimate = decision.estimate
    backlog: dict[str, str | int | float | bool | None] = {}
    if estimate is not None and estimate.backlog_requests > 0:  # only signals that measure a backlog
        backlog["backlog_requests"] = round(estimate.backlog_requests, 1)
    return {
        "estimate_rps": None if estimate is None else round(estimate.request_rate, 2),
        "lower_bound": estimate is not None and not estimate.complete,
        **backlog,
        "desired": decision.desired,
        "replicas_from": decision.current,
        "replicas_to": decision.replicas,
        "decision": decision.action,
        "reason": decision.reason.code,
        "detail": decision.reason.detail,
    }


def hold_fields(reason: str, detail: str) -> dict[str, str | int | float | bool | None]:
    """A poll that decided nothing (the API did not answer, refused, or a patch failed)."""
    return {"decision": "hold", "reason": reason, "detail": detail}


def log_line(decision: Decision) -> str:
    """The one line per poll as logfmt, without its time: estimate, desired, decision and reason."""
    return logfmt(decision_fields(decision))


def render(ts: str, fields: Fields, log_format: LogFormat = "logfmt") -> str:
    """One log line at `ts` (ISO 8601 UTC) of `fields` in `log_format`."""
    if log_format == "json":
        return json.dumps({"ts": ts, **fields}, ensure_ascii=False, allow_nan=False)
    return f"ts={quote(ts)} {logfmt(fields)}"


def logfmt(fields: Fields) -> str:
    """`fields` as logfmt; the estimate with its `+` and the replicas as `from->to`."""
    parts = []
    if "estimate_rps" in fields:
        rate = fields["estimate_rps"]
        bound = "+" if fields.get("lower_bound") else ""
        parts.append(f"estimate_rps={'-' if rate is None else f'{rate:.2f}'}{bound}")
        desired = fields.get("desired")
        parts.append(f"desired={'-' if desired is None else desired}")
        parts.append(f"replicas={fields['replicas_from']}->{fields['replicas_to']}")
    skip = {"estimate_rps", "lower_bound", "desired", "replicas_from", "replicas_to"}
    for key, value in fields.items():
        if key in skip or value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"{key}={quote(text)}")
    return " ".join(parts)
