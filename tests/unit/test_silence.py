"""A collector that writes nothing says so: at start without --watch, then once more than 15
polls have passed without a row, and every 150 polls while that lasts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.app.collector import Pipeline
from croft.domain.collector.selection import IDLE_EVERY
from croft.domain.collector.silence import REPEAT_POLLS, absent_figures, silence_warning, start_notice
from tests.helpers.snapshots import HOST, config, poll, proc


class ListSink:
    def __init__(self) -> None:
        self.appended: list[bytes] = []

    def append(self, lines: bytes, now_ms: int, monotonic_ns: int | None = None) -> int:
        self.appended.append(lines)
        return lines.count(b"\n")

    def close(self) -> None:
        pass


def test_the_warnings_name_the_cause_and_the_fix() -> None:
    assert silence_warning(IDLE_EVERY, ()) is None
    assert silence_warning(16, ()) == (
        "nothing written for 16 polls: no GPU holder, and no --watch (WATCH_CGROUPS) to write other "
        "processes; pass e.g. --watch kubepods,system.slice/docker"
    )
    assert silence_warning(16, ("kubepods", "ux-test")) == (
        "nothing written for 16 polls: no GPU holder, and no process in a cgroup under --watch "
        "kubepods,ux-test; compare it with the paths in /proc/<pid>/cgroup"
    )
    assert start_notice(()) is not None and "only GPU holders are written" in (start_notice(()) or "")
    assert start_notice(("kubepods",)) is None


@given(st.integers(min_value=0, max_value=5000))
def test_warned_once_past_the_idle_period_then_every_five_minutes(polls: int) -> None:
    warned = silence_warning(polls, ()) is not None
    assert warned == (polls >= IDLE_EVERY + 1 and (polls - IDLE_EVERY - 1) % REPEAT_POLLS == 0)


def test_a_pipeline_watching_nothing_warns_and_a_matching_process_silences_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="croft.run")
    pipeline = Pipeline(config(watch=("nothing-here",)), ListSink())
    unwatched = proc(100, cgroups=HOST)
    for second in range(40):
        pipeline.feed(poll(second * 2, (unwatched,)))
    warnings = [r.getMessage() for r in caplog.records if "nothing written" in r.getMessage()]
    assert warnings == [
        "nothing written for 16 polls: no GPU holder, and no process in a cgroup under --watch "
        "nothing-here; compare it with the paths in /proc/<pid>/cgroup"
    ]
    caplog.clear()
    watched = Pipeline(config(), ListSink())
    for second in range(40):
        watched.feed(poll(second * 2, (proc(100),)))
    assert not [r for r in caplog.records if "nothing written" in r.getMessage()]


def test_a_watch_that_matches_no_cgroup_is_found_on_a_real_tree(tmp_path: Path) -> None:
    from croft.adapters.host.cgroup_ids import watched_roots
    from croft.domain.collector.silence import unmatched_watch

    (tmp_path / "kubepods.slice" / "kubepods-burstable.slice").mkdir(parents=True)
    (tmp_path / "system.slice" / "docker-ab.scope").mkdir(parents=True)
    assert watched_roots(str(tmp_path), ("kubepods",))
    assert watched_roots(str(tmp_path), ("system.slice/docker",))
    assert not watched_roots(str(tmp_path), ("kubepod-typo", "ux-test"))
    assert unmatched_watch(("kubepod-typo", "ux-test"), "/sys/fs/cgroup") == (
        "--watch kubepod-typo,ux-test matches no cgroup under /sys/fs/cgroup now: only GPU holders are "
        "written until one appears; compare the prefixes with the paths in /proc/<pid>/cgroup"
    )


def test_the_start_line_names_the_figures_the_layout_cannot_give() -> None:
    full_v2 = absent_figures("v2", frozenset(), frozenset({"cpu", "memory", "io"}), psi=True)
    assert full_v2 is None
    hybrid = absent_figures(
        "hybrid", frozenset({"cpu", "cpuacct", "memory"}), frozenset({"hugetlb"}), psi=True
    )
    assert hybrid == (
        "hybrid cgroups: a row whose cgroup is a v2 path gets no memory, OOM kills or CPU throttling (bound "
        "to cgroup v1 here: the v1 cgroup it also sits in is another cgroup); one whose cgroup is a v1 "
        "path gets no PSI pressure (cgroup v1 has none); these are left out of the rows, never written 0"
    )
    v1 = absent_figures("v1", frozenset({"cpu", "cpuacct"}), frozenset(), psi=False)
    assert v1 == (
        "cgroup figures this host cannot give, left out of every row: PSI pressure (cgroup v1 has "
        "none); memory and OOM kills (no v1 memory controller)"
    )
    bare_v2 = absent_figures("v2", frozenset(), frozenset({"io"}), psi=False)
    assert bare_v2 is not None and "CPU throttling (the v2 tree offers no cpu controller)" in bare_v2
    assert "PSI pressure" in bare_v2 and "memory and OOM kills" in bare_v2
    assert absent_figures("none", frozenset(), frozenset(), psi=False, root="/x") == (
        "no cgroups under /x: no row has cgroup figures (cgroup_usage is empty)"
    )
