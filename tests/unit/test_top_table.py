"""croft top's table, built from rows: cells, order, truncation and the header line."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.row import Row, SyscallRate
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
from tests.helpers.rows import T0_MS, make_row
from tests.helpers.strategies import rows

TITLES = [c.title for c in COLUMNS if c.key != "node"]


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
        "1.1G",
        "30B",
        "512B",
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
