"""croft collect's per-node plan: its laws as properties, and the cases by name."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.http import Index, IndexEntry, is_safe_name
from croft.domain.dataset.rotation import Naming
from croft.domain.dataset.transfer import (
    OVERLAP_BYTES,
    Fetch,
    LocalFile,
    index_problem,
    part_name,
    plan_node,
    saved_name,
    segment_candidates,
)

LIVE = "croft-dataset.jsonl"
NAMING = Naming.for_live(LIVE)
SEG = "croft-dataset-20261020T130000Z.jsonl"
ZST = SEG + ".zst"

names = st.sampled_from(
    [LIVE, SEG, ZST, "croft-dataset-20261020T140000Z.jsonl.zst", "../x.jsonl", "/etc/passwd", ".hidden",
     "other", "a/b", "croft-dataset-20261020T130000Z_001.jsonl.zst"]
)  # fmt: skip
remote = st.lists(st.builds(IndexEntry, names, st.integers(0, 10_000), st.integers(0, 5)), max_size=8)
local = st.lists(
    st.builds(LocalFile, st.one_of(names, names.map(part_name)), st.integers(0, 10_000), st.integers(0, 5)),
    max_size=8,
    unique_by=lambda f: f.name,
)


@given(remote, local)
def test_only_safe_dataset_names_from_the_index_are_fetched(
    files: list[IndexEntry], here: list[LocalFile]
) -> None:
    plan = plan_node(Index(LIVE, tuple(files)), here)
    listed = {e.name for e in files}
    for fetch in plan.fetches:
        assert fetch.name in listed and is_safe_name(fetch.name)
        assert fetch.name == LIVE or NAMING.parse(fetch.name) is not None
        assert 0 <= fetch.have_bytes <= fetch.size_bytes or (fetch.live and not fetch.into_part)
        assert fetch.overlap_bytes == min(fetch.have_bytes, OVERLAP_BYTES)
    assert {n for n, _ in plan.refused} <= listed
    assert all(n.startswith(".") and n.endswith(".part") for n in plan.stale_parts)


@given(remote, local)
def test_a_complete_segment_is_never_fetched_again(files: list[IndexEntry], here: list[LocalFile]) -> None:
    plan = plan_node(Index(LIVE, tuple(files)), here)
    sizes = {f.name: f.size_bytes for f in here}
    for fetch in plan.fetches:
        if not fetch.live and sizes.get(fetch.name) == fetch.size_bytes:
            assert fetch.supersedes is not None  # only to retire the plain copy beside it


@given(remote, local)
def test_a_landed_copy_is_replaced_only_through_set_aside(
    files: list[IndexEntry], here: list[LocalFile]
) -> None:
    plan = plan_node(Index(LIVE, tuple(files)), here)
    landed = {f.name for f in here}
    for fetch in plan.fetches:
        if fetch.into_part and fetch.name in landed and fetch.have_bytes != fetch.size_bytes:
            assert fetch.replaces == fetch.name


def test_the_cases_by_name() -> None:
    index = Index(LIVE, (IndexEntry(ZST, 500, 1), IndexEntry(LIVE, 900, 7)))
    assert plan_node(index, []).fetches == (Fetch(ZST, 500, 1), Fetch(LIVE, 900, 7, live=True))
    same = [LocalFile(ZST, 500, 0), LocalFile(LIVE, 900, 7)]
    assert plan_node(index, same).fetches == () and plan_node(index, same).unchanged == (ZST, LIVE)
    grew = plan_node(index, [LocalFile(ZST, 500, 0), LocalFile(LIVE, 100, 3)]).fetches
    assert grew == (Fetch(LIVE, 900, 7, 100, into_part=False, live=True, why="grew"),)
    assert grew[0].wanted_bytes == 900
    (restarted,) = plan_node(index, [LocalFile(ZST, 500, 0), LocalFile(LIVE, 5000, 3)]).fetches
    assert restarted.have_bytes == 0 and restarted.replaces == LIVE and restarted.into_part
    (resumed, _) = plan_node(index, [LocalFile(part_name(ZST), 200, 0)]).fetches
    assert (
        resumed.have_bytes == 200 and resumed.overlap_bytes == 200 and resumed.why == "resumed at 200 bytes"
    )


def test_a_plain_segment_gives_way_to_its_compressed_copy() -> None:
    compressed = Index(LIVE, (IndexEntry(ZST, 50, 1),))
    (fetch,) = plan_node(compressed, [LocalFile(SEG, 700, 0)]).fetches
    assert fetch.supersedes == SEG
    plain = Index(LIVE, (IndexEntry(SEG, 700, 1),))
    assert plan_node(plain, [LocalFile(ZST, 50, 0)]).unchanged == (SEG,)


def test_refusals_and_stale_parts() -> None:
    index = Index(LIVE, (IndexEntry("../x.jsonl", 1, 1), IndexEntry(".tmp", 1, 1), IndexEntry("y.txt", 1, 1)))
    plan = plan_node(index, [LocalFile(part_name("gone.jsonl.zst"), 3, 0)])
    assert [reason for _, reason in plan.refused] == [
        "not a plain safe file name", "not a plain safe file name",
        "not one of the files of the dataset croft-dataset.jsonl",
    ]  # fmt: skip
    assert plan.stale_parts == (part_name("gone.jsonl.zst"),)
    assert index_problem(Index("../x.jsonl", ())) is not None
    assert index_problem(Index("croft-dataset.txt", ())) is not None
    assert index_problem(Index(LIVE, ())) is None


def test_a_replaced_copy_is_looked_for_in_its_segment_then_saved() -> None:
    first_ms = 1_792_505_950_473
    own, older, newest = (
        "croft-dataset-20261020T141910Z.jsonl.zst",
        "croft-dataset-20261020T130000Z.jsonl.zst",
        "croft-dataset-20261020T150000Z_001.jsonl",  # named after a clock stepped back
    )
    found = segment_candidates(first_ms, [older, own, LIVE, "x", newest], NAMING)
    assert found == (own, newest, older)
    name = saved_name(NAMING, first_ms, [])
    assert name == "croft-dataset-20261020T141910Z.saved.jsonl" and NAMING.parse(name) is None
    assert saved_name(NAMING, first_ms, [name]) == "croft-dataset-20261020T141910Z.saved-2.jsonl"
