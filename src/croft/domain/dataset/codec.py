"""A row's line: msgspec writes and reads the classes of `croft.domain.dataset.row`, the one
definition of a row (docs/dataset.md).

On disk a row's keys come in the field order of `Row`: unix_ms, tgid, node, process, pod,
workload, ioctl_count, since_last_gpu_ioctl_ms, usage, cgroup_usage, syscalls, short_lived,
ingress, gpus, label; a field that is None is left out (`node`, `process.cmdline`, `framework`,
`pod` and its `container`, the two GPU fields, `short_lived`, `ingress` and its two eBPF fields,
`gpus` and each of its optional fields, `label`). Reading is strict (see
`croft.domain.dataset.row`).

A line that fails is one of two skips (`croft.domain.dataset.skips`): not JSON, where the decoder
met bytes that are not JSON text (invalid UTF-8, a second value, a cut line) before anything else,
or not a row, where it met a JSON value of the wrong shape (a missing or unknown key, a wrong
type, a number out of range).

Every reader decodes whole rows with this one decoder. A decoder of only the fields a reader needs
(msgspec.Raw for the rest) would read a row in about 60 % of the time, but it cannot see a wrong
value in the fields it leaves out, so two readers would count the same damaged line differently.
"""

from __future__ import annotations

from typing import Any

import msgspec

from croft.domain.dataset.row import Row


class NotARow(ValueError):
    """A JSON value that does not have the shape of a dataset row."""


class NotJSON(ValueError):
    """Bytes that are not one JSON text."""


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Row)


def encode_row(row: Row) -> bytes:
    """One dataset line: compact JSON of `row` followed by a newline."""
    buffer = bytearray()
    _ENCODER.encode_into(row, buffer)
    buffer += b"\n"
    return bytes(buffer)


def encode_rows(rows: list[Row]) -> bytes:
    """The lines of `rows`, each followed by a newline (one poll's write)."""
    return b"".join(map(encode_row, rows))


def decode_row(line: bytes | str) -> Row:
    """The `Row` of one dataset line (without its newline). Raises `NotARow` or `NotJSON` naming
    the first thing that is wrong."""
    try:
        return _DECODER.decode(line)
    except msgspec.ValidationError as exc:
        raise NotARow(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise NotJSON(str(exc)) from None


def row_to_dict(row: Row) -> dict[str, Any]:
    """The JSON object of `row`, keys in on-disk order, empty optional fields left out."""
    value: dict[str, Any] = msgspec.json.decode(_ENCODER.encode(row))
    return value


def row_from_dict(value: object) -> Row:
    """A `Row` from a decoded JSON object, judged as a line is. Raises `NotARow`."""
    try:
        return msgspec.convert(value, Row)
    except msgspec.ValidationError as exc:
        raise NotARow(str(exc)) from None
