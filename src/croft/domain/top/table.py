"""croft top's table as a pure function of each node's recent polls, the clock and the view.

`build_table(polls, now_ms, view)` holds each process's latest row from the node's last
`HELD_POLLS` polls: the collector writes an idle process only once every 15 polls, so the newest
poll alone misses most idle processes. A process without a row in the newest poll is shown *idle*:
CPU, syscalls, network and I/O at 0, its last RSS, and the age of its row in the AGE column.

Rows are filtered (`View.filter`, a case-insensitive substring of the container id, cgroup,
framework, workload, command or host cwd) and sorted (CPU, memory, syscalls or PID). Every cell is
already a short string; `croft.domain.top.layout` picks the columns a width can hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from croft.domain.dataset import GPU_WORKLOADS, Row
from croft.domain.top.cells import (
    WIDE_SYSCALLS,
    age,
    busiest_syscalls,
    cgroup_cell,
    container_cell,
    cpu_percent,
    human_bytes,
    short_age,
    truncate,
    utc_time,
)
from croft.domain.utc import iso_ms

HELD_POLLS = 15
"""Polls a process's latest row is held for: the collector's idle rows come every 15 polls."""
STOPPED_AFTER_MS = 10_000
"""A newest poll older than this (5 poll intervals) means the collector has stopped writing."""
CGROUP_CHARS = 120  # the widest CGROUP cell; a narrower layout keeps the end
SORTS: tuple[str, ...] = ("cpu", "memory", "syscalls", "pid")


@attrs.frozen
class Column:
    """A table column: its key and title, "left" or "right" justified, the most characters a cell
    takes, `keep` (a lower one is dropped later on a narrow screen) and, for a column that gives
    way before being dropped (the cgroup, the syscalls), `min_chars` and `readable_chars`: the
    width it keeps while others still have more (the cgroup with its ids cut, two or three
    syscalls)."""

    key: str
    title: str
    justify: str = "left"
    max_chars: int = 16
    keep: int = 0
    min_chars: int | None = None
    readable_chars: int | None = None


COLUMNS: tuple[Column, ...] = (
    Column("node", "NODE", max_chars=12, keep=3),
    Column("container", "CONTAINER", max_chars=16, keep=3),
    Column("pid", "PID", "right", 7, keep=0),
    Column("comm", "COMM", max_chars=15, keep=2),
    Column("framework", "FRAMEWORK", max_chars=10, keep=11),
    Column("workload", "WORKLOAD", max_chars=9, keep=7),
    Column("cpu", "CPU%", "right", 6, keep=1),
    Column("rss", "RSS", "right", 5, keep=4),
    Column("net", "NET/s", "right", 5, keep=9),
    Column("io", "I/O/s", "right", 5, keep=10),
    Column("age", "AGE", "right", 4, keep=6),
    Column("cgroup", "CGROUP", max_chars=CGROUP_CHARS, keep=8, min_chars=28, readable_chars=40),
    Column("syscalls", "BUSIEST SYSCALLS", max_chars=200, keep=5, min_chars=25, readable_chars=30),
)
"""Every column in screen order; NODE is there only with several nodes."""


@attrs.frozen
class NodePoll:
    """One node's newest complete poll (every row has `unix_ms`) and the rows of up to
    `HELD_POLLS - 1` polls before it (`earlier`, oldest first)."""

    node: str
    unix_ms: int
    rows: tuple[Row, ...]
    earlier: tuple[Row, ...] = ()


@attrs.frozen
class View:
    """How the table is looked at: the sort key (one of `SORTS`) and the filter text."""

    sort: str = "cpu"
    filter: str = ""


@attrs.frozen
class TopRow:
    """One process on screen. `cells` line up with `TopTable.columns`; `idle` when its row is from
    an earlier poll (its rates shown as 0); `gpu` for a GPU holder, which a renderer may highlight."""

    cells: tuple[str, ...]
    cpu_cores: float
    gpu: bool
    idle: bool = False


@attrs.frozen
class TopTable:
    """What croft top shows: a header line, notes (the collector stopped), the columns and the
    process rows that pass the filter (at most the `max_rows` asked for, from `offset`);
    `total_rows` counts every held process, `matching` those passing the filter."""

    header: str
    columns: tuple[Column, ...]
    rows: tuple[TopRow, ...]
    total_rows: int
    matching: int = 0
    notes: tuple[str, ...] = ()
    first: int = 0


@attrs.frozen
class Held:
    """A process's latest row within its node's held polls; `idle` when older than the newest."""

    node: str
    row: Row
    idle: bool
    age_ms: int

    @property
    def cpu_cores(self) -> float:
        return 0.0 if self.idle else self.row.usage.cpu_cores

    @property
    def syscalls_per_s(self) -> float:
        return 0.0 if self.idle else sum(s.rate_per_sec for s in self.row.syscalls)


def held(poll: NodePoll) -> list[Held]:
    """Every row of the newest poll, then for each pid absent from it its latest earlier row
    (idle)."""
    current = {row.tgid for row in poll.rows}
    latest: dict[int, Row] = {}
    for row in poll.earlier:
        if row.tgid not in current and row.unix_ms < poll.unix_ms:
            latest[row.tgid] = row
    return [Held(poll.node, row, False, 0) for row in poll.rows] + [
        Held(poll.node, row, True, poll.unix_ms - row.unix_ms) for row in latest.values()
    ]


def matches(item: Held, text: str) -> bool:
    """Whether `text` (case-insensitive) is in the container id, cgroup, framework, workload,
    command or, for a host process, cwd."""
    if not text:
        return True
    process = item.row.process
    fields = (process.container_id or "", process.cgroup, process.framework or "", item.row.workload)
    haystack = "\n".join((*fields, process.comm, process.cwd if process.container_id is None else ""))
    return text.lower() in haystack.lower()


def _order(item: Held, sort: str) -> tuple[float, str, str, int]:
    tie = (item.node, item.row.process.container_id or "", item.row.tgid)
    if sort == "pid":
        return (item.row.tgid, *tie)
    if sort == "memory":
        return (-item.row.usage.rss_bytes, *tie)
    if sort == "syscalls":
        return (-item.syscalls_per_s, *tie)
    return (-item.cpu_cores, *tie)


def cells(item: Held, columns: Sequence[Column]) -> tuple[str, ...]:
    """`item`'s cell for each of `columns`, each within its column's `max_chars`."""
    row, usage = item.row, item.row.usage
    values: dict[str, str] = {}
    for column in columns:
        key = column.key
        if key == "node":
            values[key] = truncate(item.node, column.max_chars)
        elif key == "container":
            values[key] = container_cell(row, column.max_chars)
        elif key == "pid":
            values[key] = str(row.tgid)
        elif key == "comm":
            values[key] = truncate(row.process.comm, column.max_chars)
        elif key == "framework":
            values[key] = truncate(row.process.framework or "", column.max_chars)
        elif key == "workload":
            values[key] = row.workload
        elif key == "cpu":
            values[key] = cpu_percent(item.cpu_cores)
        elif key == "rss":
            values[key] = human_bytes(usage.rss_bytes)
        elif key == "net":
            values[key] = (
                "0" if item.idle else _rate_bytes(usage.network_rx_bytes_s + usage.network_tx_bytes_s)
            )
        elif key == "io":
            values[key] = "0" if item.idle else _rate_bytes(usage.read_bytes_s + usage.write_bytes_s)
        elif key == "age":
            values[key] = short_age(item.age_ms) if item.idle else ""
        elif key == "cgroup":
            values[key] = cgroup_cell(row, column.max_chars)
        else:
            values[key] = "" if item.idle else busiest_syscalls(row, WIDE_SYSCALLS)
    return tuple(values[column.key] for column in columns)


def _rate_bytes(per_s: float) -> str:
    return human_bytes(int(per_s)) if per_s > 0 else "0"


def header(polls: Sequence[NodePoll], now_ms: int, processes: int, gpu_holders: int, idle: int = 0) -> str:
    """One line: the node(s), the poll time in UTC and its age, processes (idle ones among them)
    and GPU holders. With several nodes the time is the newest node's poll and the age spans
    newest to oldest."""
    if not polls:
        return "no poll yet"
    newest = max(p.unix_ms for p in polls)
    oldest = min(p.unix_ms for p in polls)
    if len(polls) == 1:
        where = f"node {polls[0].node}"
        when = f"poll {utc_time(newest)} ({age(now_ms - newest)})"
    else:
        names = ", ".join(sorted(p.node for p in polls))
        where = f"{len(polls)} nodes ({names})"
        newest_age, oldest_age = age(now_ms - newest), age(now_ms - oldest)
        span = newest_age if newest_age == oldest_age else f"{newest_age}, oldest {oldest_age}"
        when = f"newest poll {utc_time(newest)} ({span})"
    noun = "process" if processes == 1 else "processes"
    idle_part = f" ({idle} idle)" if idle else ""
    holders = "GPU holder" if gpu_holders == 1 else "GPU holders"
    return f"{where} · {when} · {processes} {noun}{idle_part} · {gpu_holders} {holders}"


def stopped_note(polls: Sequence[NodePoll], now_ms: int) -> str | None:
    """A note when even the newest poll is older than `STOPPED_AFTER_MS`: the collector has
    stopped, or writes elsewhere (None while polls are current)."""
    if not polls:
        return None
    newest = max(p.unix_ms for p in polls)
    if now_ms - newest < STOPPED_AFTER_MS:
        return None
    silent = age(now_ms - newest).removesuffix(" ago")
    return f"no new poll for {silent}: the collector has stopped, or writes elsewhere"


def build_table(
    polls: Sequence[NodePoll],
    now_ms: int,
    max_rows: int | None = None,
    *,
    view: View | None = None,
    offset: int = 0,
    live: bool = True,
) -> TopTable:
    """The table of `polls` (one per node) at wall time `now_ms`: one row per held process that
    passes `view.filter`, in `view.sort` order (ties by node, container, pid), `max_rows` of them
    from `offset` (clamped so a page stays full). A NODE column comes first when there is more than
    one node. `live` False (looking back with --at) leaves out the collector-stopped note."""
    view = view or View()
    several = len(polls) > 1
    items = [item for poll in polls for item in held(poll)]
    shown_all = sorted((i for i in items if matches(i, view.filter)), key=lambda i: _order(i, view.sort))
    start = 0
    if max_rows is None:
        shown = shown_all
    else:
        page = max(max_rows, 0)
        start = min(max(offset, 0), max(len(shown_all) - page, 0))
        shown = shown_all[start : start + page]
    columns = COLUMNS if several else tuple(c for c in COLUMNS if c.key != "node")
    table_rows = tuple(
        TopRow(cells(item, columns), item.cpu_cores, item.row.workload in GPU_WORKLOADS, item.idle)
        for item in shown
    )
    gpu_holders = sum(1 for item in items if item.row.workload in GPU_WORKLOADS)
    idle = sum(1 for item in items if item.idle)
    note = stopped_note(polls, now_ms) if live else None
    return TopTable(
        header(polls, now_ms, len(items), gpu_holders, idle),
        columns,
        table_rows,
        len(items),
        len(shown_all),
        (note,) if note else (),
        start,
    )


def to_json(polls: Sequence[NodePoll], view: View | None = None) -> dict[str, object]:
    """The held processes of `polls` as one JSON object for scripts (`croft top --json`): the
    polls shown, then one object per process in `view` order (rates of idle ones are 0, their
    row's own time says how old it is)."""
    view = view or View()
    items = [item for poll in polls for item in held(poll)]
    ordered = sorted((i for i in items if matches(i, view.filter)), key=lambda i: _order(i, view.sort))
    return {
        "polls": [{"node": p.node, "unix_ms": p.unix_ms, "time": iso_ms(p.unix_ms)} for p in polls],
        "processes": [
            {
                "node": item.node,
                "container_id": item.row.process.container_id,
                "cgroup": item.row.process.cgroup,
                "pid": item.row.tgid,
                "comm": item.row.process.comm,
                "framework": item.row.process.framework,
                "workload": item.row.workload,
                "idle": item.idle,
                "row_unix_ms": item.row.unix_ms,
                "row_time": iso_ms(item.row.unix_ms),
                "cpu_cores": item.cpu_cores,
                "rss_bytes": item.row.usage.rss_bytes,
                "network_bytes_s": 0.0
                if item.idle
                else item.row.usage.network_rx_bytes_s + item.row.usage.network_tx_bytes_s,
                "io_bytes_s": 0.0
                if item.idle
                else item.row.usage.read_bytes_s + item.row.usage.write_bytes_s,
                "syscalls": []
                if item.idle
                else [
                    {"name": s.name, "rate_per_sec": s.rate_per_sec}
                    for s in sorted(item.row.syscalls, key=lambda s: (-s.rate_per_sec, s.name))
                    if s.rate_per_sec > 0
                ],
            }
            for item in ordered
        ],
    }
