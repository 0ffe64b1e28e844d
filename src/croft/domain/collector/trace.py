"""The trace format: the raw snapshots of every poll, one JSON line per poll (see
`croft.adapters.host.trace` for the files around it).

A trace file is zstd-compressed JSON lines. Its first line is the header
`{"croft_trace": 1, "watch": "<the --watch it was recorded with>", "node": "<the node>"}` (`node`
left out by recorders before it, and when unknown);
every other line is one `Poll` as `poll_to_json` writes it: the attrs fields of
`croft.domain.collector.snapshot.Poll` by name (tuples as lists, tgid-keyed maps as objects with decimal
string keys, `GpuIoctls` as objects). Unknown versions are refused; a line that does not decode is a
`TraceError` naming it.
"""

from __future__ import annotations

from typing import Any

import cattrs
import msgspec
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from croft.domain.collector.snapshot import Poll

TRACE_VERSION = 1


def header(watch: str, node: str | None = None) -> bytes:
    """The first line of a trace recorded with `--watch watch` on `node`."""
    fields: dict[str, object] = {"croft_trace": TRACE_VERSION, "watch": watch}
    if node is not None:
        fields["node"] = node
    return msgspec.json.encode(fields) + b"\n"


class TraceError(ValueError):
    """A trace line that is not a poll of a known trace version."""


_converter = cattrs.Converter(forbid_extra_keys=True)
# `Poll.changes` is the shell's hint for the core's work, not something the kernel said: a trace
# keeps what was read, and a replay's core finds the changes itself.
_converter.register_unstructure_hook(
    Poll, make_dict_unstructure_fn(Poll, _converter, changes=override(omit=True))
)
_converter.register_structure_hook(
    Poll,
    make_dict_structure_fn(Poll, _converter, changes=override(omit=True), _cattrs_forbid_extra_keys=True),
)


def poll_to_json(poll: Poll) -> bytes:
    """One trace line (with its newline) for `poll`."""
    return msgspec.json.encode(_converter.unstructure(poll)) + b"\n"


def poll_from_json(line: bytes) -> Poll:
    """The `Poll` of one trace line; raises `TraceError`."""
    try:
        value: Any = msgspec.json.decode(line)
        return _converter.structure(value, Poll)
    except (msgspec.DecodeError, cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"not a trace poll: {exc}") from exc


def check_header(line: bytes) -> str:
    """The `--watch` of a trace header line; raises `TraceError` unless `line` is a header of
    version `TRACE_VERSION`."""
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise TraceError("the first line is not a croft trace header") from exc
    if not isinstance(value, dict) or value.get("croft_trace") != TRACE_VERSION:
        raise TraceError(f"not a croft trace of version {TRACE_VERSION}: {line[:60]!r}")
    watch = value.get("watch", "")
    if not isinstance(watch, str):
        raise TraceError("the trace header's watch is not a string")
    return watch


def header_node(line: bytes) -> str | None:
    """The node a trace header line names; None when it names none (older recorders). Raises
    `TraceError` unless `line` is a header of version `TRACE_VERSION`."""
    check_header(line)
    node = msgspec.json.decode(line).get("node")
    if node is not None and not isinstance(node, str):
        raise TraceError("the trace header's node is not a string")
    return node
