"""croft stats' native fast path (croft.domain.dataset._rowscan) never changes an answer: for any
buffer of lines, folding it natively (the canonical rows in C, every other line deferred to the
Python path) gives exactly the StatsAccumulator the Python path gives (`lines.decode_block` then
`add`): rows, first and last ms, polls and processes per node, (container, framework) pairs,
workload counts, every syscall sum bit for bit, and the skipped lines by kind.

The lines are canonical rows as the codec writes them (all the optional keys, short_lived and
ingress included, rates of any finite double), then damaged at the byte level: cut, a byte changed,
bytes inserted (whitespace, escapes, keys, digits, non-UTF-8), a range deleted, a number replaced
by another spelling of a number (exponents, leading zeros, many digits, beyond a double or int64),
a key renamed or repeated, a value's type changed. CROFT_ROWSCAN_EXAMPLES sets the examples of
each law (default 400; the change that added the native path was checked with many more).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croft.domain.dataset import codec
from croft.domain.dataset.lines import decode_block
from croft.domain.dataset.row import (
    UNIX_MS_MAX,
    WORKLOADS,
    CgroupUsage,
    Ingress,
    Process,
    Row,
    ShortLived,
    SyscallRate,
    Usage,
)
from croft.domain.dataset.summary import NATIVE, StatsAccumulator
from tests.helpers import strategies as s
from tests.helpers.strategies import paths

LAW = settings(
    max_examples=int(os.environ.get("CROFT_ROWSCAN_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_the_native_path_is_built() -> None:
    """`make install` builds it; a checkout without it would read at Python speed and leave the
    law below comparing the Python path with itself. CROFT_NATIVE=0 is the only way to run without."""
    if os.environ.get("CROFT_NATIVE") == "0":
        pytest.skip("CROFT_NATIVE=0: the pure Python path is asked for")
    assert NATIVE, (
        "croft.domain.dataset._rowscan is not built: run `make install` (needs gcc and python3-dev)"
    )


needs_native = pytest.mark.skipif(not NATIVE, reason="no native path to compare (the test above fails)")

any_floats = st.floats(allow_nan=False, allow_infinity=False)
plain = st.floats(min_value=-1e12, max_value=1e12, allow_subnormal=False)
special_rates = st.sampled_from([0.0, -0.0, 1.0, 0.5, 2.0**44, 2.0**44 - 1, 1e16, 5e-324, -3.25, 1e-7])
# Printable ASCII, no quote or backslash: strings as croft writes them (the C side takes only these).
ascii_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters='"\\'), max_size=30
)
common_names = st.sampled_from(["futex", "read", "write", "epoll_wait", "ioctl", "x"])
odd_names = st.sampled_from(["é", "a\\b", "", "x\x7f", 'q"']) | st.text(max_size=6)


def _fields(cls: type, floats: st.SearchStrategy[float]) -> dict[str, st.SearchStrategy[Any]]:
    return {f.name: floats if f.type in (float, "float") else s.counts for f in attrs.fields(cls)}


@st.composite
def canonical_rows(draw: st.DrawFn) -> bytes:
    """A row as croft's writer writes it (without its newline): mostly of the strings and numbers
    croft writes, one in four with any text and any finite numbers."""
    wild = draw(st.integers(0, 3)) == 0
    texts = s.text if wild else ascii_text
    floats = st.one_of(plain, s.rates, any_floats) if wild else plain
    rates = (
        st.one_of(s.rates, special_rates, any_floats) if wild else st.one_of(plain, s.rates, special_rates)
    )
    calls = st.builds(SyscallRate, name=odd_names if wild else common_names, rate_per_sec=rates)
    call_lists = st.lists(calls, max_size=6).map(tuple)
    node = (
        st.sampled_from(["nodé", "n\tx", 'n"']) if wild else st.sampled_from([None, "", "node-a", "node-b"])
    )
    process = st.builds(
        Process,
        comm=texts,
        exe=texts,
        cgroup=texts,
        container_id=st.none() | st.sampled_from(["a" * 64, "b" * 64]) | s.hex_ids,
        cwd=texts,
        framework=st.none() | st.sampled_from(["pytorch", "jax", "vllm"]) | texts,
    )
    ingress = {
        **_fields(Ingress, floats),
        "tcp_data_segments_s": st.none() | floats,
        "tcp_connections_s": st.none() | floats,
    }
    gpu = draw(st.booleans())
    row = Row(
        unix_ms=draw(
            st.sampled_from([0, UNIX_MS_MAX, 1_792_505_950_000, 1_792_505_952_000])
            | st.integers(0, UNIX_MS_MAX)
        ),
        tgid=draw(st.integers(-(2**63), 2**63 - 1) | st.integers(1, 40)),
        node=draw(node),
        process=draw(process),
        workload=draw(st.sampled_from(WORKLOADS)),
        ioctl_count=draw(s.counts) if gpu else None,
        since_last_gpu_ioctl_ms=draw(s.counts) if gpu else None,
        usage=draw(st.builds(Usage, **_fields(Usage, floats))),
        cgroup_usage=draw(st.builds(CgroupUsage, **_fields(CgroupUsage, floats))),
        syscalls=draw(call_lists),
        short_lived=draw(st.none() | st.builds(ShortLived, processes=s.counts, syscalls=call_lists)),
        ingress=draw(st.none() | st.builds(Ingress, **ingress)),
        label=draw(st.none() | texts),
    )
    return codec.encode_row(row)[:-1]


# Numbers the writer never writes, each spelled as JSON allows or nearly: the C side must defer
# what it is unsure of and agree on what it accepts.
number_spellings = st.sampled_from(
    [
        b"0", b"-0", b"00", b"01", b"1.", b".5", b"-", b"1e", b"1e+", b"1E5", b"1e-5", b"1e400", b"-1e400",
        b"1e-400", b"2.5e-320", b"5e-324", b"1.7976931348623157e308", b"1.7976931348623159e308",
        b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808", b"-9223372036854775809",
        b"18446744073709551616", b"123456789012345678", b"1234567890123456789", b"9007199254740993",
        b"9007199254740993.0", b"0.1e1", b"1.0", b"-1.0", b"1e22", b"1e23", b"4.35e-303", b"17592186044416.0",
        b"17592186044415.998", b"1e0001", b"0e999", b"NaN", b"Infinity", b"true", b"null", b'"1"', b"[1]",
        b"253402300799999", b"253402300800000", b"-1", b"1_0",
    ]
)  # fmt: skip


@st.composite
def decimal_numbers(draw: st.DrawFn) -> bytes:
    """A number in JSON's grammar with any digits and exponent: the parse must be exact."""
    sign = draw(st.sampled_from([b"", b"-"]))
    whole = draw(st.sampled_from([b"0"]) | st.from_regex(rb"\A[1-9][0-9]{0,24}\Z"))
    frac = draw(st.sampled_from([b""]) | st.from_regex(rb"\A\.[0-9]{1,25}\Z"))
    exp = draw(st.sampled_from([b""]) | st.from_regex(rb"\A[eE][+-]?[0-9]{1,3}\Z"))
    return sign + whole + frac + exp


NUMBER = re.compile(rb"-?[0-9][0-9.eE+-]*")
KEY = re.compile(rb'"[a-z_0-9]+":')
INSERTS = [b" ", b"\t", b"\r", b"\n", b"\\", b'"', b"\\u0041", b"\\n", b",", b":", b"{", b"}", b"[", b"]",
           b'"x":1,', b',"x":1', b"null", b"\xff", b"\xc3\xa9", b"\xed\xa0\x80", b"\x00", b"\x7f", b"0", b"9",
           b"e5", b".5"]  # fmt: skip


@st.composite
def damaged(draw: st.DrawFn, line: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 3))):
        if not line:
            return line
        at = draw(st.integers(0, len(line)))
        kind = draw(st.sampled_from(["cut", "byte", "insert", "delete", "number", "decimal", "key", "type"]))
        if kind == "cut":
            line = line[:at]
        elif kind == "byte" and at < len(line):
            line = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
        elif kind == "insert":
            line = line[:at] + draw(st.sampled_from(INSERTS)) + line[at:]
        elif kind == "delete":
            line = line[:at] + line[at + draw(st.integers(1, 40)) :]
        elif kind in ("number", "decimal", "key"):
            found = list((NUMBER if kind != "key" else KEY).finditer(line))
            if found:
                m = draw(st.sampled_from(found))
                if kind == "key":
                    new = draw(
                        st.sampled_from([k.group() for k in found] + [b'"x":', b'"Node":', b'"label":'])
                    )
                else:
                    new = draw(number_spellings if kind == "number" else decimal_numbers())
                line = line[: m.start()] + new + line[m.end() :]
        elif kind == "type":
            value = orjson.loads(line) if _json(line) else None
            if isinstance(value, dict) and value:
                *parent_path, last = draw(st.sampled_from([p for p in paths(value) if p]))
                parent = value
                for step in parent_path:
                    parent = parent[step]
                parent[last] = draw(st.sampled_from(BOUNDS))
                line = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return line


def _json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


@st.composite
def rate_spelled(draw: st.DrawFn, line: bytes) -> bytes:
    """A canonical row whose syscall rates are spelled as any JSON number."""
    spans = [m.span(1) for m in re.finditer(rb'"rate_per_sec":([^}]*)}', line)]
    for start, stop in reversed(spans):
        if draw(st.booleans()):
            line = line[:start] + draw(decimal_numbers() | number_spellings) + line[stop:]
    return line


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    good = draw(canonical_rows())
    how = draw(st.sampled_from(["as written", "as written", "damaged", "rates", "blank"]))
    if how == "damaged":
        return draw(damaged(good))
    if how == "rates":
        return draw(rate_spelled(good))
    if how == "blank":
        return draw(st.sampled_from([b"", b" ", b"\t\r"]))
    return good


def totals(acc: StatsAccumulator, skipped: Counter[str]) -> dict[str, Any]:
    return {
        "rows": acc.rows,
        "first_ms": acc.first_ms,
        "last_ms": acc.last_ms,
        "polls": acc.polls,
        "tgids": acc.tgids,
        "processes": acc.processes,
        "workloads": dict(acc.workloads),
        "syscall_sums": dict(acc.syscall_sums),
        "skipped": dict(skipped),
    }


def both(data: bytes, syscalls: bool, node: str = "file-node") -> tuple[dict[str, Any], dict[str, Any]]:
    pure, native = StatsAccumulator(syscalls), StatsAccumulator(syscalls)
    pure_skips, native_skips = Counter[str](), Counter[str]()
    pure.add_lines(node, data, 0, len(data), pure_skips, native=False)
    native.add_lines(node, data, 0, len(data), native_skips, native=True)
    return totals(pure, pure_skips), totals(native, native_skips)


@needs_native
@LAW
@given(st.lists(lines(), min_size=1, max_size=12), st.booleans(), st.booleans())
def test_native_folding_gives_the_python_totals(found: list[bytes], syscalls: bool, newline: bool) -> None:
    data = b"\n".join(found) + (b"\n" if newline else b"")
    pure, native = both(data, syscalls)
    assert native == pure


@needs_native
@LAW
@given(canonical_rows())
def test_every_canonical_row_is_folded(line: bytes) -> None:
    """The fast path is fast only if it takes what croft writes: every canonical row whose strings
    are printable ASCII and whose rates are below 2**44 (what it defers by design)."""
    from croft.domain.dataset import _rowscan

    value = orjson.loads(line)
    rates = [c["rate_per_sec"] for c in value["syscalls"]]
    printable = all(0x20 <= b < 0x7F for b in line) and b"\\" not in line
    if printable and all(abs(r) < 2.0**44 for r in rates) and all(map(_moderate, _numbers(value))):
        assert _rowscan.accepts(line)


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for inner in value.values() for n in _numbers(inner)]
    if isinstance(value, list):
        return [n for inner in value for n in _numbers(inner)]
    return [value] if type(value) in (int, float) else []


def _moderate(number: float) -> bool:
    """Numbers the C side takes: every int64, and floats of zero or magnitude 1e-299 to 1e299."""
    return type(number) is int or number == 0 or 1e-299 <= abs(number) < 1e299


@needs_native
@LAW
@given(decimal_numbers() | number_spellings)
def test_a_rate_folds_to_the_sum_msgspec_gives(number: bytes) -> None:
    row = codec.encode_row(_example())[:-1]
    line = re.sub(rb'"rate_per_sec":[^}]*}', b'"rate_per_sec":' + number + b"}", row, count=1)
    pure, native = both(line + b"\n", syscalls=True)
    assert native == pure


def _example() -> Row:
    from tests.helpers.rows import make_row

    return make_row(7)


FULL = Row(
    unix_ms=1_792_505_950_473,
    tgid=7,
    node="node-a",
    process=Process(comm="python", exe="/usr/bin/python3", cgroup="/kubepods/x", container_id="a" * 64,
                    cwd="/w", framework="pytorch"),
    workload="gpu-held",
    ioctl_count=3,
    since_last_gpu_ioctl_ms=40,
    usage=Usage(cpu_cores=0.5, rss_bytes=1 << 30, threads=8, ctx_voluntary_s=1.0, ctx_involuntary_s=0.0,
                read_bytes_s=0.0, write_bytes_s=512.0, network_rx_bytes_s=10.0, network_tx_bytes_s=20.0,
                runqueue_s=0.001),
    cgroup_usage=CgroupUsage(cpu_cores=0.5, cpu_throttled_fraction=0.0, memory_bytes=1 << 30, oom_kills=0,
                             cpu_pressure_avg10=0.0, memory_pressure_avg10=0.0, io_pressure_avg10=0.0),
    syscalls=(SyscallRate(name="futex", rate_per_sec=282.5), SyscallRate(name="read", rate_per_sec=1e-7)),
    short_lived=ShortLived(processes=2, syscalls=(SyscallRate(name="clone", rate_per_sec=1.5),)),
    ingress=Ingress(tcp_passive_opens_s=1.0, tcp_in_segs_s=2.0, rx_packets_s=3.0, rx_bytes_s=4.0,
                    listen_drops_s=0.0, listen_backlog=1, unread_bytes=0, tcp_data_segments_s=5.0,
                    tcp_connections_s=6.0),
    label="burst",
)  # fmt: skip
BOUNDS: list[Any] = [
    UNIX_MS_MAX, UNIX_MS_MAX + 1, 0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 1.0, -0.0, 0.5,
    1e300, 1e-300, 5e-324, 2.0**44, 2.0**44 - 0.5, -(2.0**44) + 1, None, True, "", "x", "gpu-held ",
    "no_gpu", "gpu-onset", "é", [], {}, [1], {"name": "futex", "rate_per_sec": 1.0},
]  # fmt: skip


@needs_native
def test_every_field_at_its_bounds_and_of_every_type() -> None:
    """Each value of a row with every optional key, replaced in turn by each of the values at the
    edges of what a row may hold (and beyond), then the key dropped and an extra key added."""
    full = codec.row_to_dict(FULL)
    found = []
    for where in paths(full):
        if not where:
            continue
        for value in [*BOUNDS, "DROP", "EXTRA"]:
            changed = json.loads(json.dumps(full))
            *parent_path, last = where
            parent = changed
            for step in parent_path:
                parent = parent[step]
            if value == "DROP":
                del parent[last]
            elif value == "EXTRA":
                if not isinstance(parent, dict):
                    continue
                parent["zz"] = 1
            else:
                parent[last] = value
            line = json.dumps(changed, separators=(",", ":"), ensure_ascii=False).encode()
            found.append(line)
            pure, native = both(line, syscalls=True)
            assert native == pure, line
    from croft.domain.dataset import _rowscan

    assert _rowscan.accepts(codec.encode_row(FULL)[:-1])
    assert sum(map(_rowscan.accepts, found)) > 100  # the values within bounds are taken


@needs_native
def test_many_rows_of_many_nodes_and_names_in_one_buffer() -> None:
    """More nodes, containers and syscall names than the C side keeps at once (it defers or
    forgets past its tables), and sums past 2**127 (its 128-bit totals spill into Python ints)."""
    lines_ = []
    for i in range(6000):
        value = codec.row_to_dict(_example())
        value["node"] = f"node-{i % 40}"
        value["tgid"] = i
        value["unix_ms"] = 1_792_505_950_000 + (i % 7) * 2000
        value["process"]["container_id"] = f"{i % 3000:064x}"
        value["syscalls"] = [
            {"name": f"call{(i * 5 + k) % 3000}", "rate_per_sec": 2.0**44 - 1 - k} for k in range(5)
        ] + [{"name": "big", "rate_per_sec": 17592186044415.99}] * 200
        lines_.append(orjson.dumps(value))
    data = b"\n".join(lines_) + b"\n"
    pure, native = both(data, syscalls=True)
    assert pure["syscall_sums"]["big"] > 2**127
    assert native == pure


# Syscall names that share their first bytes (prefixes, and names of one length that differ only in
# their last byte), around the 8 bytes the C side hashes and compares at once: each keeps its own sum.
PREFIXED_NAMES = ["", "r", "s", "re", "rea", "read", "readv", "readw", "readlin", "readlink", "readlinq",
                  "readlinka", "readlinkb", "readlinkat", "readlinkat2", "readlinkat234567",
                  "readlinkat2345678", "readlinkat2345679", "readlinkat23456789", "x"]  # fmt: skip


@needs_native
@LAW
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(PREFIXED_NAMES), special_rates), max_size=8),
        min_size=1,
        max_size=8,
    )
)
def test_names_that_share_their_first_bytes_are_summed_apart(calls: list[list[tuple[str, float]]]) -> None:
    lines_ = []
    for i, row_calls in enumerate(calls):
        value = codec.row_to_dict(_example())
        value["tgid"] = i
        value["syscalls"] = [{"name": name, "rate_per_sec": rate} for name, rate in row_calls]
        lines_.append(orjson.dumps(value))
    pure, native = both(b"\n".join(lines_) + b"\n", syscalls=True)
    assert native == pure


# Where the C side's memo of a process's members and of a cgroup usage's members ends.
MEMBERS_END = [b'},"workload":', b'},"syscalls":']
EDGE_INSERTS = [b"", b"x", b"0", b"5", b".5", b"e5", b'"', b"\\", b" ", b',"framework":"jax"', b',"zz":1']


@st.composite
def repeated(draw: st.DrawFn, line: bytes) -> bytes:
    """`line` again, as the same process in another poll: unchanged, or changed at the end of its
    process or cgroup usage members (bytes cut there, some inserted), its framework dropped or
    added, or damaged anywhere."""
    how = draw(st.sampled_from(["same", "same", "edge", "edge", "framework", "damaged"]))
    if how == "same":
        return line
    if how == "edge":
        at = line.find(draw(st.sampled_from(MEMBERS_END)))
        if at < 0:
            return line
        cut = draw(st.integers(0, 3))
        return line[: at - cut] + draw(st.sampled_from(EDGE_INSERTS)) + line[at:]
    if how == "framework":
        if b',"framework":' in line:
            return re.sub(rb',"framework":"[^"]*"', b"", line, count=1)
        return line.replace(b'},"workload":', b',"framework":"vllm"},"workload":', 1)
    return draw(damaged(line))


@needs_native
@LAW
@given(st.data(), st.lists(canonical_rows(), min_size=1, max_size=4), st.booleans())
def test_rows_that_repeat_earlier_members_give_the_python_totals(
    data: st.DataObject, firsts: list[bytes], syscalls: bool
) -> None:
    """The C side takes a process's members, and a cgroup usage's, that repeat bytes it read before
    in the buffer without reading them again: every repeat, changed or not, counts as in Python."""
    found = list(firsts)
    for _ in range(data.draw(st.integers(1, 10))):
        found.append(data.draw(repeated(data.draw(st.sampled_from(found)))))
    pure, native = both(b"\n".join(found) + b"\n", syscalls)
    assert native == pure


@needs_native
def test_a_clean_block_is_decoded_as_before() -> None:
    """The Python path is the one `decode_block` gave before the native path existed."""
    data = b"\n".join(codec.encode_row(_example())[:-1] for _ in range(3)) + b"\n"
    skipped = Counter[str]()
    assert len(decode_block(data, 0, len(data), skipped)) == 3
    pure, native = both(data, syscalls=True)
    assert native == pure
    assert native["rows"] == 3


@needs_native
@settings(LAW, max_examples=max(LAW.max_examples // 4, 1))  # each example is several buffers
@given(st.lists(st.lists(lines(), min_size=1, max_size=6), min_size=2, max_size=5), st.booleans())
def test_buffers_folded_in_turn_give_the_python_totals(buffers: list[list[bytes]], syscalls: bool) -> None:
    """The C side keeps its tables from one buffer to the next: each buffer starts them empty."""
    pure, native = StatsAccumulator(syscalls), StatsAccumulator(syscalls)
    pure_skips, native_skips = Counter[str](), Counter[str]()
    for found in buffers:
        data = b"\n".join(found) + b"\n"
        pure.add_lines("file-node", data, 0, len(data), pure_skips, native=False)
        native.add_lines("file-node", data, 0, len(data), native_skips, native=True)
    assert totals(native, native_skips) == totals(pure, pure_skips)


@needs_native
def test_a_failed_fold_leaves_the_next_exact() -> None:
    """A fold that raises half way (a node's polls are not a set) frees its tables for the next."""
    from croft.domain.dataset import _rowscan

    data = b"".join(codec.encode_row(_example()) for _ in range(3))
    with pytest.raises(TypeError):
        _rowscan.fold(data, 0, len(data), "file-node", {"file-node": []}, {}, set(), True)
    pure, native = both(data, syscalls=True)
    assert native == pure
    assert native["rows"] == 3
