"""A command's plain options read without cyclopts, so that `croft collect` starts in what Python
itself needs: importing and building the cyclopts app costs more than a 275 MB copy's network time
on a local collector (benchmarks/collect.py).

`parse(function, tokens)` understands only what it can read exactly as cyclopts does: `--name VALUE`
and `--name=VALUE` for keyword-only parameters whose annotation is one of `str`, `int`, `float`,
`Path`, `Path | None` and `tuple[str, ...]` (repeatable), with help from the docstring rather than
`Annotated[..., Parameter(...)]`. Anything else (`--help`, an unknown or repeated option, a value
that starts with `-`, a number in any but the plainest form, an empty value) answers None: the
caller then hands the tokens to the cyclopts app, which runs them or words the error. A test
checks, for generated tokens, that every answer equals the cyclopts app's own reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# annotation (as the string `from __future__ import annotations` keeps) -> converter
_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "Path": Path,
    "Path | None": Path,
    "tuple[str, ...]": str,
}
_DIGITS = frozenset("0123456789")


def parse(function: Callable[..., Any], tokens: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments `tokens` give `function`, or None when cyclopts must read them."""
    annotations: dict[str, Any] = getattr(function, "__annotations__", {})
    defaults: dict[str, Any] = getattr(function, "__kwdefaults__", None) or {}
    given: dict[str, Any] = {}
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if not token.startswith("--"):
            return None
        name, equals, value = token[2:].partition("=")
        if not equals:
            if at + 1 == len(tokens):
                return None
            value = tokens[at + 1]
            at += 1
        at += 1
        parameter = name.replace("-", "_")
        annotation = annotations.get(parameter)
        if (
            "_" in name
            or parameter not in defaults
            or not isinstance(annotation, str)
            or annotation not in _CONVERTERS
            or not value
            or value.startswith("-")
            or not _plain(annotation, value)
        ):
            return None
        converted = _CONVERTERS[annotation](value)
        if annotation == "tuple[str, ...]":
            given[parameter] = (*given.get(parameter, ()), converted)
        elif parameter in given:
            return None
        else:
            given[parameter] = converted
    return given


def _plain(annotation: str, value: str) -> bool:
    """Whether `value` reads the same in Python's constructor as in cyclopts' converter."""
    if annotation == "int":
        return set(value) <= _DIGITS and (value == "0" or value[0] != "0") and len(value) < 19
    if annotation == "float":
        whole, _, fraction = value.partition(".")
        return (
            bool(whole)
            and set(whole) <= _DIGITS
            and set(fraction) <= _DIGITS
            and (whole == "0" or whole[0] != "0")
            and len(value) < 19
        )
    if annotation == "Path | None":
        return value.lower() not in ("none", "null")
    return True
