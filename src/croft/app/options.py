"""Option types shared by several commands, with the env variables and defaults of docs/commands.md,
and the checks of option values that cyclopts' types do not make."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

DEFAULT_DATASET = Path("/var/lib/croft/croft-dataset.jsonl")


def check_number(
    option: str, value: float, low: float, high: float, unit: str, *, low_open: bool = False
) -> None:
    """Raise `UserError` (one sentence naming the option and its range) unless `value` is a finite
    number in [low, high] (`(low, high]` with `low_open`). NaN and infinities never pass."""
    import math

    from croft.errors import UserError

    inside = math.isfinite(value) and (low < value if low_open else low <= value) and value <= high
    if not inside:
        bracket = "(" if low_open else "["
        raise UserError(f"{option} must be a number of {unit} in {bracket}{low:g}, {high:g}], got {value!r}")


def window(
    from_text: str | None, to_text: str | None, from_ms: int | None, to_ms: int | None, now_ms: int
) -> tuple[int | None, int | None]:
    """The window [from, to] in unix ms from --from/--to (any time `croft.domain.times` reads) or
    --from-ms/--to-ms; a `UserError` when both forms of one end are given, a time is not one, or
    the window ends before it starts."""
    from croft.domain.times import BadTime, parse_time
    from croft.errors import UserError

    ends: list[int | None] = []
    for name, text, millis in (("--from", from_text, from_ms), ("--to", to_text, to_ms)):
        if text is not None and millis is not None:
            raise UserError(f"give {name} or {name}-ms, not both")
        try:
            ends.append(parse_time(text, now_ms) if text is not None else millis)
        except BadTime as exc:
            raise UserError(f"{name} {exc}") from exc
    start, end = ends
    if start is not None and end is not None and start > end:
        first = f"--from {from_text} ({start} unix ms)" if from_text is not None else f"--from-ms {start}"
        last = f"--to {to_text} ({end} unix ms)" if to_text is not None else f"--to-ms {end}"
        raise UserError(f"{first} is after {last}; give a window that starts before it ends")
    return start, end


DatasetOpt = Annotated[
    Path,
    Parameter(
        name="--dataset",
        env_var="DATASET_PATH",
        help="the dataset: a file, a dataset directory or a directory of per-node directories",
    ),
]


FromOpt = Annotated[
    str | None,
    Parameter(
        name="--from",
        help="start of the window, inclusive: RFC 3339 (2026-10-20T14:20:00Z), relative (10m, 2h ago) "
        "or unix ms",
    ),
]
ToOpt = Annotated[
    str | None,
    Parameter(name="--to", help="end of the window, inclusive: as --from (e.g. 5m ago, now)"),
]
