"""croft top's table, built from rows: cells, order, truncation and the header line."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.row import CgroupUsage, Pod, Row, ShortLived, SyscallRate
from croft.domain.top import (
    COLUMNS,
    NodePoll,
    build_table,
    busiest_syscalls,
    container_cell,
    cpu_percent,
    fit_items,
    human_bytes,
    human_rate,
    truncate,
)
from croft.domain.top.table import View, to_json
from tests.helpers.rows import T0_MS, make_row
from tests.helpers.strategies import rows

TITLES = [c.title for c in COLUMNS if c.key not in ("node", "pod", "command")]  # one node, no pod


def cell(table_row: tuple[str, ...], title: str) -> str:
    return table_row[TITLES.index(title)]


def test_a_row_becomes_short_cells() -> None:
    row = make_row(234758, cpu_cores=1.5, rss_bytes=1145397248, workload="gpu-held", framework="pytorch")
    table = build_table([NodePoll("gpu-a", T0_MS, (row,))], now_ms=T0_MS + 1200)
    (only,) = table.rows
    assert only.cells == (
        "33813f5d0a1b",
        "234758",
        "python",
        "pytorch",
        "gpu-held",
        "150.0",
        "0",
        "0",
        "1.1G",
        "30B",
        "512B",
        "0",
        "",
        "/system.slice/docker-33813f5d0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5.scope",
        "futex 282/s  read 12/s",
    )
    assert only.gpu
    assert table.total_rows == 1


def test_host_process_shows_host_and_the_end_of_its_cwd() -> None:
    short = make_row(1, container_id=None, cwd="/srv/proj")
    deep = make_row(2, container_id=None, cwd="/home/someone/projects/llm-eval")
    assert container_cell(short) == "host:/srv/proj"
    assert container_cell(deep) == "host:…/llm-eval"
    assert (
        container_cell(make_row(3, container_id=None, cwd="/a-single-very-long-name")) == "host:…-long-name"
    )


def test_long_comm_and_framework_are_truncated_with_an_ellipsis() -> None:
    row = make_row(7, comm="a-very-long-process-name", framework="tensorflow-serving")
    (only,) = build_table([NodePoll("n", T0_MS, (row,))], T0_MS).rows
    assert cell(only.cells, "COMM") == "a-very-long-pr…"
    assert cell(only.cells, "FRAMEWORK") == "tensorflo…"
    (bare,) = build_table([NodePoll("n", T0_MS, (make_row(8, framework=None),))], T0_MS).rows
    assert cell(bare.cells, "FRAMEWORK") == ""


def test_control_characters_never_reach_the_terminal() -> None:
    assert truncate("evil\x1b[2Jname\n", 20) == "evil [2Jname "


def test_rows_are_sorted_by_cpu_busiest_first_and_cut_to_max_rows() -> None:
    polled = tuple(make_row(100 + i, cpu_cores=c) for i, c in enumerate([0.1, 3.0, 0.0, 1.2, 3.0]))
    table = build_table([NodePoll("n", T0_MS, polled)], T0_MS, max_rows=3)
    assert [cell(r.cells, "PID") for r in table.rows] == ["101", "104", "103"]
    assert table.total_rows == 5


def test_busiest_syscalls_are_the_top_three_by_rate_without_idle_ones() -> None:
    calls = (
        SyscallRate(name="read", rate_per_sec=12.0),
        SyscallRate(name="futex", rate_per_sec=282.0),
        SyscallRate(name="ioctl", rate_per_sec=0.0),
        SyscallRate(name="epoll_wait", rate_per_sec=1234.0),
        SyscallRate(name="write", rate_per_sec=3.0),
        SyscallRate(name="close", rate_per_sec=12.0),
    )
    assert busiest_syscalls(make_row(1, syscalls=calls)) == "epoll_wait 1.2k/s  futex 282/s  close 12/s"
    assert busiest_syscalls(make_row(1, syscalls=(SyscallRate(name="ioctl", rate_per_sec=0.0),))) == ""


def test_a_list_cell_keeps_whole_items_that_fit() -> None:
    cell = "newfstatat 1.1k/s  munmap 287/s  io_uring_enter 207/s"
    assert fit_items(cell, 200) == cell
    assert fit_items(cell, len(cell)) == cell
    assert fit_items(cell, 40) == "newfstatat 1.1k/s  munmap 287/s  …"
    assert fit_items(cell, 25) == "newfstatat 1.1k/s  …"
    assert fit_items(cell, 12) == "newfstatat …"


@given(st.lists(st.text(alphabet="abc 1/.", min_size=1, max_size=12), max_size=5), st.integers(1, 60))
def test_a_fitted_cell_never_exceeds_its_width(items: list[str], width: int) -> None:
    cell = "  ".join(items)
    fitted = fit_items(cell, width)
    assert len(fitted) <= width
    assert fitted == cell or fitted.endswith("…")


def test_units() -> None:
    assert [human_bytes(n) for n in (0, 812, 12 << 10, 1145397248, 512 << 20, 20 << 30, 2**63 - 1)] == [
        "0",
        "812B",
        "12K",
        "1.1G",
        "512M",
        "20G",
        "8.0E",
    ]
    assert [human_rate(r) for r in (0.5, 3.0, 282.0, 1234.0, 35_000.0, 4_100_000.0, 1e12)] == [
        "0.5",
        "3",
        "282",
        "1.2k",
        "35k",
        "4.1M",
        "1T",
    ]
    assert [cpu_percent(c) for c in (0.0, 0.004, 1.0, 16.0)] == ["0.0", "0.4", "100.0", "1600"]


def test_header_names_node_time_age_processes_and_gpu_holders() -> None:
    polled = (make_row(1, workload="gpu-held"), make_row(2, workload="gpu-onset"), make_row(3))
    table = build_table([NodePoll("gpu-a", T0_MS, polled)], now_ms=T0_MS + 2500)
    assert (
        table.header == "node gpu-a · poll 2026-10-20 14:19:10 UTC (2.5 s ago) · 3 processes · 2 GPU holders"
    )


def test_several_nodes_get_a_node_column_and_an_age_span() -> None:
    a = NodePoll("gpu-a", T0_MS, (make_row(1, T0_MS, cpu_cores=0.1),))
    b = NodePoll("gpu-b", T0_MS - 600_000, (make_row(1, T0_MS - 600_000, cpu_cores=0.9),))
    table = build_table([b, a], now_ms=T0_MS + 1000)
    assert table.columns[0].title == "NODE"
    assert [r.cells[0] for r in table.rows] == ["gpu-b", "gpu-a"]
    assert table.header.startswith("2 nodes (gpu-a, gpu-b) · newest poll 2026-10-20 14:19:10 UTC")
    assert "(1.0 s ago, oldest 10 min ago)" in table.header


@given(st.lists(rows(), max_size=8), st.none() | st.integers(min_value=0, max_value=40))
def test_table_laws(polled: list[Row], max_rows: int | None) -> None:
    """Every process is counted, at most max_rows shown, busiest CPU first, every cell within its
    column's width and free of control characters."""
    same_poll = tuple(msgspec.structs.replace(r, unix_ms=T0_MS) for r in polled)
    table = build_table([NodePoll("n", T0_MS, same_poll)], T0_MS, max_rows)
    assert table.total_rows == len(same_poll)
    assert len(table.rows) == (len(same_poll) if max_rows is None else min(max_rows, len(same_poll)))
    cpus = [r.cpu_cores for r in table.rows]
    assert cpus == sorted(cpus, reverse=True)
    for table_row in table.rows:
        for column, text in zip(table.columns, table_row.cells, strict=True):
            assert len(text) <= column.max_chars, (column.title, text)
            assert text.isprintable()


def _felt_poll() -> NodePoll:
    """A throttled container (two processes, one idle, and short-lived ones carried by the busy
    one's row) and a host process."""
    usage = CgroupUsage(
        cpu_cores=0.2,
        cpu_throttled_fraction=0.95,
        memory_bytes=1 << 20,
        oom_kills=0,
        cpu_pressure_avg10=37.5,
        memory_pressure_avg10=0.0,
        io_pressure_avg10=0.0,
    )
    busy = msgspec.structs.replace(
        make_row(11, T0_MS, comm="burner", cgroup_usage=usage),
        short_lived=ShortLived(processes=31, syscalls=(SyscallRate(name="execve", rate_per_sec=15.5),)),
    )
    idle = make_row(12, T0_MS - 8000, comm="sleeper", cgroup_usage=usage)
    gone = make_row(13, T0_MS - 8000, comm="old", container_id="ab" * 32, cgroup_usage=usage)
    host = make_row(14, T0_MS, comm="etl", container_id=None)
    return NodePoll("n", T0_MS, (busy, host), (idle, gone))


def test_the_container_felt_columns_show_throttling_pressure_and_short_lived_processes() -> None:
    """Under a CPU quota a process can show 11.5 % CPU while its cgroup was throttled 95 % of its
    periods: THR% and PSI% say what the container felt, SHORT how many processes it ran between
    two polls. An idle process shows its container's figures of the newest poll, none when its
    container has no row there."""
    table = build_table([_felt_poll()], T0_MS)
    keys = [c.key for c in table.columns]
    by_comm = {
        dict(zip(keys, r.cells, strict=True))["comm"]: dict(zip(keys, r.cells, strict=True))
        for r in table.rows
    }
    assert [by_comm["burner"][k] for k in ("throttled", "pressure", "short")] == ["95", "38", "31"]
    assert [by_comm["sleeper"][k] for k in ("throttled", "pressure", "short")] == ["95", "38", "31"]
    assert [by_comm["old"][k] for k in ("throttled", "pressure", "short")] == ["", "", ""]
    assert [by_comm["etl"][k] for k in ("throttled", "short")] == ["0", "0"]
    listed = {p["comm"]: p for p in to_json([_felt_poll()])["processes"]}  # type: ignore[union-attr]
    assert (listed["burner"]["cpu_throttled_fraction"], listed["burner"]["short_lived_processes"]) == (
        0.95,
        31,
    )
    assert listed["old"]["cpu_pressure_avg10"] is None


def test_pods_and_command_lines_are_named_where_rows_carry_them() -> None:
    """A pod's row shows `namespace/pod` and its container's name; the sandbox's process, with no
    container name, its short id; POD and COMMAND are there only when a row has them."""
    named = msgspec.structs.replace(
        make_row(21, T0_MS, comm="python3"),
        pod=Pod(namespace="ml", name="trainer-7d9f", container="trainer"),
        process=msgspec.structs.replace(make_row(21).process, cmdline="python3 train.py --lr 0.1"),
    )
    sandbox = msgspec.structs.replace(
        make_row(22, T0_MS, comm="pause", container_id="cd" * 32),
        pod=Pod(namespace="ml", name="trainer-7d9f"),
    )
    table = build_table([NodePoll("n", T0_MS, (named, sandbox))], T0_MS)
    keys = [c.key for c in table.columns]
    assert keys[:3] == ["pod", "container", "pid"] and keys[-1] == "command"
    cells = {r.cells[2]: dict(zip(keys, r.cells, strict=True)) for r in table.rows}
    assert (cells["21"]["pod"], cells["21"]["container"]) == ("ml/trainer-7d9f", "trainer")
    assert (cells["22"]["pod"], cells["22"]["container"]) == ("ml/trainer-7d9f", "cd" * 6)
    assert cells["21"]["command"] == "python3 train.py --lr 0.1" and cells["22"]["command"] == ""
    plain = build_table([NodePoll("n", T0_MS, (make_row(23, T0_MS),))], T0_MS)
    assert "pod" not in [c.key for c in plain.columns] and "command" not in [c.key for c in plain.columns]

    def pids(text: str, polls: list[NodePoll]) -> list[str]:
        table = build_table(polls, T0_MS, view=View(filter=text))
        at = [c.key for c in table.columns].index("pid")
        return sorted(r.cells[at] for r in table.rows)

    one = [NodePoll("gpu-a", T0_MS, (named, sandbox))]
    assert pids("ml/", one) == [] and pids("trainer-7d", one) == ["21", "22"]
    assert pids("TRAIN.PY", one) == ["21"] and pids("trainer", one) == ["21", "22"]
    # the node's name matches only where several nodes are shown (one node: every row would)
    assert pids("gpu-a", one) == []
    two = [*one, NodePoll("cpu-b", T0_MS, (make_row(31, T0_MS),))]
    assert pids("gpu-a", two) == ["21", "22"] and pids("cpu-b", two) == ["31"]


def test_a_sort_can_be_reversed() -> None:
    polled = tuple(make_row(100 + i, cpu_cores=c) for i, c in enumerate([0.1, 3.0, 0.0, 1.2]))
    poll = [NodePoll("n", T0_MS, polled)]

    def pids(view: View) -> list[str]:
        return [cell(r.cells, "PID") for r in build_table(poll, T0_MS, view=view).rows]

    assert pids(View(sort="cpu")) == ["101", "103", "100", "102"]
    assert pids(View(sort="cpu", reverse=True)) == ["102", "100", "103", "101"]
    assert pids(View(sort="pid", reverse=True)) == ["103", "102", "101", "100"]


def test_a_long_pod_cell_keeps_the_pods_name_and_cuts_the_namespace() -> None:
    from croft.domain.top.cells import pod_cell

    assert pod_cell("ml", "trainer-7d9f", 32) == "ml/trainer-7d9f"
    cut = pod_cell("rows-metrics-and-top-name-each-pod-x1b2c", "named-7d9f8c7b4-abcde", 32)
    assert cut == "rows-metr…/named-7d9f8c7b4-abcde" and len(cut) == 32
    assert pod_cell("ns", "a" * 40, 32) == "…" + "a" * 31
