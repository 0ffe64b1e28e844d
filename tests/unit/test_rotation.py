"""The pure rotation/retention decisions: names, limits, plan_rotation, plan_retention, recovery."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.rotation import (
    MS_PER_DAY,
    FileFact,
    Limits,
    LiveFile,
    Naming,
    Segment,
    SegmentName,
    limit_errors,
    next_name,
    plan_recovery,
    plan_retention,
    plan_rotation,
    segments_on_disk,
)
from croft.domain.utc import parse_stamp

NAMING = Naming.for_live("croft-dataset.jsonl")
YEAR_2100_MS = 4_102_444_800_000
instants = st.integers(min_value=0, max_value=YEAR_2100_MS)


# --- names -------------------------------------------------------------------------------------


def test_names_are_the_spec_examples() -> None:
    seg = SegmentName(parse_stamp("20261020T130000Z") or 0)
    assert NAMING.live == "croft-dataset.jsonl"
    assert NAMING.compressed(seg) == "croft-dataset-20261020T130000Z.jsonl.zst"
    assert NAMING.plain(SegmentName(seg.start_ms, 1)) == "croft-dataset-20261020T130000Z_001.jsonl"
    assert NAMING.temporary(seg) == ".croft-dataset-20261020T130000Z.jsonl.zst.tmp"


@given(st.sampled_from(["plain", "compressed", "temporary"]), instants, st.integers(0, 2000))
def test_every_segment_file_name_parses_back(kind: str, start_ms: int, clash: int) -> None:
    seg = SegmentName(start_ms // 1000 * 1000, clash)
    name = {"plain": NAMING.plain, "compressed": NAMING.compressed, "temporary": NAMING.temporary}[kind](seg)
    assert NAMING.parse(name) == (seg, kind)


@pytest.mark.parametrize(
    "name",
    [
        "croft-dataset.jsonl",
        "croft-dataset-20261020T130000Z_000.jsonl",
        "croft-dataset-20261020T130000Z.jsonl.tmp",
        ".croft-dataset-20261020T130000Z.jsonl.zst",
        "croft-dataset-20261020T130000Z.jsonl.zst.tmp",
        "other-20261020T130000Z.jsonl.zst",
        "croft-dataset-20261020T130000Z.jsonl.gz",
        "croft-dataset-20261020T130000Z-1.jsonl.zst",
    ],
)
def test_files_that_are_not_segments_are_not_parsed_as_segments(name: str) -> None:
    assert NAMING.parse(name) is None


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3000)), min_size=1, max_size=40))
def test_names_given_in_time_order_are_unique_and_sort_in_that_order(steps: list[tuple[int, int]]) -> None:
    # A clock that only moves forward, often within the same second (restarts, tiny segments).
    now_ms, taken, created = 1_792_505_950_473, [], []
    for jump_s, jump_ms in steps:
        now_ms += jump_s * 1000 + jump_ms
        seg = next_name(now_ms, taken)
        taken.append(seg)
        created.append(NAMING.compressed(seg))
    assert len(set(created)) == len(created)
    assert sorted(created) == created


# Names given in any order (a wall clock stepping back) sort in the order given:
# tests/unit/test_clock_jumps.py.


# --- limits ------------------------------------------------------------------------------------


def test_the_default_limits_are_valid() -> None:
    assert limit_errors(Limits()) == ()
    assert Limits() == Limits(3600, 1073741824, 30, 10737418240)


@pytest.mark.parametrize("field", ["rotate_secs", "rotate_bytes", "retain_days", "retain_bytes"])
@pytest.mark.parametrize("value", [0, -1])
def test_a_zero_or_negative_limit_is_named(field: str, value: int) -> None:
    errors = limit_errors(Limits(**{field: value}))
    assert len(errors) == 1
    assert f"--{field.replace('_', '-')} must be a positive" in errors[0]


def test_a_retention_smaller_than_one_rotation_is_an_error() -> None:
    (error,) = limit_errors(Limits(rotate_bytes=2 << 30, retain_bytes=1 << 30))
    assert "--retain-bytes" in error and "one rotation" in error
    (error,) = limit_errors(Limits(rotate_secs=3 * 86_400, retain_days=2))
    assert "--retain-days" in error and "one rotation" in error


# --- rotation ----------------------------------------------------------------------------------

limits_st = st.builds(
    Limits,
    rotate_secs=st.integers(1, 7200),
    rotate_bytes=st.integers(1, 1 << 31),
    retain_days=st.integers(1, 60),
    retain_bytes=st.integers(1, 1 << 35),
)
lives = st.builds(
    LiveFile,
    size_bytes=st.integers(0, 1 << 31),
    first_row_ms=st.none() | instants,
    left_by_earlier_run=st.booleans(),
)


@given(
    lives,
    instants,
    limits_st,
    st.lists(st.builds(SegmentName, instants.map(lambda ms: ms // 1000 * 1000), st.integers(0, 3))),
)
def test_rotation_follows_its_three_reasons_and_never_reuses_a_name(
    live: LiveFile, now_ms: int, limits: Limits, taken: list[SegmentName]
) -> None:
    rotation = plan_rotation(live, now_ms, limits, taken)
    start = now_ms if live.first_row_ms is None else live.first_row_ms
    due = live.size_bytes > 0 and (
        live.left_by_earlier_run
        or now_ms - start >= limits.rotate_secs * 1000
        or live.size_bytes >= limits.rotate_bytes
    )
    assert (rotation is not None) == due
    if rotation is not None:
        assert rotation.segment not in taken
        assert all(rotation.segment > t for t in taken)
        newest = max((t.start_ms for t in taken), default=0)
        assert rotation.segment.start_ms == max(start // 1000 * 1000, newest)


def test_a_live_file_left_by_an_earlier_run_becomes_a_segment_named_by_its_first_row() -> None:
    first = parse_stamp("20261020T130000Z") or 0
    live = LiveFile(size_bytes=10, first_row_ms=first + 999, left_by_earlier_run=True)
    rotation = plan_rotation(live, first + 5000, Limits())
    assert rotation is not None
    assert NAMING.compressed(rotation.segment) == "croft-dataset-20261020T130000Z.jsonl.zst"
    assert plan_rotation(LiveFile(0, None, left_by_earlier_run=True), first, Limits()) is None


# --- retention ---------------------------------------------------------------------------------


@st.composite
def segment_sets(draw: st.DrawFn) -> list[Segment]:
    starts = draw(st.lists(st.integers(0, 90 * 86_400), unique=True, max_size=25))
    segments = []
    for start_s in starts:
        name = SegmentName(start_s * 1000, draw(st.integers(0, 2)))
        kind = draw(st.sampled_from(["plain", "compressed"]))
        segments.append(
            Segment(
                name=name,
                files=((NAMING.plain if kind == "plain" else NAMING.compressed)(name),),
                size_bytes=draw(st.integers(0, 1 << 30)),
                last_write_ms=name.start_ms + draw(st.integers(0, 7200_000)),
                busy=draw(st.integers(0, 9)) == 0,
                kinds=frozenset({kind}),
            )
        )
    return segments


@given(segment_sets(), st.integers(0, 1 << 31), st.integers(0, 100 * MS_PER_DAY), limits_st)
def test_retention_laws(segments: list[Segment], live_bytes: int, now_ms: int, limits: Limits) -> None:
    plan = plan_retention(segments, now_ms, limits, live_bytes=live_bytes)
    ordered = sorted(segments, key=lambda s: s.name)
    deleted = [d.segment for d in plan.delete]
    kept = [s for s in ordered if s.name not in deleted]
    # The live file is never deleted; neither is a busy segment.
    assert all(NAMING.live not in d.files for d in plan.delete)
    assert not any(s.busy for s in ordered if s.name in deleted)
    # Only the oldest go: nothing younger than a kept segment is deleted.
    assert deleted == [s.name for s in ordered[: len(deleted)]]
    assert plan.kept_bytes == live_bytes + sum(s.size_bytes for s in kept)
    # Afterwards the total is within the limit, unless nothing but the live file is left, or the
    # oldest segment left is busy (its compression finishes first; the next plan goes on).
    assert plan.kept_bytes <= limits.retain_bytes or not kept or kept[0].busy
    # And it deletes no more than it must: the oldest kept one is neither too old nor in excess.
    if kept and not kept[0].busy:
        assert now_ms - kept[0].last_write_ms <= limits.retain_days * MS_PER_DAY
        assert plan.kept_bytes <= limits.retain_bytes


def test_retention_deletes_by_age_then_by_size_and_says_why() -> None:
    limits = Limits(retain_days=30, retain_bytes=300, rotate_bytes=100)
    day = MS_PER_DAY
    segs = [
        Segment(SegmentName(i * day), (NAMING.compressed(SegmentName(i * day)),), 100, i * day + 3600_000)
        for i in range(5)
    ]
    plan = plan_retention(segs, now_ms=30 * day + 3600_000 + 1, limits=limits, live_bytes=60)
    assert [d.segment.start_ms for d in plan.delete] == [0, day, 2 * day]
    assert "30 days" in plan.delete[0].reason
    assert "--retain-bytes 300" in plan.delete[1].reason
    assert plan.kept_bytes == 260  # the live file's 60 and two segments of 100


# --- what is on disk, and recovery -------------------------------------------------------------


def test_segments_on_disk_groups_files_and_ignores_the_live_file_and_strangers() -> None:
    seg = SegmentName(parse_stamp("20261020T130000Z") or 0)
    files = [
        FileFact("croft-dataset.jsonl", 500, 9),
        FileFact("notes.txt", 5, 9),
        FileFact(NAMING.plain(seg), 100, 7),
        FileFact(NAMING.temporary(seg), 10, 99),
    ]
    (found,) = segments_on_disk(files, NAMING, busy=seg)
    assert found == Segment(
        seg, (NAMING.temporary(seg), NAMING.plain(seg)), 110, 7, True, frozenset({"plain", "temporary"})
    )
    assert found.waiting


def test_recovery_finishes_or_redoes_what_a_crash_cut_short() -> None:
    a, b, c, d, e = (SegmentName(i * 1000) for i in range(5))

    def seg(name: SegmentName, *kinds: str) -> Segment:
        return Segment(name, (), 0, 0, kinds=frozenset(kinds))

    recovery = plan_recovery(
        [
            seg(a, "plain", "temporary"),  # cut short while compressing: redo
            seg(b, "plain", "compressed"),  # cut short between rename and removal: finish
            seg(c, "plain", "compressed"),  # a compressed copy that does not check out: redo
            seg(d, "temporary"),  # the only copy left: leave it alone
            seg(e, "compressed"),  # done
        ],
        NAMING,
        complete=frozenset({b}),
    )
    assert dict(recovery.remove).keys() == {NAMING.temporary(a), NAMING.plain(b), NAMING.compressed(c)}
    assert recovery.compress == (a, c)
    assert [name for name, _ in recovery.left_alone] == [NAMING.temporary(d)]
