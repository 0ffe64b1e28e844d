"""Option types shared by several commands, with the env variables and defaults of docs/commands.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

DEFAULT_DATASET = Path("/var/lib/croft/croft-dataset.jsonl")

DatasetOpt = Annotated[
    Path,
    Parameter(
        name="--dataset",
        env_var="DATASET_PATH",
        help="the dataset: a file, a dataset directory or a directory of per-node directories",
    ),
]


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
