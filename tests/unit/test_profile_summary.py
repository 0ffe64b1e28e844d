"""The profile core: p95 as numpy computes it, prefixes, windows, one value per poll, merging."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.profile import (
    ContainerTrack,
    ProfileAccumulator,
    Spread,
    percentile,
    prefix_error,
    profile_of,
)
from croft.domain.dataset.row import Row
from tests.helpers.rows import seq_row
from tests.helpers.spec_keys import PROFILE_KEYS

finite = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=60), st.floats(min_value=0, max_value=100))
def test_percentile_is_numpys_default_linear_interpolation(values: list[float], q: float) -> None:
    numpy = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12, abs=1e-9)


@given(st.lists(finite, min_size=1, max_size=60))
def test_p95_lies_between_the_median_and_the_maximum(values: list[float]) -> None:
    assert percentile(values, 50) <= percentile(values, 95) <= max(values)
    assert percentile(values, 0) == min(values) and percentile(values, 100) == max(values)


def test_p95_of_known_values() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0
    assert Spread.of([1.0, 2.0, 3.0, 4.0]) == Spread(mean=2.5, p95=pytest.approx(3.85), max=4.0)


@pytest.mark.parametrize(
    ("prefix", "problem"),
    [
        ("33813f5d", None),
        ("ABCD", None),
        ("abc", "too short"),
        ("", "not hexadecimal"),
        ("3381-f5d", "not hex"),
    ],
)
def test_a_prefix_must_be_four_hex_digits_or_more(prefix: str, problem: str | None) -> None:
    got = prefix_error(prefix)
    assert got is None if problem is None else (got is not None and problem in got)


def row(container: int, unix_ms: int, tgid: int = 1, **cgroup: float) -> Row:
    base = seq_row(tgid, unix_ms, container=container)
    return msgspec.structs.replace(base, cgroup_usage=msgspec.structs.replace(base.cgroup_usage, **cgroup))


def feed(acc: ProfileAccumulator, node: str, *rows: Row) -> ProfileAccumulator:
    for r in rows:
        acc.add(node, r)
    return acc


CID_1 = f"{1:064x}"
CID_2 = f"{2:064x}"


def test_rows_of_every_matching_container_are_kept_apart_and_others_ignored() -> None:
    acc = feed(ProfileAccumulator("0000", None, None), "n", row(1, 10), row(2, 10), row(1, 12))
    assert acc.matching_ids() == (CID_1, CID_2)
    only = feed(ProfileAccumulator(CID_1[:-1] + "9", None, None), "n", row(1, 10))
    assert only.matching_ids() == ()


def test_a_poll_is_a_node_and_time_and_takes_the_largest_figures_of_its_rows() -> None:
    acc = feed(
        ProfileAccumulator(CID_1, None, None),
        "a",
        row(1, 10, tgid=1, cpu_cores=1.0, memory_bytes=100),
        row(1, 10, tgid=2, cpu_cores=2.0, memory_bytes=50),
        row(1, 12, tgid=1, cpu_cores=4.0, memory_bytes=300),
    )
    feed(acc, "b", row(1, 10, tgid=1, cpu_cores=3.0, memory_bytes=200))
    got = profile_of(CID_1, acc.tracks[CID_1], None, None)
    assert got is not None
    assert (got.polls, got.processes, got.nodes) == (3, 3, ("a", "b"))
    assert got.spreads[0] == Spread(mean=3.0, p95=pytest.approx(3.9), max=4.0)
    assert got.spreads[1].max == 300 and got.spreads[1].mean == 200
    assert (got.from_ms, got.to_ms) == (10, 12)


def test_the_window_is_inclusive_and_an_empty_window_has_no_profile() -> None:
    rows = [row(1, t) for t in (10, 20, 30, 40)]
    acc = feed(ProfileAccumulator(CID_1, 20, 30), "n", *rows)
    got = profile_of(CID_1, acc.tracks[CID_1], 20, 30)
    assert got is not None and (got.polls, got.from_ms, got.to_ms) == (2, 20, 30)
    empty = feed(ProfileAccumulator(CID_1, 50, 60), "n", *rows)
    assert profile_of(CID_1, empty.tracks[CID_1], 50, 60) is None
    assert (empty.tracks[CID_1].first_ms, empty.tracks[CID_1].last_ms) == (10, 40)


def test_gpu_poll_share_counts_polls_where_any_process_holds_a_gpu() -> None:
    acc = feed(
        ProfileAccumulator(CID_1, None, None),
        "n",
        msgspec.structs.replace(row(1, 10, tgid=1), workload="gpu-held"),
        row(1, 10, tgid=2),
        msgspec.structs.replace(row(1, 12), workload="gpu-onset"),
        row(1, 14),
        row(1, 16),
    )
    got = profile_of(CID_1, acc.tracks[CID_1], None, None)
    assert got is not None and got.gpu_poll_share == 0.5


polls = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 20), st.integers(1, 4), st.floats(0, 64)), max_size=30
)


@given(polls, st.integers(0, 30))
def test_merging_split_accumulators_gives_the_same_profile(
    data: list[tuple[str, int, int, float]], cut: int
) -> None:
    def acc_of(items: list[tuple[str, int, int, float]]) -> ProfileAccumulator:
        acc = ProfileAccumulator(CID_1[:8], None, None)
        for node, t, tgid, cores in items:
            feed(acc, node, row(1, t, tgid=tgid, cpu_cores=cores))
        return acc

    whole = acc_of(data)
    merged = acc_of(data[:cut])
    merged.merge(acc_of(data[cut:]))
    if not data:
        assert merged.matching_ids() == ()
        return
    a = profile_of(CID_1, whole.tracks[CID_1], None, None)
    b = profile_of(CID_1, merged.tracks[CID_1], None, None)
    assert a == b


def test_the_json_object_has_exactly_the_keys_of_the_issue() -> None:
    track = ContainerTrack()
    track.add_poll(("n", 5), (1.0, 2048.0, 0.25, 3.0, 1.0, None, None))
    got = profile_of(CID_1, track, None, None)
    assert got is not None
    out = got.to_json()
    assert list(out) == PROFILE_KEYS
    assert out["memory_bytes"] == {"mean": 2048.0, "p95": 2048.0, "max": 2048}
    assert out["cpu_throttled_fraction"] == {"mean": 0.25, "p95": 0.25, "max": 0.25}
