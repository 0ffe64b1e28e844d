"""croft top's screen as pure functions: idle processes held from earlier polls, sort and filter,
the columns a width holds, keys, --at replay and the times users type."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from croft.domain.dataset.row import Pod, SyscallRate
from croft.domain.times import BadTime, duration_ms, parse_time
from croft.domain.top.cells import fit_cgroup, fit_parts, short_ids
from croft.domain.top.keys import Screen, decode_keys, hint_line, press
from croft.domain.top.layout import layout, lines
from croft.domain.top.replay import Replay
from croft.domain.top.table import HELD_POLLS, NodePoll, TopTable, View, build_table, stopped_note, to_json
from croft.domain.utc import iso_ms, readable
from tests.helpers.rows import T0_MS, make_row

MANY_CALLS = tuple(
    SyscallRate(name=name, rate_per_sec=rate)
    for name, rate in (
        ("clock_nanosleep", 9000.0),
        ("io_uring_enter", 800.0),
        ("futex", 282.0),
        ("sched_getaffinity", 20.0),
        ("read", 3.0),
    )
)


def golden_like() -> NodePoll:
    """Four processes of one workload; the idle one (pid 4) was last written 8 polls ago."""
    earlier = [
        make_row(pid, T0_MS - 2000 * k, cpu_cores=0.1 * pid) for k in range(14, 0, -1) for pid in (1, 2, 3)
    ]
    earlier.insert(6 * 3, make_row(4, T0_MS - 16_000, comm="idle-worker", cpu_cores=0.7, rss_bytes=5 << 20))
    newest = tuple(make_row(pid, T0_MS, cpu_cores=0.1 * pid, syscalls=MANY_CALLS) for pid in (1, 2, 3))
    return NodePoll("gpu-a", T0_MS, newest, tuple(earlier))


def test_an_idle_process_is_held_at_zero_with_the_age_of_its_row() -> None:
    table = build_table([golden_like()], T0_MS + 1000)
    assert table.total_rows == 4
    assert "4 processes (1 idle)" in table.header
    idle = table.rows[-1]
    cells = dict(zip([c.key for c in table.columns], idle.cells, strict=True))
    assert idle.idle and cells["pid"] == "4" and cells["comm"] == "idle-worker"
    assert (cells["cpu"], cells["net"], cells["io"], cells["syscalls"]) == ("0.0", "0", "0", "")
    assert (cells["rss"], cells["age"]) == ("5.0M", "16s")


def test_a_process_only_older_than_the_held_polls_is_gone() -> None:
    poll = golden_like()
    newest_only = attrs.evolve(poll, earlier=())
    assert build_table([newest_only], T0_MS).total_rows == 3
    assert HELD_POLLS == 15


def test_sort_keys_order_the_rows() -> None:
    rows = (
        make_row(
            30,
            T0_MS,
            cpu_cores=0.1,
            rss_bytes=9 << 30,
            syscalls=(SyscallRate(name="read", rate_per_sec=5.0),),
        ),
        make_row(
            10,
            T0_MS,
            cpu_cores=0.9,
            rss_bytes=1 << 20,
            syscalls=(SyscallRate(name="read", rate_per_sec=1.0),),
        ),
        make_row(
            20,
            T0_MS,
            cpu_cores=0.5,
            rss_bytes=2 << 20,
            syscalls=(SyscallRate(name="read", rate_per_sec=900.0),),
        ),
    )
    poll = [NodePoll("n", T0_MS, rows)]

    def pids(sort: str) -> list[str]:
        return [r.cells[1] for r in build_table(poll, T0_MS, view=View(sort=sort)).rows]

    assert pids("cpu") == ["10", "20", "30"]
    assert pids("memory") == ["30", "20", "10"]
    assert pids("syscalls") == ["20", "30", "10"]
    assert pids("pid") == ["10", "20", "30"]


def test_the_filter_matches_container_cgroup_framework_workload_or_command() -> None:
    rows = (
        make_row(1, T0_MS, comm="trainer", framework="jax", workload="gpu-held"),
        make_row(2, T0_MS, comm="etl", container_id=None, cwd="/srv/etl", framework=None),
        make_row(3, T0_MS, comm="web", container_id="ab" * 32, framework="vllm"),
    )
    poll = [NodePoll("n", T0_MS, rows)]

    def pids(text: str) -> list[str]:
        return sorted(r.cells[1] for r in build_table(poll, T0_MS, view=View(filter=text)).rows)

    assert pids("JAX") == ["1"] and pids("gpu-held") == ["1"]
    assert pids("user.slice") == ["2"] and pids("/srv/etl") == ["2"]
    assert pids("abab") == ["3"] and pids("33813f5d") == ["1"]
    assert pids("") == ["1", "2", "3"] and pids("nothing") == []
    table = build_table(poll, T0_MS, view=View(filter="vllm"))
    assert (table.matching, table.total_rows) == (1, 3)


def test_scrolling_is_clamped_to_the_last_full_page() -> None:
    rows = tuple(make_row(pid, T0_MS, cpu_cores=1 - pid / 100) for pid in range(1, 11))
    poll = [NodePoll("n", T0_MS, rows)]
    page = build_table(poll, T0_MS, 4, offset=3)
    assert [r.cells[1] for r in page.rows] == ["4", "5", "6", "7"] and page.first == 3
    last = build_table(poll, T0_MS, 4, offset=1 << 30)
    assert [r.cells[1] for r in last.rows] == ["7", "8", "9", "10"] and last.first == 6


def at_width(width: int | None) -> tuple[str, list[str]]:
    table = build_table([golden_like()], T0_MS + 1000)
    return lines(table, layout(table, width))


@pytest.mark.parametrize("width", [40, 60, 80, 100, 160])
def test_a_narrow_screen_drops_columns_but_keeps_pid_and_cpu(width: int) -> None:
    titles, rows = at_width(width)
    assert "PID" in titles.split() and "CPU%" in titles.split()
    for line in [titles, *rows]:
        assert len(line) <= width
    pid_end = titles.index("PID") + 3
    assert [row[:pid_end].split()[-1] for row in rows] == ["3", "2", "1", "4"]


def test_columns_are_dropped_in_priority_order_and_wide_screens_show_everything() -> None:
    # the syscalls (25 characters at least) are next and do not fit: nothing after them shows
    assert at_width(60)[0].split() == ["CONTAINER", "PID", "COMM", "CPU%", "THR%", "RSS"]
    assert at_width(80)[0].split() == [
        *("CONTAINER", "PID", "COMM", "CPU%", "THR%", "RSS", "AGE", "BUSIEST", "SYSCALLS")
    ]
    # a column joins only while the syscalls keep the 30 characters that read (two or three)
    assert at_width(90)[0].split() == [
        *("CONTAINER", "PID", "COMM", "WORKLOAD", "CPU%", "THR%", "RSS", "AGE", "BUSIEST", "SYSCALLS")
    ]
    assert at_width(120)[0].split() == [
        *("CONTAINER", "PID", "COMM", "WORKLOAD", "CPU%", "THR%", "PSI%", "RSS", "NET/s", "I/O/s", "SHORT"),
        *("AGE", "BUSIEST", "SYSCALLS"),
    ]
    wide_titles, wide_rows = at_width(300)
    assert wide_titles.split() == [
        *("CONTAINER", "PID", "COMM", "FRAMEWORK", "WORKLOAD", "CPU%", "THR%", "PSI%", "RSS", "NET/s"),
        *("I/O/s", "SHORT", "AGE", "CGROUP", "BUSIEST", "SYSCALLS"),
    ]
    # every syscall, whole, and the whole cgroup path
    assert wide_rows[0].endswith(
        "clock_nanosleep 9.0k/s  io_uring_enter 800/s  futex 282/s  sched_getaffinity 20/s  read 3/s"
    )
    assert (
        "/system.slice/docker-33813f5d0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5.scope"
        in wide_rows[0]
    )
    assert at_width(None) == (wide_titles, wide_rows)


KUBE_POD = "pod904f341f-15dc-47c0-bce2-167b5d41bb35"
CGROUPS = {
    # container id: its cgroup, as the kubelet's cgroupfs and systemd drivers, docker and systemd
    # name them (the container-id table's layouts)
    "abd70765cd741b352b86f73dcf7649a2ac90506e591ef522cb9ebe1ae6fdd69b": (
        f"/kubepods/besteffort/{KUBE_POD}/abd70765cd741b352b86f73dcf7649a2ac90506e591ef522cb9ebe1ae6fdd69b"
    ),
    "032b73284bb57b5cd3e89d320bb662a8c979cb061b943cfc46f57327e5920673": (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod17788b95_03b9_6d91_aba0_18ea9d19ee45"
        ".slice/cri-containerd-032b73284bb57b5cd3e89d320bb662a8c979cb061b943cfc46f57327e5920673.scope"
    ),
    "c85f0d46903715c8fcaf4a5acfa6cf3e53e6d093db87872d336b1a45282ee0bc": (
        "/system.slice/docker-c85f0d46903715c8fcaf4a5acfa6cf3e53e6d093db87872d336b1a45282ee0bc.scope"
    ),
}


def mixed_cgroups() -> NodePoll:
    """Containers of three runtimes' cgroup layouts and a host service, all busy."""
    rows = [
        make_row(10 + k, T0_MS, container_id=cid, cgroup=cgroup, comm=f"worker-{k}", syscalls=MANY_CALLS)
        for k, (cid, cgroup) in enumerate(CGROUPS.items())
    ]
    rows.append(
        make_row(
            2,
            T0_MS,
            container_id=None,
            cwd="/",
            comm="containerd",
            cgroup="/system.slice/containerd.service",
            syscalls=MANY_CALLS,
        )
    )
    return NodePoll("gpu-a", T0_MS, tuple(rows))


def cgroup_cells(width: int) -> dict[str, str]:
    """comm -> the CGROUP cell as drawn at `width` (stripped)."""
    table = build_table([mixed_cgroups()], T0_MS)
    titles, rows = lines(table, layout(table, width))
    start = titles.index("CGROUP")
    end = titles.index("BUSIEST")
    comm_at = titles.index("COMM")
    return {row[comm_at:].split()[0]: row[start:end].strip() for row in rows}


def test_short_ids_cut_container_ids_and_pod_uids_as_docker_ps_does() -> None:
    assert short_ids(CGROUPS["abd70765cd741b352b86f73dcf7649a2ac90506e591ef522cb9ebe1ae6fdd69b"]) == (
        "/kubepods/besteffort/pod904f341f…/abd70765cd74…"
    )
    assert short_ids(CGROUPS["032b73284bb57b5cd3e89d320bb662a8c979cb061b943cfc46f57327e5920673"]) == (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod17788b95….slice/"
        "cri-containerd-032b73284bb5….scope"
    )
    for unchanged in ("/system.slice/docker-c85f0d469037.scope", "/user.slice/user-1000.slice/s-3.scope"):
        assert short_ids(unchanged) == unchanged


@given(
    st.sampled_from([*CGROUPS.values(), "/system.slice/containerd.service", "/", "/init.scope"]),
    st.integers(min_value=1, max_value=200),
)
def test_a_cut_cgroup_is_whole_or_its_short_form_or_an_end_of_that(path: str, width: int) -> None:
    cell = fit_cgroup(path, width)
    assert len(cell) <= width
    short = short_ids(path)
    assert cell in (path, short) or (cell.startswith("…") and short.endswith(cell[1:]))
    if len(short) <= width:
        assert cell in (path, short)


def test_at_160_columns_every_cgroup_reads_beside_the_busiest_syscalls() -> None:
    """The cgroup column is no longer squeezed to its last 12 characters by the syscalls: at 160
    columns each cgroup shows its unit and container id (ids cut), and the busiest syscall still
    shows, whole."""
    cells = cgroup_cells(160)
    assert cells == {
        "worker-0": "…/besteffort/pod904f341f…/abd70765cd74…",
        "worker-1": "…/cri-containerd-032b73284bb5….scope",
        "worker-2": "/system.slice/docker-c85f0d469037….scope",
        "containerd": "/system.slice/containerd.service",
    }
    table = build_table([mixed_cgroups()], T0_MS)
    titles, rows = lines(table, layout(table, 160))
    assert all(len(line) <= 160 for line in [titles, *rows])
    assert titles.split()[:14] == [
        *("CONTAINER", "PID", "COMM", "FRAMEWORK", "WORKLOAD", "CPU%", "THR%", "PSI%", "RSS", "NET/s"),
        *("I/O/s", "SHORT", "AGE", "CGROUP"),
    ]
    assert all(row.endswith(" clock_nanosleep 9.0k/s  …") for row in rows), rows


@pytest.mark.parametrize("width", [80, 100, 120, 140, 160, 200, 240])
def test_a_shown_cgroup_names_its_unit_and_a_table_fits_its_width(width: int) -> None:
    table = build_table([mixed_cgroups()], T0_MS)
    titles, rows = lines(table, layout(table, width))
    assert all(len(line) <= width for line in [titles, *rows])
    assert {"PID", "CPU%", "COMM", "CONTAINER"} <= set(titles.split())
    if "CGROUP" not in titles:
        assert width < 140
        return
    for comm, cell in cgroup_cells(width).items():
        container = next((c for c in CGROUPS if f"worker-{list(CGROUPS).index(c)}" == comm), None)
        if container is None:
            assert cell.endswith("containerd.service")
        else:
            assert container[:12] in cell, (width, cell)  # the id, never cut to its last digits
            assert len(cell) >= 28 or cell == short_ids(CGROUPS[container])


def test_a_header_too_wide_leaves_out_whole_parts() -> None:
    header = build_table([golden_like()], T0_MS + 1000).header
    assert header.endswith("· 4 processes (1 idle) · 0 GPU holders")
    assert fit_parts(header, 200) == header
    assert fit_parts(header, len(header) - 1) == header.removesuffix(" · 0 GPU holders")
    assert fit_parts(header, 10) == header[:10]  # the first part alone is cut
    for width in range(1, len(header) + 1):
        assert len(fit_parts(header, width)) <= width


def test_syscall_names_are_never_cut_only_whole_ones_left_out() -> None:
    for width in range(70, 250, 7):
        _, rows = at_width(width)
        for row in rows:
            for name in ("clock_nanos", "io_uring_", "sched_getaff"):
                if name in row:
                    full = {
                        "clock_nanos": "clock_nanosleep ",
                        "io_uring_": "io_uring_enter ",
                        "sched_getaff": "sched_getaffinity ",
                    }
                    assert full[name] in row, (width, row)


def named_pods(count: int = 40) -> NodePoll:
    """Pods with names, command lines and syscall lists of every length, so that the widest cell
    of a column is on one page and not on another."""
    rows = []
    for k in range(count):
        row = make_row(
            500 + k,
            T0_MS,
            comm=f"w{k}" if k % 7 else "a-long-command-name",
            cpu_cores=1 - k / 100,
            syscalls=MANY_CALLS[: k % 5],
        )
        process = replace(row.process, cmdline=" ".join(["python3", "serve.py", *["--flag"] * (k % 9)]))
        pod = Pod(namespace="team-" + "x" * (k % 11), name=f"web-{k}", container="web")
        rows.append(replace(row, process=process, pod=pod))
    return NodePoll("gpu-a", T0_MS, tuple(rows))


def columns_at(table: TopTable, width: int) -> list[str]:
    return [c.key for c, w in zip(table.columns, layout(table, width), strict=True) if w is not None]


@pytest.mark.parametrize("poll", [golden_like, mixed_cgroups, named_pods])
def test_a_column_shown_at_one_width_shows_at_every_wider_one(poll: Callable[[], NodePoll]) -> None:
    """Columns follow the width steadily: the columns of a width are the first ones of the ranking
    (`Column.keep`), so widening never trades one column for another (at 80 columns NET/s, at 90
    CGROUP, was the old way)."""
    table = build_table([poll()], T0_MS + 1000)
    ranking = [c.key for c in sorted(table.columns, key=lambda c: (c.keep, table.columns.index(c)))]
    before: list[str] = []
    for width in range(1, 320):
        shown = columns_at(table, width)
        assert set(before) <= set(shown), (width, before, shown)
        assert sorted(shown, key=ranking.index) == ranking[: len(shown)], (width, shown)
        before = shown


@given(st.integers(min_value=40, max_value=260), st.integers(min_value=0, max_value=40))
def test_scrolling_never_changes_the_columns(width: int, offset: int) -> None:
    """The widths are those of every matching row, so a page without the widest cell of a column
    keeps the column as wide as the page with it."""
    whole = build_table([named_pods()], T0_MS)
    page = build_table([named_pods()], T0_MS, 8, offset=offset)
    assert layout(page, width) == layout(whole, width)


@given(st.integers(min_value=1, max_value=300))
def test_no_line_is_ever_wider_than_the_screen(width: int) -> None:
    titles, rows = at_width(width)
    assert all(len(line) <= width for line in [titles, *rows])


def test_the_stopped_note_after_five_missed_polls() -> None:
    poll = [golden_like()]
    assert stopped_note(poll, T0_MS + 9_999) is None
    assert (
        stopped_note(poll, T0_MS + 28_000)
        == "no new poll for 28 s: the collector has stopped, or writes elsewhere"
    )
    assert build_table(poll, T0_MS + 60_000, live=False).notes == ()


def test_terminal_bytes_decode_to_keys() -> None:
    assert decode_keys(b"q") == ["q"]
    assert decode_keys(b"\x1b[A\x1b[B\x1b[5~\x1b[6~\x1bOH\x1b[4~") == [
        "up",
        "down",
        "pageup",
        "pagedown",
        "home",
        "end",
    ]
    assert decode_keys(b"/etl\r") == ["/", "e", "t", "l", "enter"]
    assert decode_keys(b"\x1b") == ["escape"]
    assert decode_keys(b"\x1b[1;5Cx\x7f") == ["x", "backspace"]  # Ctrl-Right is unknown: dropped


def test_keys_sort_filter_scroll_step_and_quit() -> None:
    screen = Screen()
    for key in "m":
        screen = press(screen, key, 10)
    assert screen.view.sort == "memory"
    for key in ["/", "e", "t", "x", "backspace", "l", "enter"]:
        screen = press(screen, key, 10)
    assert screen.view.filter == "etl" and screen.typing is None
    assert "filter 'etl' (Esc clears)" in hint_line(screen, stepping=False)
    assert press(press(screen, "/", 10), "escape", 10).view.filter == "etl"  # Esc while typing: cancel
    assert press(screen, "escape", 10).view.filter == ""
    screen = press(press(screen, "pagedown", 10), "down", 10)
    assert screen.offset == 11 and press(screen, "home", 10).offset == 0
    assert press(Screen(), "up", 10).offset == 0
    stepping = Screen(step=2)
    assert press(stepping, "left", 10, steps=5).step == 1 and press(stepping, "]", 10, steps=3).step == 2
    assert press(Screen(), "left", 10).step is None
    assert press(Screen(), "q", 10).quit and not press(Screen(typing=""), "q", 10).quit
    assert (
        hint_line(Screen(), stepping=True)
        == "q quit · ? keys · c/m/s/p sort (CPU) · / filter · ←→ poll · ↑↓ scroll"
    )


def test_a_sort_key_twice_reverses_and_another_sorts_busiest_first_again() -> None:
    screen = press(Screen(), "c", 10)
    assert screen.view == View(sort="cpu", reverse=True)
    assert "sort (CPU, reversed)" in hint_line(screen, stepping=False)
    assert press(screen, "c", 10).view == View(sort="cpu", reverse=False)
    assert press(screen, "m", 10).view == View(sort="memory", reverse=False)
    assert press(press(Screen(offset=7), "p", 10), "p", 10).offset == 0


def test_slash_starts_a_new_filter_and_esc_keeps_the_one_before() -> None:
    screen = Screen(view=View(filter="etl"))
    typing = press(screen, "/", 10)
    assert typing.typing == ""  # not "etl": the new text replaces the filter in force
    for key in ["w", "e", "b", "enter"]:
        typing = press(typing, key, 10)
    assert typing.view.filter == "web"
    assert press(press(screen, "/", 10), "escape", 10).view.filter == "etl"


@pytest.mark.parametrize("key", ["?", "h"])
def test_question_mark_and_h_show_the_keys_and_any_key_goes_back(key: str) -> None:
    shown = press(Screen(view=View(sort="memory")), key, 10)
    assert shown.help and hint_line(shown, stepping=False) == "any key: back to the table · q quit"
    back = press(shown, "m", 10)
    assert not back.help and back.view == View(sort="memory")  # the key only went back
    assert press(shown, "q", 10).quit
    assert not press(press(Screen(), "/", 10), key, 10).help  # typed into a filter instead


def test_replay_gives_each_node_its_poll_at_a_time_with_the_held_ones_before() -> None:
    rows = [("a", make_row(1, T0_MS + 2000 * k)) for k in range(20)]
    rows += [("a", make_row(9, T0_MS + 2000 * 3, comm="once"))]
    rows += [("b", make_row(5, T0_MS + 1000 + 2000 * k)) for k in range(3)]
    replay = Replay.of(rows)
    assert len(replay.times) == 23 and replay.times[0] == T0_MS
    assert replay.index_at(T0_MS - 1) == 0 and replay.times[replay.index_at(T0_MS + 7000)] == T0_MS + 6000
    polls = replay.at(replay.index_at(T0_MS + 7000))
    assert [(p.node, p.unix_ms) for p in polls] == [("a", T0_MS + 6000), ("b", T0_MS + 5000)]
    assert {r.tgid for r in polls[0].rows} == {1, 9} and {r.tgid for r in polls[0].earlier} == {1}
    late = replay.at(len(replay.times) - 1)[0]
    assert len({r.unix_ms for r in late.earlier}) == HELD_POLLS - 1
    assert 9 not in {r.tgid for r in late.earlier}


def test_top_json_lists_every_held_process() -> None:
    out = to_json([golden_like()])
    assert out["polls"] == [{"node": "gpu-a", "unix_ms": T0_MS, "time": "2026-10-20T14:19:10.473Z"}]
    processes = out["processes"]
    assert isinstance(processes, list)
    assert [p["pid"] for p in processes] == [3, 2, 1, 4]
    assert processes[-1]["idle"] is True and processes[-1]["cpu_cores"] == 0.0
    assert [p["row_time"] for p in processes] == [iso_ms(p["row_unix_ms"]) for p in processes]
    assert processes[0]["syscalls"][0] == {"name": "clock_nanosleep", "rate_per_sec": 9000.0}


NOW = 1_792_505_950_473  # 2026-10-20T14:19:10.473Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-10-20T14:19:10.473Z", NOW),
        ("2026-10-20T16:19:10.473+02:00", NOW),
        ("2026-10-20 14:19:10.473", NOW),
        ("2026-10-20 14:19:10.473 UTC", NOW),  # what croft prints, read back
        ("2026-10-20 14:19:10 UTC", NOW - 473),
        ("2026-10-20T14:19:10utc", NOW - 473),
        ("2026-10-20", NOW - (14 * 3600 + 19 * 60 + 10) * 1000 - 473),
        ("10m", NOW - 600_000),
        ("10m ago", NOW - 600_000),
        ("1h30m ago", NOW - 5_400_000),
        ("90s", NOW - 90_000),
        ("now", NOW),
        ("1792505000000", 1_792_505_000_000),
    ],
)
def test_times_as_users_type_them(text: str, expected: int) -> None:
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize(
    "text", ["yesterday", "10 parsecs", "", "2026-13-01T00:00:00Z", "-5m", "UTC", "2026-10-20 25:00 UTC"]
)
def test_a_bad_time_names_the_forms_accepted(text: str) -> None:
    with pytest.raises(BadTime, match=r"is not a time; give one as e\.g\. 2026-10-20T14:20:00Z, 2026-10-20"):
        parse_time(text, NOW)


def test_a_time_with_two_zones_is_refused() -> None:
    with pytest.raises(BadTime, match="names two time zones"):
        parse_time("2026-10-20T14:19:10+02:00 UTC", NOW)


@given(st.integers(0, 253_402_300_799_999))
def test_every_time_croft_prints_reads_back(unix_ms: int) -> None:
    """What top's header, stats' first/last and the tables print, and the RFC 3339 of the JSON
    outputs, given back to --at, --from or --to name the same instant (to the second printed)."""
    assert parse_time(readable(unix_ms, ms=True), NOW) == unix_ms
    assert parse_time(readable(unix_ms), NOW) == unix_ms - unix_ms % 1000
    assert parse_time(iso_ms(unix_ms), NOW) == unix_ms


@given(st.integers(0, 10**6), st.sampled_from(["s", "m", "h", "d"]))
def test_a_duration_is_its_number_times_its_unit(n: int, unit: str) -> None:
    assert duration_ms(f"{n}{unit}") == n * {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]


def test_at_shows_the_nearest_poll_or_none_outside_the_data() -> None:
    """--at names a poll within 10 s of it, however it was typed: a time croft printed to the
    second finds the poll inside that second, and a time before, after or between the polls by more
    than that finds none (an age like `10m` on a younger dataset included)."""
    replay = Replay.of([("a", make_row(1, T0_MS + 2000 * k)) for k in range(5)])
    printed = T0_MS - T0_MS % 1000  # "2026-10-20 14:19:10 UTC": the first poll is .473 later
    assert replay.nearest(printed) == 0 and replay.nearest(T0_MS + 4100) == 2
    assert replay.nearest(T0_MS + 3000) == 1  # as near to both: the earlier
    assert replay.nearest(T0_MS - 10_000) == 0 and replay.nearest(T0_MS + 8000 + 10_000) == 4
    assert replay.nearest(T0_MS - 10_001) is None and replay.nearest(T0_MS + 8000 + 10_001) is None
    assert replay.nearest(T0_MS - 9 * 60_000) is None  # `--at 10m` on a minute-old dataset
    assert Replay.of([]).nearest(T0_MS) is None
