"""One definition of a row, read strictly: a line the codec accepts is written back as the very JSON
it held (nothing coerced, dropped or made up), numbers read are finite, and a buffer decoded at
once gives the rows and skips of judging it line by line."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset import codec
from croft.domain.dataset.lines import decode_block, verdict
from croft.domain.dataset.row import Row
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


def without_nulls(value: Any) -> Any:
    """`value` with the keys whose value is null left out (as a row leaves out an empty optional
    field), but `container_id` (a host process's, written null)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None or k == "container_id"}
    if isinstance(value, list | tuple):
        return [without_nulls(v) for v in value]
    return value


@given(mutated_rows())
def test_a_row_the_codec_accepts_is_the_json_it_read(value: Any) -> None:
    try:
        line = msgspec.json.encode(value)
    except OverflowError:  # an integer beyond 64 bits, which no row holds
        return
    judged = verdict(line)
    if isinstance(judged, Row):
        assert msgspec.json.decode(codec.encode_row(judged)) == without_nulls(value)
    else:
        assert judged in ("not a row", "not JSON"), judged


byte_edits = st.sampled_from(
    [b"\xff", b"\xc3", b"\\ud800", b"\x00", b"\t", b"}", b"{", b",", b'"', b"1" * 25, b"e400", b" ", b"\n"]
)


@given(mutated_rows(), st.lists(st.tuples(st.integers(0, 2000), byte_edits, st.integers(0, 3)), max_size=3))
def test_every_line_gets_one_verdict_and_a_row_reads_back_to_its_own_line(
    value: Any, edits: list[tuple[int, bytes, int]]
) -> None:
    line = bytearray(msgspec.json.encode(value))
    for at, data, cut in edits:
        at = min(at, len(line))
        line[at : at + cut] = data
    raw = bytes(line).replace(b"\n", b" ")
    judged = verdict(raw)
    assert judged is None or isinstance(judged, Row) or judged in ("not a row", "not JSON"), judged
    if isinstance(judged, Row):
        assert verdict(codec.encode_row(judged).rstrip(b"\n")) == judged


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
    assert got == [found for found in expected if isinstance(found, Row)]
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
def test_a_number_beyond_a_double_in_a_float_field_is_refused_and_no_float_read_is_infinite(
    row: Row, field: str, numeral: str
) -> None:
    """The row puts no bounds on floats: msgspec's decoder refuses what is beyond a double."""
    value = codec.row_to_dict(row)
    value["syscalls"] = [{"name": "read", "rate_per_sec": 1.0}]
    owner = {"rate_per_sec": value["syscalls"][0], "memory_pressure_avg10": value["cgroup_usage"]}
    owner.get(field, value["usage"])[field] = SENTINEL
    line = msgspec.json.encode(value).replace(str(SENTINEL).encode(), numeral.encode())
    judged = verdict(line)
    if isinstance(judged, Row):
        numbers = [*msgspec.structs.astuple(judged.usage), *msgspec.structs.astuple(judged.cgroup_usage)]
        numbers += [call.rate_per_sec for call in judged.syscalls]
        assert all(math.isfinite(n) for n in numbers)
    else:
        assert judged in ("not a row", "not JSON")


def test_a_block_of_two_objects_on_a_line_and_a_blank_line_is_read_line_by_line() -> None:
    row = codec.encode_row(make_row(1)).rstrip(b"\n")
    data = row + row + b"\n\n" + row + b"\n"
    skipped: Counter[str] = Counter()
    assert len(decode_block(data, 0, len(data), skipped)) == 1
    assert skipped == Counter({"not JSON": 1})
