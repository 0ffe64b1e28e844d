"""The stats core: the row schema reads rows as the codec wrote them, accumulators merge in any order,
and skip reports are one sentence a line."""

from __future__ import annotations

import functools
import itertools
import math
import random
from fractions import Fraction

import attrs
import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset import codec
from croft.domain.dataset.merged import merge_stats, stats_section, times_of
from croft.domain.dataset.row import Row, SyscallRate
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TORN, SkipTally
from croft.domain.dataset.summary import BUSIEST_SYSCALLS, SUM_UNIT_BITS, FileFacts, Stats, StatsAccumulator
from croft.domain.dataset.views import ROW_DECODER
from tests.helpers import strategies as s
from tests.helpers.spec_keys import STATS_KEYS

FACTS = FileFacts(files=1, compressed=0, bytes_on_disk=10)


@given(s.rows())
def test_the_schema_reads_what_the_codec_wrote(row: Row) -> None:
    got = ROW_DECODER.decode(codec.encode_row(row))
    assert without_empty(orjson.loads(msgspec.json.encode(got))) == without_empty(codec.row_to_dict(row))


def without_empty(value: object) -> object:
    """`value` with the keys of None and [] left out, as the codec leaves out empty fields."""
    if isinstance(value, dict):
        return {k: without_empty(v) for k, v in value.items() if v is not None and v != []}
    return value


# Each breaks a field the readers use; the codec and the schema refuse every one of them.
BREAKS = [
    ("unix_ms", "1792505950473"),
    ("unix_ms", 1.5),
    ("tgid", True),
    ("tgid", None),
    ("workload", "gpu-maybe"),
    ("process", {"container_id": 7}),
    ("process", None),
]


@pytest.mark.parametrize(("key", "value"), BREAKS)
def test_a_line_the_codec_refuses_fails_the_schema(key: str, value: object) -> None:
    valid = codec.row_to_dict(_example_row())
    broken = dict(valid, **{key: value})
    line = orjson.dumps(broken)
    with pytest.raises(codec.NotARow):
        codec.decode_row(line)
    with pytest.raises(msgspec.ValidationError):
        ROW_DECODER.decode(line)


def test_a_missing_field_fails_the_schema() -> None:
    valid = codec.row_to_dict(_example_row())
    del valid["tgid"]
    with pytest.raises(msgspec.ValidationError):
        ROW_DECODER.decode(orjson.dumps(valid))


def _example_row() -> Row:
    from tests.helpers.rows import seq_row

    return seq_row(1, 1_792_505_950_473)


def views_of(rows: list[Row]) -> list[object]:
    return ROW_DECODER.decode_lines(b"".join(codec.encode_row(r) for r in rows))


def summary_of(batches: list[tuple[str, list[Row]]]) -> Stats:
    acc = StatsAccumulator(syscalls=True)
    for node, rows in batches:
        acc.add(node, views_of(rows))
    return acc.summary(FACTS)


nodes = st.sampled_from(["gpu-a", "gpu-b", "cpu-c"])
batches = st.lists(st.tuples(nodes, st.lists(s.rows(), max_size=6)), max_size=6)


@given(batches, st.randoms(use_true_random=False))
def test_merging_accumulators_in_any_grouping_gives_the_same_summary(
    parts: list[tuple[str, list[Row]]], rng: random.Random
) -> None:
    whole = StatsAccumulator(syscalls=True)
    for node, rows in parts:
        whole.add(node, views_of(rows))
    shuffled = parts[:]
    rng.shuffle(shuffled)
    merged = StatsAccumulator(syscalls=True)
    for node, rows in shuffled:
        one = StatsAccumulator(syscalls=True)
        one.add(node, views_of(rows))
        merged.merge(one)
    assert merged.summary(FACTS) == whole.summary(FACTS)  # the syscall means too, to the bit
    assert merged.syscall_sums == whole.syscall_sums


def attrs_without_syscalls(stats: Stats) -> tuple[object, ...]:
    return (
        stats.rows,
        stats.first_ms,
        stats.last_ms,
        stats.polls,
        stats.nodes,
        stats.containers,
        stats.processes,
        stats.workloads,
        stats.frameworks,
    )


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_syscall_means_do_not_depend_on_the_order_rows_are_read_in(
    rates: list[float], rng: random.Random
) -> None:
    rows = [
        attrs.evolve(_example_row(), unix_ms=1 + i, syscalls=(SyscallRate(name=name, rate_per_sec=rate),))
        for i, rate in enumerate(rates)
        for name in ("a-first", "b-second")
    ]
    forward = StatsAccumulator(syscalls=True)
    for row in rows:
        forward.add("n", views_of([row]))
    backward = StatsAccumulator(syscalls=True)
    shuffled = rows[:]
    rng.shuffle(shuffled)
    for row in shuffled:
        part = StatsAccumulator(syscalls=True)
        part.add("n", views_of([row]))
        backward.merge(part)
    got = forward.summary(FACTS).busiest_syscalls
    assert got == backward.summary(FACTS).busiest_syscalls
    assert [name for name, _ in got] == ["a-first", "b-second"]  # equal sums: equal means, name order
    assert got[0][1] == pytest.approx(math.fsum(rates) / len(rates), rel=1e-12, abs=1e-12)


@given(batches)
def test_the_summary_counts_what_a_naive_reading_counts(parts: list[tuple[str, list[Row]]]) -> None:
    got = summary_of(parts)
    rows = [(r.node or node, r) for node, batch in parts for r in batch]  # a row's own node first
    assert got.rows == len(rows)
    assert got.polls == len({(node, r.unix_ms) for node, r in rows})
    assert got.processes == len({(node, r.tgid) for node, r in rows})
    assert got.nodes == tuple(sorted({node for node, _ in rows}))
    containers = {r.process.container_id for _, r in rows} - {None}
    assert got.containers == len(containers)
    pairs = {(r.process.framework, r.process.container_id) for _, r in rows if r.process.container_id}
    frameworks: dict[str, int] = {}
    for fw, _ in pairs:
        if fw is not None:
            frameworks[fw] = frameworks.get(fw, 0) + 1
    assert dict(got.frameworks) == frameworks
    workloads: dict[str, int] = {}
    for _, r in rows:
        workloads[r.workload] = workloads.get(r.workload, 0) + 1
    assert dict(got.workloads) == workloads
    assert got.first_ms == min((r.unix_ms for _, r in rows), default=None)
    assert got.last_ms == max((r.unix_ms for _, r in rows), default=None)
    assert_busiest_are_the_naive_busiest(got, rows)


def assert_busiest_are_the_naive_busiest(got: Stats, rows: list[tuple[str, Row]]) -> None:
    """The means match sums taken naively (up to float addition order), the chosen ones are the
    busiest by those sums (up to the same tolerance), and the order is exactly the law: by the
    mean reported, descending, equal means by name."""
    naive: dict[str, float] = {}
    for _, r in rows:
        for c in r.syscalls:
            naive[c.name] = naive.get(c.name, 0.0) + c.rate_per_sec
    assert len(got.busiest_syscalls) == min(len(naive), BUSIEST_SYSCALLS)
    for name, mean in got.busiest_syscalls:
        assert mean == pytest.approx(naive[name] / got.polls, rel=1e-9, abs=1e-9)
    chosen = {name for name, _ in got.busiest_syscalls}
    if chosen:
        least = min(naive[name] for name in chosen)
        for name, total in naive.items():
            if name not in chosen:
                assert total <= least or total == pytest.approx(least, rel=1e-9, abs=1e-9)
    assert list(got.busiest_syscalls) == sorted(got.busiest_syscalls, key=lambda item: (-item[1], item[0]))


def test_equal_means_of_sums_an_ulp_apart_come_in_name_order() -> None:
    # 7637746189766.377 and the next float up both divide by 3 to 2545915396588.7925.
    low = 7637746189766.377
    high = math.nextafter(low, math.inf)
    assert low / 3 == high / 3 and low < high
    acc = StatsAccumulator(syscalls=True)
    acc.add("n", views_of([attrs.evolve(_example_row(), unix_ms=ms, syscalls=()) for ms in (1, 2, 3)]))
    unit = 2**SUM_UNIT_BITS
    acc.syscall_sums.update({"b-higher-sum": int(high * unit), "a-lower-sum": int(low * unit)})
    got = acc.summary(FACTS)
    assert got.polls == 3
    assert got.busiest_syscalls == (("a-lower-sum", low / 3), ("b-higher-sum", high / 3))


def test_the_busiest_are_the_ten_largest_means_and_a_tie_at_the_cut_goes_by_name() -> None:
    acc = StatsAccumulator(syscalls=True)
    acc.add("n", views_of([_example_row()]))
    acc.syscall_sums.clear()
    acc.syscall_sums.update({f"call{i:02}": i << SUM_UNIT_BITS for i in range(12)})
    acc.syscall_sums["a-tied"] = 2 << SUM_UNIT_BITS
    got = acc.summary(FACTS)
    assert [name for name, _ in got.busiest_syscalls] == [f"call{i:02}" for i in range(11, 2, -1)] + [
        "a-tied"
    ]


def test_without_syscalls_the_summary_has_none_and_the_same_totals() -> None:
    rows = [_example_row()]
    lines = b"".join(codec.encode_row(r) for r in rows)
    plain = StatsAccumulator()
    plain.add("n", ROW_DECODER.decode_lines(lines))
    assert plain.summary(FACTS).busiest_syscalls == ()
    assert attrs_without_syscalls(plain.summary(FACTS)) == attrs_without_syscalls(summary_of([("n", rows)]))


def test_the_json_object_has_exactly_the_keys_of_the_issue() -> None:
    got = summary_of([("n", [_example_row()])]).to_json()
    assert list(got) == STATS_KEYS
    assert got["nodes"] == ["n"] and got["workloads"] == {"no-gpu": 1} and got["frameworks"] == {"pytorch": 1}


def test_skip_reports_name_each_damaged_file_and_count_lines_by_kind() -> None:
    tally = SkipTally()
    tally.line("a.jsonl", NOT_JSON)
    tally.line("a.jsonl", NOT_A_ROW, 2)
    other = SkipTally()
    other.line("live.jsonl", TORN)
    other.damaged("s.jsonl.zst", "truncated zstd data")
    tally.merge(other)
    assert tally.total_lines == 4
    assert tally.report() == (
        "skipped the rest of s.jsonl.zst: truncated zstd data",
        "skipped 4 lines (1 torn last line, 1 not JSON, 2 not rows) in a.jsonl (3), live.jsonl (1)",
    )
    assert all("\n" not in sentence for sentence in tally.report())
    assert SkipTally().report() == ()


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30),
    st.lists(st.integers(0, 30), max_size=4),
)
def test_syscall_sums_are_exact_for_any_finite_rate_and_any_split(
    rates: list[float], cuts: list[int]
) -> None:
    """Each rate counts as its value in units of 2**-80 calls/s, truncated toward zero, exactly:
    even a rate whose product with 2**80 is beyond a double (1e300); read in parts split anywhere
    and merged, the sums are the same integers."""
    rows = [
        attrs.evolve(_example_row(), unix_ms=1 + i, syscalls=(SyscallRate(name="read", rate_per_sec=rate),))
        for i, rate in enumerate(rates)
    ]
    exact = sum(int(Fraction(rate) * 2**SUM_UNIT_BITS) for rate in rates)  # int() truncates toward zero
    edges = sorted({0, len(rows), *(min(cut, len(rows)) for cut in cuts)})
    merged = StatsAccumulator(syscalls=True)
    for start, stop in itertools.pairwise(edges):
        part = StatsAccumulator(syscalls=True)
        part.add("n", views_of(rows[start:stop]))
        merged.merge(part)
    assert merged.syscall_sums == {"read": exact}
    try:
        expected = exact / (len(rates) << SUM_UNIT_BITS)  # every row is a poll of its own
    except OverflowError:
        expected = math.inf if exact > 0 else -math.inf
    assert dict(merged.summary(FACTS).busiest_syscalls)["read"] == expected


def test_a_mean_beyond_a_double_is_infinite_and_null_in_json() -> None:
    rows = [
        attrs.evolve(_example_row(), tgid=tgid, syscalls=(SyscallRate(name="read", rate_per_sec=1.7e308),))
        for tgid in (1, 2)
    ]
    acc = StatsAccumulator(syscalls=True)
    acc.add("n", views_of(rows))
    summary = acc.summary(FACTS)
    assert summary.busiest_syscalls == (("read", math.inf),)
    assert orjson.loads(orjson.dumps(summary.to_json()))["busiest_syscalls"] == [
        {"name": "read", "mean_per_s": None}
    ]


@given(batches, st.randoms(use_true_random=False))
def test_merged_states_answer_as_the_accumulators_they_were_made_from(
    parts: list[tuple[str, list[Row]]], rng: random.Random
) -> None:
    """Accumulators merged in any grouping, some of them through their merged state's JSON
    (`croft.domain.dataset.merged`: polls counted, held only where another poll falls among them),
    give the same summary as one accumulator of every row."""
    whole = StatsAccumulator(syscalls=True)
    for node, rows in parts:
        whole.add(node, views_of(rows))
    merged = StatsAccumulator(syscalls=True)
    shuffled = parts[:]
    rng.shuffle(shuffled)
    for node, rows in shuffled:
        one = StatsAccumulator(syscalls=True)
        one.add(node, views_of(rows))
        if rng.random() < 0.5:
            merged.merge(one)
            continue
        state, polls = (orjson.loads(orjson.dumps(section)) for section in stats_section(one))
        merge_stats(state, merged, functools.partial(times_of, polls))
    assert merged.summary(FACTS) == whole.summary(FACTS)
    assert merged.syscall_sums == whole.syscall_sums


def test_a_merged_states_polls_are_held_only_where_another_poll_falls_among_them() -> None:
    asked: list[str] = []

    def times(node: str) -> list[int]:
        asked.append(node)
        return [1000, 3000, 5000]

    section = {
        "rows": 3,
        "first_ms": 1000,
        "last_ms": 5000,
        "polls": {"a": [3, 1000, 5000]},
        "tgids": {"a": [1]},
        "processes": [[None, None]],
        "workloads": {"no-gpu": 3},
        "syscalls": {},
    }
    acc = StatsAccumulator(syscalls=True)
    merge_stats(section, acc, times)
    acc.polls["a"].update({500, 7000})  # a live file's polls, before and after
    assert acc.summary(FACTS).polls == 5 and asked == []
    acc.polls["a"].update({3000, 4000})  # one of its own, and one between two of them
    assert acc.summary(FACTS).polls == 6 and asked == ["a"]
    assert acc.polls["a"] == {500, 1000, 3000, 4000, 5000, 7000} and not acc.poll_blocks
