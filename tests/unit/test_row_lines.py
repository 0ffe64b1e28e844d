"""One definition of a row: the fast schema (views.RowSchema) accepts exactly the lines the codec
accepts, and a buffer decoded the fast way gives the rows and skips of judging it line by line."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import msgspec
import orjson
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset import codec
from croft.domain.dataset.lines import decode_block, verdict, view
from croft.domain.dataset.row import Row
from croft.domain.dataset.views import ROW_DECODER
from tests.helpers import strategies as s
from tests.helpers.rows import make_row
from tests.helpers.strategies import paths

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["gpu-onset", "gpu-held", "no-gpu"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated_rows(draw: st.DrawFn) -> Any:
    """A valid row's JSON object with up to three changes: a value replaced, a key dropped, a key
    added, anywhere in it."""
    value = codec.row_to_dict(draw(s.rows()))
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(paths(value)))
        if not where:
            continue
        *parent_path, last = where
        parent = value
        for step in parent_path:
            parent = parent[step]
        change = draw(st.sampled_from(["replace", "drop", "add"]))
        if change == "replace":
            parent[last] = draw(json_values)
        elif change == "drop":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(json_values)
    return value


def schema_accepts(line: bytes) -> bool:
    try:
        ROW_DECODER.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


def dumps(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits: write it by hand
        return None


@given(mutated_rows())
def test_the_schema_accepts_exactly_the_objects_the_codec_accepts(value: Any) -> None:
    line = dumps(value)
    if line is None:
        line = msgspec.json.encode(value)
    assert schema_accepts(line) == isinstance(verdict(line), Row), line


byte_edits = st.sampled_from(
    [b"\xff", b"\xc3", b"\\ud800", b"\x00", b"\t", b"}", b"{", b",", b'"', b"1" * 25, b"e400", b" ", b"\n"]
)


@given(mutated_rows(), st.lists(st.tuples(st.integers(0, 2000), byte_edits, st.integers(0, 3)), max_size=3))
def test_a_line_the_schema_accepts_is_a_row_and_every_line_gets_the_codecs_verdict(
    value: Any, edits: list[tuple[int, bytes, int]]
) -> None:
    line = bytearray(msgspec.json.encode(value))
    for at, data, cut in edits:
        at = min(at, len(line))
        line[at : at + cut] = data
    raw = bytes(line).replace(b"\n", b" ")
    judged = verdict(raw)
    if schema_accepts(raw):
        assert isinstance(judged, Row)
    fast = view(raw)
    assert isinstance(fast, str) == isinstance(judged, str)
    assert fast == judged if isinstance(judged, str) or judged is None else fast is not None


@given(
    st.lists(mutated_rows() | st.sampled_from([b"", b"  ", b"{}{}", b"[1]", b"\xff"]), max_size=8),
    st.sampled_from([b"", b"{}\n", b"{"]),
    st.sampled_from([b"", b"{}", b"\n"]),
)
def test_a_buffer_decoded_at_once_gives_the_rows_and_skips_of_each_line_judged(
    items: list[Any], before: bytes, after: bytes
) -> None:
    """Also where the lines are a slice of a larger read (`before` and `after` are not theirs)."""
    lines = [item if isinstance(item, bytes) else msgspec.json.encode(item) for item in items]
    data = b"".join(line + b"\n" for line in lines)
    skipped: Counter[str] = Counter()
    read = before + data + after
    got = decode_block(read, len(before), len(before) + len(data), skipped) if data else []
    expected = [verdict(line) for line in lines]
    assert [msgspec.json.encode(v) for v in got] == [
        msgspec.json.encode(ROW_DECODER.decode(line)) for line, found in zip(lines, expected, strict=True)
        if isinstance(found, Row)
    ]  # fmt: skip
    assert skipped == Counter(found for found in expected if isinstance(found, str))


SENTINEL = 12345.678901234
numerals = st.one_of(
    st.builds(lambda sign, digit, exp: f"{sign}{digit}e{exp}", st.sampled_from(["", "-"]),
              st.sampled_from(["1", "1.7976931348623157", "1.7976931348623159", "0", "9.99"]),
              st.integers(290, 420) | st.integers(-420, -290)),
    st.builds(lambda sign, n: f"{sign}1{'0' * n}", st.sampled_from(["", "-"]), st.integers(300, 320)),
    st.builds(lambda n, e: f"1{'0' * n}e{e}", st.integers(300, 320), st.integers(-30, 30)),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e", "1E+400", "0e999999999999"]),
)  # fmt: skip


float_fields = st.sampled_from(["cpu_cores", "runqueue_s", "memory_pressure_avg10", "rate_per_sec"])


@given(s.rows(), float_fields, numerals)
def test_a_number_beyond_a_double_in_a_float_field_is_refused_by_both_and_no_float_read_is_infinite(
    row: Row, field: str, numeral: str
) -> None:
    """The schema puts no bounds on floats: msgspec's decoder refuses what is beyond a double."""
    value = codec.row_to_dict(row)
    value["syscalls"] = [{"name": "read", "rate_per_sec": 1.0}]
    owner = {"rate_per_sec": value["syscalls"][0], "memory_pressure_avg10": value["cgroup_usage"]}
    owner.get(field, value["usage"])[field] = SENTINEL
    line = orjson.dumps(value).replace(str(SENTINEL).encode(), numeral.encode())
    judged = verdict(line)
    assert schema_accepts(line) == isinstance(judged, Row), line
    if schema_accepts(line):
        fast = ROW_DECODER.decode(line)
        numbers = [*msgspec.structs.astuple(fast.usage), *msgspec.structs.astuple(fast.cgroup_usage)]
        numbers += [call.rate_per_sec for call in fast.syscalls]
        assert all(math.isfinite(n) for n in numbers)


def test_a_block_of_two_objects_on_a_line_and_a_blank_line_is_read_line_by_line() -> None:
    row = codec.encode_row(make_row(1)).rstrip(b"\n")
    data = row + row + b"\n\n" + row + b"\n"
    skipped: Counter[str] = Counter()
    assert len(decode_block(data, 0, len(data), skipped)) == 1
    assert skipped == Counter({"not JSON": 1})
