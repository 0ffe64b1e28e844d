"""The one converter that owns the dataset's JSON shape (docs/dataset.md).

On disk a row's keys come in this order: unix_ms, tgid, node, process, workload, ioctl_count,
since_last_gpu_ioctl_ms, usage, cgroup_usage, syscalls, short_lived, ingress, label, which is the
field order of `croft.domain.dataset.row`: cattrs generates both directions from those classes.
`node`, `framework`, the two GPU fields, `short_lived`, `ingress` and `label` are left out when None
(rows of collectors before `node`, `short_lived` or `ingress` have none): `framework`, the last
field of its object, and `ingress`'s two eBPF fields, its last two, by cattrs' `omit_if_default`
override; the row's six by dropping them after the generated function, because cattrs writes the
fields it may omit after all the others, and most of these stand mid-row.
Structuring is strict: a wrong type is an error, never coerced, so a reader can tell a row from a
line that only looks like one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from croft.domain.dataset.row import (
    INT_MAX,
    INT_MIN,
    UNIX_MS_MAX,
    UNIX_MS_MIN,
    WORKLOADS,
    CgroupUsage,
    Ingress,
    Process,
    Row,
    ShortLived,
    SyscallRate,
    Usage,
    Workload,
)


class NotARow(ValueError):
    """A JSON value that does not have the shape of a dataset row."""


def _strict_int(value: object, _: type) -> int:
    if type(value) is not int:
        raise NotARow(f"expected an integer, got {value!r}")
    if not INT_MIN <= value <= INT_MAX:
        raise NotARow(f"{value} is beyond a signed 64-bit integer")
    return value


def _strict_float(value: object, _: type) -> float:
    if type(value) is float:
        if not math.isfinite(value):
            raise NotARow(f"expected a finite number, got {value!r}")
        return value
    if type(value) is int:
        return float(value)
    raise NotARow(f"expected a number, got {value!r}")


def _strict_str(value: object, _: type) -> str:
    if type(value) is not str:
        raise NotARow(f"expected a string, got {value!r}")
    return value


def _workload(value: object, _: type) -> Workload:
    if value not in WORKLOADS:
        raise NotARow(f"workload must be one of {', '.join(WORKLOADS)}, got {value!r}")
    return value


def _syscalls(value: object, _: type) -> tuple[SyscallRate, ...]:
    if type(value) is not list:
        raise NotARow(f"syscalls must be a list, got {value!r}")
    return tuple(converter.structure(item, SyscallRate) for item in value)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook_func(lambda t: t == Workload, _workload)
    conv.register_structure_hook_func(lambda t: t == tuple[SyscallRate, ...], _syscalls)
    for cls in (Usage, CgroupUsage, SyscallRate, ShortLived, Ingress):
        conv.register_structure_hook(cls, make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True))
    conv.register_structure_hook(
        Process, make_dict_structure_fn(Process, conv, _cattrs_forbid_extra_keys=True)
    )
    conv.register_structure_hook(Row, make_dict_structure_fn(Row, conv, _cattrs_forbid_extra_keys=True))
    for cls in (Usage, CgroupUsage, SyscallRate, ShortLived):
        conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv))
    conv.register_unstructure_hook(
        Process, make_dict_unstructure_fn(Process, conv, framework=override(omit_if_default=True))
    )
    conv.register_unstructure_hook(
        Ingress,
        make_dict_unstructure_fn(
            Ingress,
            conv,
            tcp_data_segments_s=override(omit_if_default=True),
            tcp_connections_s=override(omit_if_default=True),
        ),
    )
    every_field = make_dict_unstructure_fn(Row, conv)

    def unstructure_row(row: Row) -> dict[str, Any]:
        out: dict[str, Any] = every_field(row)
        for key in OMITTED_WHEN_NONE:
            if out[key] is None:
                del out[key]  # the keys after it keep their order
        return out

    conv.register_unstructure_hook(Row, unstructure_row)
    return conv


OMITTED_WHEN_NONE = ("node", "ioctl_count", "since_last_gpu_ioctl_ms", "short_lived", "ingress", "label")
"""The row's fields left out of its line when None (and `process.framework`, of its object)."""

converter = _make_converter()
_unstructure_row: Callable[[Row], dict[str, Any]] = converter.get_unstructure_hook(Row)


def row_to_dict(row: Row) -> dict[str, Any]:
    """The JSON object of `row`, keys in on-disk order, empty optional fields left out."""
    return _unstructure_row(row)


def row_from_dict(value: object) -> Row:
    """A `Row` from a decoded JSON object. Raises `NotARow` naming the first thing that is wrong."""
    if type(value) is not dict:
        raise NotARow(f"a row is a JSON object, got {type(value).__name__}")
    try:
        row = converter.structure(value, Row)
    except NotARow:
        raise
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise NotARow(_first_cause(exc)) from exc
    if not UNIX_MS_MIN <= row.unix_ms <= UNIX_MS_MAX:
        raise NotARow(f"unix_ms {row.unix_ms} is outside the calendar (years 1970 to 9999)")
    return row


def _first_cause(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError) and exc.exceptions:
        return _first_cause(exc.exceptions[0])
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def encode_row(row: Row) -> bytes:
    """One dataset line: compact JSON of `row` followed by a newline."""
    return orjson.dumps(_unstructure_row(row)) + b"\n"


def decode_row(line: bytes | str) -> Row:
    """The `Row` of one dataset line. Raises `NotARow` for JSON that is not a row and
    `orjson.JSONDecodeError` (a `ValueError`) for a line that is not JSON."""
    return row_from_dict(orjson.loads(line))
