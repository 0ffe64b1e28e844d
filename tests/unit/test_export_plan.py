"""Laws of croft export's pure decisions: partitions, part names, the incremental plan, the state."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.export import (
    BadState,
    Exported,
    Source,
    decode_state,
    encode_state,
    hour_of,
    part_path,
    partition_value,
    plan_export,
)

names = st.text(min_size=1, max_size=20)
sources = st.builds(
    Source,
    node=st.sampled_from(["gpu-a", "gpu-b", "odd node/=x"]),
    name=st.sampled_from(["croft-dataset.jsonl", "croft-dataset-20261020T141910Z.jsonl.zst"]),
    size_bytes=st.integers(0, 10),
    checksum=st.sampled_from(["aa", "bb"]),
)


@given(st.integers(-(2**40), 2**41))
def test_the_hour_is_the_utc_hour_of_the_row(unix_ms: int) -> None:
    moment = dt.datetime.fromtimestamp(unix_ms / 1000, dt.UTC)
    assert hour_of(unix_ms) == f"{moment.year:04d}{moment.month:02d}{moment.day:02d}T{moment.hour:02d}"


@given(names, names)
def test_partition_values_are_one_level_and_tell_names_apart(a: str, b: str) -> None:
    for value in (partition_value(a), partition_value(b)):
        assert "/" not in value and "=" not in value and value.isascii()
    assert (partition_value(a) == partition_value(b)) == (a == b)


def test_a_part_is_named_by_node_hour_and_source() -> None:
    assert (
        part_path("gpu-a", "20261020T14", "croft-dataset-20261020T141910Z.jsonl.zst")
        == "node=gpu-a/hour=20261020T14/part-croft-dataset-20261020T141910Z.parquet"
    )
    assert part_path("a b", "20261020T14", "croft-dataset.jsonl").startswith("node=a%20b/")


@given(st.lists(sources, unique_by=lambda s: s.key), st.lists(sources, unique_by=lambda s: s.key))
def test_the_plan_exports_exactly_what_changed(now: list[Source], before: list[Source]) -> None:
    state = {s.key: Exported(s.size_bytes, s.checksum, (f"p/{s.name}",)) for s in before}
    plan = plan_export(now, state)
    assert {s.key for s in plan.export} | {s.key for s in plan.unchanged} == {s.key for s in now}
    for source in plan.unchanged:
        assert (state[source.key].size_bytes, state[source.key].checksum) == (
            source.size_bytes,
            source.checksum,
        )
    for source in plan.export:
        known = state.get(source.key)
        assert known is None or (known.size_bytes, known.checksum) != (source.size_bytes, source.checksum)
        assert plan.stale[source.key] == (known.parts if known else ())


@given(st.lists(sources, unique_by=lambda s: s.key), st.lists(sources, unique_by=lambda s: s.key))
def test_a_plan_carried_out_leaves_nothing_to_export(now: list[Source], before: list[Source]) -> None:
    state = {s.key: Exported(s.size_bytes, s.checksum, ()) for s in before}
    plan = plan_export(now, state)
    done = {**state, **{s.key: Exported(s.size_bytes, s.checksum, ()) for s in plan.export}}
    again = plan_export(now, done)
    assert again.export == () and again.unchanged == tuple(now)


@given(st.lists(sources, unique_by=lambda s: s.key))
def test_the_state_round_trips(done: list[Source]) -> None:
    state = {
        s.key: Exported(s.size_bytes, s.checksum, (part_path(s.node, "20261020T14", s.name),)) for s in done
    }
    assert decode_state(encode_state(state)) == state


ENTRY = {"node": "a", "name": "b", "size_bytes": 1, "checksum": "c", "parts": []}


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"version": 99, "sources": []},
        {"version": 1, "sources": {}},
        {"version": 1, "sources": [{"node": "a"}]},
        {
            "version": 1,
            "sources": [{"node": "a", "name": "b", "size_bytes": 1.5, "checksum": "c", "parts": []}],
        },
        {
            "version": 1,
            "sources": [{"node": "a", "name": "b", "size_bytes": 1, "checksum": "c", "parts": ["../x"]}],
        },
        {
            "version": 1,
            "sources": [{"node": "a", "name": "b", "size_bytes": 1, "checksum": "c", "parts": ["/etc"]}],
        },
    ],
)
def test_a_foreign_state_is_refused(value: object) -> None:
    with pytest.raises(BadState):
        decode_state(value)


def test_a_version_1_state_exports_every_source_again_replacing_its_parts() -> None:
    """Version 1 parts hold other columns (`unix_ms` was the timestamp): a re-run must not leave an
    export directory with two schemas, so every source is exported again and its old parts go."""
    part = part_path("a", "20261020T14", "croft-dataset.jsonl")
    old = {"version": 1, "sources": [{**ENTRY, "name": "croft-dataset.jsonl", "parts": [part]}]}
    state = decode_state(old)
    source = Source("a", "croft-dataset.jsonl", 1, "c")  # the same size and checksum as then
    plan = plan_export([source], state)
    assert plan.export == (source,) and plan.stale[source.key] == (part,)
