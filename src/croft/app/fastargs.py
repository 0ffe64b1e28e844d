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

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# annotation (as the string `from __future__ import annotations` keeps) -> converter
_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "Path": Path,
    "Path | None": Path,
    "str | None": str,
    "int | None": int,
    "tuple[str, ...]": str,
}
_DIGITS = frozenset("0123456789")


def parse(function: Callable[..., Any], tokens: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments `tokens` give `function`, or None when cyclopts must read them."""
    return parse_spec(spec_of(function), tokens, {})


def spec_of(function: Callable[..., Any]) -> Spec:
    """The `Spec` of `function`'s keyword-only parameters whose annotation `parse` reads."""
    annotations: dict[str, Any] = getattr(function, "__annotations__", {})
    defaults: dict[str, Any] = getattr(function, "__kwdefaults__", None) or {}
    return Spec(
        options={
            "--" + parameter.replace("_", "-"): (parameter, annotation)
            for parameter, annotation in annotations.items()
            if parameter in defaults and isinstance(annotation, str) and annotation in _CONVERTERS
        }
    )


def _plain(annotation: str, value: str) -> bool:
    """Whether `value` reads the same in Python's constructor as in cyclopts' converter."""
    if annotation in ("int", "int | None"):
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
    if annotation in ("Path | None", "str | None"):
        return value.lower() not in ("none", "null")
    return True


class Spec:
    """A command's options as cyclopts reads them, for `parse_spec`: `options` maps an option's name
    (`--from-ms`) to its parameter and annotation (one of `parse`'s; `tuple[str, ...]` repeats),
    `flags` an option without a value (a `bool`, `negative=()`) to its parameter, `positional` names
    the parameter and annotation of the one positional argument, `env` a parameter to the variable it
    defaults from. `spec_of` derives one from a signature; the fastargs tests check each command's
    reading against its cyclopts signature."""

    def __init__(
        self,
        options: dict[str, tuple[str, str]],
        flags: dict[str, str] | None = None,
        positional: tuple[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.options = options
        self.flags = flags or {}
        self.positional = positional
        self.env = env or {}


def parse_spec(spec: Spec, tokens: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The arguments `tokens` (and `environ`, for a parameter with an env variable) give the command
    of `spec`, as cyclopts binds them; None when cyclopts must read them."""
    given: dict[str, Any] = {}
    at = 0
    while at < len(tokens):
        token = tokens[at]
        at += 1
        if not token.startswith("-"):
            if spec.positional is None or spec.positional[0] in given:
                return None
            parameter, annotation = spec.positional
            value = token
        elif token in spec.flags:
            parameter = spec.flags[token]
            if parameter in given:
                return None
            given[parameter] = True
            continue
        else:
            name, equals, value = token.partition("=")
            if name not in spec.options:
                return None
            if not equals:
                if at == len(tokens):
                    return None
                value = tokens[at]
                at += 1
            parameter, annotation = spec.options[name]
        repeatable = annotation == "tuple[str, ...]"
        if (
            (parameter in given and not repeatable)
            or not value
            or value.startswith("-")
            or annotation not in _CONVERTERS
            or not _plain(annotation, value)
        ):
            return None
        converted = _CONVERTERS[annotation](value)
        given[parameter] = (*given.get(parameter, ()), converted) if repeatable else converted
    for parameter, variable in spec.env.items():
        if parameter not in given and variable in environ:
            value = environ[variable]
            annotation = _annotation_of(spec, parameter)
            if not value or value.startswith("-") or not _plain(annotation, value):
                return None
            given[parameter] = _CONVERTERS[annotation](value)
    return given


def _annotation_of(spec: Spec, parameter: str) -> str:
    if spec.positional is not None and spec.positional[0] == parameter:
        return spec.positional[1]
    return next(annotation for name, annotation in spec.options.values() if name == parameter)
