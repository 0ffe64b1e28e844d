"""Wall clocks that step back and forward (NTP, a VM resumed, an operator), against the pure
rotation and retention planners, and against the writer: ages within a run are measured on the
monotonic clock, a new segment never gets a name below one on disk, and retention never deletes the
segment just written."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import (
    MS_PER_DAY,
    Limits,
    LiveFile,
    Naming,
    Segment,
    SegmentName,
    next_name,
    plan_retention,
    plan_rotation,
)
from tests.helpers.faulty_disk import FaultyDisk

NAMING = Naming.for_live("croft-dataset.jsonl")
T0_MS = 1_792_505_950_473
HOUR_MS = 3_600_000
LIMITS = Limits(rotate_secs=60, rotate_bytes=1 << 20, retain_days=1, retain_bytes=1 << 30)

# One poll's clock step: the monotonic clock advances 2 s; the wall clock advances 2 s and now and
# then steps back or forward by up to two days.
steps = st.lists(
    st.one_of(
        st.just(0),
        st.just(0),
        st.just(0),
        st.integers(-2 * MS_PER_DAY, 2 * MS_PER_DAY),
        st.sampled_from([-HOUR_MS, HOUR_MS, -MS_PER_DAY - HOUR_MS, 40 * MS_PER_DAY]),
    ),
    min_size=1,
    max_size=200,
)


@given(st.lists(st.integers(0, 4_102_444_800_000), min_size=1, max_size=40))
def test_names_given_in_any_order_sort_in_the_order_given(starts: list[int]) -> None:
    """`name order is time order` means the order segments were written in, whatever the wall
    clock said: a start below the newest name on disk takes the newest's second, one clash up."""
    taken: list[SegmentName] = []
    for start in starts:
        seg = next_name(start, taken)
        assert all(seg > t for t in taken)
        assert all(NAMING.compressed(seg) > NAMING.compressed(t) for t in taken)
        taken.append(seg)


@given(st.integers(-30 * MS_PER_DAY, 30 * MS_PER_DAY), st.integers(0, 7200))
def test_rotation_age_is_measured_on_the_monotonic_clock(step_ms: int, elapsed_s: int) -> None:
    """A live file whose first row came at monotonic 0 is closed exactly when `rotate_secs` have
    passed on the monotonic clock, whatever the wall clock did meanwhile."""
    live = LiveFile(size_bytes=100, first_row_ms=T0_MS, first_row_monotonic_ns=0)
    now_ms = T0_MS + elapsed_s * 1000 + step_ms
    rotation = plan_rotation(live, now_ms, LIMITS, (), now_monotonic_ns=elapsed_s * 1_000_000_000)
    assert (rotation is not None) == (elapsed_s >= LIMITS.rotate_secs)


@given(st.integers(0, 400 * MS_PER_DAY), st.integers(0, 5))
def test_retention_never_deletes_the_segment_just_written(now_ms: int, extra: int) -> None:
    """Whatever `now` says (a clock stepped forward a year), the segment just written stays, and
    with it everything newer."""
    segments = [
        Segment(
            SegmentName(k * HOUR_MS), (NAMING.compressed(SegmentName(k * HOUR_MS)),), 1 << 30, k * HOUR_MS
        )
        for k in range(1 + extra)
    ]
    plan = plan_retention(
        segments,
        now_ms,
        Limits(retain_days=1, retain_bytes=1 << 30),
        live_bytes=1 << 30,
        keep=segments[-1].name,
    )
    assert segments[-1].name not in [d.segment for d in plan.delete]


@given(steps)
@settings(deadline=None)
def test_a_run_through_stepping_clocks_keeps_names_in_order_and_its_newest_segment(
    wall_steps: list[int],
) -> None:
    """The writer's decisions, played over a clock sequence: each poll writes 50 KB; rotation by
    age (monotonic) and size; every segment named after the ones before it; retention by age (this
    run's segments by their monotonic age) never deletes the segment just closed."""
    wall, mono_ns = T0_MS, 0
    live = LiveFile(0, None)
    on_disk: list[Segment] = []
    closed_at_ns: dict[SegmentName, int] = {}
    created: list[SegmentName] = []
    for step in wall_steps:
        wall += 2000 + step
        mono_ns += 2_000_000_000
        rotation = plan_rotation(live, wall, LIMITS, [s.name for s in on_disk], now_monotonic_ns=mono_ns)
        if rotation is not None:
            assert all(rotation.segment > s.name for s in on_disk)
            on_disk.append(
                Segment(rotation.segment, (NAMING.compressed(rotation.segment),), live.size_bytes, wall)
            )
            closed_at_ns[rotation.segment] = mono_ns
            created.append(rotation.segment)
            live = LiveFile(0, None)
        if live.first_row_ms is None:
            live = LiveFile(0, wall, first_row_monotonic_ns=mono_ns)
        live = LiveFile(
            live.size_bytes + 50_000, live.first_row_ms, first_row_monotonic_ns=live.first_row_monotonic_ns
        )
        ages = {name: (mono_ns - at) // 1_000_000 for name, at in closed_at_ns.items()}
        plan = plan_retention(
            on_disk, wall, LIMITS, live_bytes=live.size_bytes, ages_ms=ages, keep=max(created, default=None)
        )
        gone = {d.segment for d in plan.delete}
        if created:
            assert created[-1] not in gone
        # Nothing this run wrote less than retain_days ago (monotonic) goes by age.
        assert all(ages[name] > LIMITS.retain_days * MS_PER_DAY for name in gone)
        on_disk = [s for s in on_disk if s.name not in gone]
    names = [NAMING.compressed(s) for s in created]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_the_writer_names_by_run_order_and_rotates_by_monotonic_age_when_the_wall_steps_back(
    tmp_path: Path,
) -> None:
    """A real writer: the wall clock steps back an hour between two rotations; the second
    segment's name still sorts after the first's, and rotation by age waits for monotonic time."""
    live = tmp_path / "croft-dataset.jsonl"
    writer = DatasetWriter(
        live,
        Limits(rotate_secs=10, rotate_bytes=1 << 30, retain_days=1, retain_bytes=1 << 30),
        background=False,
    )
    mono = 0
    wall = T0_MS
    for poll in range(12):
        mono += 2_000_000_000
        wall += 2000 - (HOUR_MS if poll == 6 else 0)
        writer.append(b'{"row": %d}\n' % poll, wall, monotonic_ns=mono)
    writer.compress_now()
    writer.close()
    segments = sorted(p.name for p in tmp_path.glob("croft-dataset-*.jsonl.zst"))
    assert len(segments) == 2  # at monotonic 12 s and 24 s: ages are not fooled by the step
    first, second = segments
    assert second > first


def test_the_once_a_minute_warning_keeps_its_minute_when_the_wall_clock_steps_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk drops every poll's rows; the warning comes once a minute of monotonic time, not
    silenced for an hour by a wall clock stepped back an hour."""
    writer = DatasetWriter(tmp_path / "croft-dataset.jsonl", LIMITS, background=False, disk=FaultyDisk(at=0))
    with caplog.at_level(logging.WARNING, "croft.dataset"):
        for poll in range(65):  # 130 s of polls
            step = -HOUR_MS if poll == 10 else 0
            writer.append(b'{"row": 1}\n', T0_MS + poll * 2000 + step, monotonic_ns=poll * 2_000_000_000)
    writer.close()
    warnings = [r for r in caplog.records if "dropping rows" in r.getMessage()]
    assert len(warnings) == 3  # at 0 s, 60 s and 120 s
