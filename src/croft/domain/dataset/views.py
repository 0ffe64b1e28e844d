"""The dataset row as msgspec reads it: a strict schema for readers that decode millions of lines.

`croft.domain.dataset.codec` defines what a row is; this schema is generated from the same attrs
classes (`croft.domain.dataset.row`) with the codec's rules, so that it accepts exactly the lines
the codec accepts: every field of every object declared, no other key, integers within 64 bits,
finite numbers (msgspec's own rule), `unix_ms` within the calendar. It decodes about twice as fast
as the codec's orjson + cattrs and gives structs with the row's attribute names, read with `attrgetter`. The
readers use it for speed only: where a buffer fails it, each line is judged by the codec
(`croft.domain.dataset.lines`), and tests check that the two agree on every line.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, get_args, get_origin

import attrs
import msgspec

from croft.domain.dataset.row import INT_MAX, INT_MIN, UNIX_MS_MAX, UNIX_MS_MIN, Row

_INT = Annotated[int, msgspec.Meta(ge=INT_MIN, le=INT_MAX)]
_BOUNDS: dict[tuple[type, str], Any] = {
    (Row, "unix_ms"): Annotated[int, msgspec.Meta(ge=UNIX_MS_MIN, le=UNIX_MS_MAX)],
}


def _schema_type(hint: Any) -> Any:
    """The msgspec type that reads what the codec structures into `hint`."""
    if hint is int:
        return _INT
    if hint is float:
        # No bounds: msgspec's JSON decoder never yields a float that is not finite (a number beyond
        # a double, 1e400, is "out of range"; NaN and Infinity are not JSON; tested), and bounds
        # cost a check on each of the ~20 floats of a row (~5 % of its decode).
        return float
    if hint is str:
        return str
    if attrs.has(hint):
        return _struct(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return hint
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple[_schema_type(args[0]), ...]  # type: ignore[misc]
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return typing.Optional[_schema_type(inner)]  # noqa: UP045 (a runtime-built type)
    raise TypeError(f"no schema type for {hint!r}")


def _struct(cls: type) -> type[msgspec.Struct]:
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in sorted(attrs.fields(cls), key=lambda f: f.default is not attrs.NOTHING):
        kind = _BOUNDS.get((cls, field.name)) or _schema_type(hints[field.name])
        if field.default is attrs.NOTHING:
            fields.append((field.name, kind))
        else:
            fields.append((field.name, kind, field.default))
    return msgspec.defstruct(
        f"{cls.__name__}Schema", fields, forbid_unknown_fields=True, gc=False, module=__name__
    )


RowSchema = _struct(Row)
"""The struct of one row: `unix_ms`, `tgid`, `process.container_id`, ... as in `Row`."""

ROW_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(RowSchema)
