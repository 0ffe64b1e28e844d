"""The stats core: accumulators merge in any order, and skip reports are one sentence a line."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset import codec
from croft.domain.dataset.row import Row, SyscallRate
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TORN, SkipTally
from croft.domain.dataset.summary import BUSIEST_SYSCALLS, SUM_UNIT_BITS, FileFacts, Stats, StatsAccumulator
from tests.helpers import strategies as s
from tests.helpers.spec_keys import STATS_KEYS

FACTS = FileFacts(files=1, compressed=0, bytes_on_disk=10)


def _example_row() -> Row:
    from tests.helpers.rows import seq_row

    return seq_row(1, 1_792_505_950_473)


def views_of(rows: list[Row]) -> list[Row]:
    """The rows as a reader gets them: written, then read back."""
    return [codec.decode_row(codec.encode_row(r)) for r in rows]


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
        msgspec.structs.replace(
            _example_row(), unix_ms=1 + i, syscalls=(SyscallRate(name=name, rate_per_sec=rate),)
        )
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
    acc.add(
        "n", views_of([msgspec.structs.replace(_example_row(), unix_ms=ms, syscalls=()) for ms in (1, 2, 3)])
    )
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
    plain = StatsAccumulator()
    plain.add("n", views_of(rows))
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
        msgspec.structs.replace(
            _example_row(), unix_ms=1 + i, syscalls=(SyscallRate(name="read", rate_per_sec=rate),)
        )
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
        msgspec.structs.replace(
            _example_row(), tgid=tgid, syscalls=(SyscallRate(name="read", rate_per_sec=1.7e308),)
        )
        for tgid in (1, 2)
    ]
    acc = StatsAccumulator(syscalls=True)
    acc.add("n", views_of(rows))
    summary = acc.summary(FACTS)
    assert summary.busiest_syscalls == (("read", math.inf),)
    assert msgspec.json.decode(msgspec.json.encode(summary.to_json()))["busiest_syscalls"] == [
        {"name": "read", "mean_per_s": None}
    ]
