"""Checks of option values that cyclopts' types do not make (kept apart from croft.app.options,
which imports cyclopts: `croft collect` starts without it)."""

from __future__ import annotations


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
