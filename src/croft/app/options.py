"""Option types shared by several commands, with the env variables and defaults of docs/commands.md,
and the checks of option values that cyclopts' types do not make."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import Parameter

if TYPE_CHECKING:
    from cyclopts import Token

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


def whole_number(unit: str, high: int, low: int = 1) -> Callable[[Any, Sequence[Token]], int]:
    """A cyclopts converter for an option that takes a whole number of `unit` in [low, high]: the
    digits 0-9 and nothing else (Python's int() would also take 0x10, 1_000, +5, spaces and other
    scripts' digits, `٣`). Anything else, from the command line or the option's env variable, is a
    `UserError` naming the option (or the variable), its range and what was given."""

    def convert(_: Any, tokens: Sequence[Token]) -> int:
        from croft.errors import UserError

        token = tokens[-1]
        text = token.value
        if text.isascii() and text.isdigit() and len(text) <= len(str(high)) and low <= int(text) <= high:
            return int(text)
        raise UserError(
            f"{token.keyword or 'the value'} must be a whole number of {unit} from {low} to {high}, "
            f"written in the digits 0-9, got {text!r}"
        )

    return convert


SECONDS_MAX = 36_525 * 86_400  # a century: every interval croft takes stays within it
BYTES_MAX = 2**63 - 1  # the largest file size (off_t)


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


def dataset_path(type_: object, tokens: Sequence[Token]) -> Path:
    """The dataset path of a token (the command line or DATASET_PATH): see `dataset_text`."""
    token = tokens[-1]
    return dataset_text(token.value, from_environment=token.source == "env", option=token.keyword)


def dataset_text(text: str, *, from_environment: bool = False, option: str | None = None) -> Path:
    """`text` as the dataset's path; an empty one is a `UserError` naming where it came from, never
    `.` (Path("") is the current directory)."""
    from croft.errors import UserError

    if text.strip():
        return Path(text)
    if from_environment:
        where, fix = f"{DATASET_ENV} is set but empty", " or unset it"
    else:
        where, fix = f"{option or 'the dataset path'} is empty", ""
    raise UserError(
        f"{where}; give a dataset (a file, a dataset directory or a directory of per-node directories){fix}"
    )


DATASET_ENV = "DATASET_PATH"
DatasetOpt = Annotated[
    Path,
    Parameter(
        name="--dataset",
        env_var=DATASET_ENV,
        converter=dataset_path,
        help="the dataset: a file, a dataset directory or a directory of per-node directories",
    ),
]
"""The dataset, the same way in every command: every reader (stats, profile, top, index, export)
takes it as its positional PATH or as --dataset PATH, both ways of one parameter (it stands
before the `*` of their signatures); croft run, which writes it, takes --dataset only. Both fall
back on DATASET_PATH, then on `DEFAULT_DATASET`."""


def dataset_from_environment() -> Path:
    """The dataset a reader uses when the command line names none: DATASET_PATH, else the default."""
    import os

    text = os.environ.get(DATASET_ENV)
    return DEFAULT_DATASET if text is None else Path(text)


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
