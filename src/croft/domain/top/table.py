"""croft top's table as a pure function of each node's recent polls, the clock and the view.

`build_table(polls, now_ms, view)` holds each process's latest row from the node's last
`HELD_POLLS` polls: the collector writes an idle process only once every 15 polls, so the newest
poll alone misses most idle processes. A process without a row in the newest poll is shown *idle*:
CPU, syscalls, network and I/O at 0, its last RSS, and the age of its row in the AGE column.

Beside each process, what its container felt in the newest poll: the throttled share of its
cgroup's CPU periods (THR%), its cgroup's CPU pressure (PSI%, PSI `some avg10`) and how many
short-lived processes the container ran between the last two polls (SHORT: the `short_lived`
summary of the poll, see docs/dataset.md); an idle process shows its container's figures when the
container has a row in the newest poll, and nothing otherwise. Kubernetes pods are named (POD:
`namespace/pod`, CONTAINER: the container's name) where rows carry `pod`.

Rows are filtered (`View.filter`, a case-insensitive substring of the container id or name, pod,
namespace, cgroup, framework, workload, command, command line, host cwd and, with several nodes,
node) and sorted (CPU, memory, syscalls or PID; `View.reverse` turns the order round). Every cell
is already a short string; `croft.domain.top.layout` picks the columns a width can hold.

When any held row names its GPUs (the row's `gpus`), GPU% and GPUMEM follow RSS: how busy the
process kept its GPUs (NVML's SM utilisation or DRM's busiest engine, summed over its GPUs: 200 is
two GPUs) and the GPU memory it holds; blank for a process no GPU source measured, GPU% 0 for an
idle one.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from croft.domain.dataset import CMDLINE_CHARS, GPU_WORKLOADS, Row, gpu_busy_percent, gpu_memory_bytes
from croft.domain.top.cells import (
    WIDE_SYSCALLS,
    age,
    busiest_syscalls,
    cgroup_cell,
    container_cell,
    cpu_percent,
    human_bytes,
    pod_cell,
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
    Column("pod", "POD", max_chars=32, keep=3),
    Column("container", "CONTAINER", max_chars=16, keep=3),
    Column("pid", "PID", "right", 7, keep=0),
    Column("comm", "COMM", max_chars=15, keep=2),
    Column("framework", "FRAMEWORK", max_chars=10, keep=15),
    Column("workload", "WORKLOAD", max_chars=9, keep=9),
    Column("cpu", "CPU%", "right", 6, keep=1),
    Column("throttled", "THR%", "right", 5, keep=5),
    Column("pressure", "PSI%", "right", 5, keep=10),
    Column("rss", "RSS", "right", 5, keep=4),
    Column("net", "NET/s", "right", 5, keep=12),
    Column("io", "I/O/s", "right", 5, keep=13),
    Column("short", "SHORT", "right", 5, keep=11),
    Column("age", "AGE", "right", 4, keep=7),
    Column("cgroup", "CGROUP", max_chars=CGROUP_CHARS, keep=14, min_chars=28, readable_chars=40),
    Column("syscalls", "BUSIEST SYSCALLS", max_chars=200, keep=6, min_chars=25, readable_chars=30),
    Column("command", "COMMAND", max_chars=CMDLINE_CHARS, keep=8, min_chars=20, readable_chars=40),
)
"""Every column in screen order; NODE is there only with several nodes, POD only when a row names
its pod, COMMAND only when a row has a command line. `keep` ranks them: a narrower screen shows
the columns of the lowest ranks that fit, and a column shown at one width is shown at every wider
one (`croft.domain.top.layout`)."""
GPU_COLUMNS: tuple[Column, ...] = (
    Column("gpu", "GPU%", "right", 6, keep=4),
    Column("gpu_memory", "GPUMEM", "right", 6, keep=6),
)
"""After RSS when any held row names its GPUs."""


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
    """How the table is looked at: the sort key (one of `SORTS`), whether its order is turned
    round (`reverse`: least CPU, memory or syscalls first, highest PID first) and the filter text."""

    sort: str = "cpu"
    filter: str = ""
    reverse: bool = False


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
    `total_rows` counts every held process, `matching` those passing the filter. `sizing` holds
    the cells of every matching row, on the page or not, which the layout sizes the columns by, so
    that scrolling never changes the columns (empty: size by `rows`)."""

    header: str
    columns: tuple[Column, ...]
    rows: tuple[TopRow, ...]
    total_rows: int
    matching: int = 0
    notes: tuple[str, ...] = ()
    first: int = 0
    sizing: tuple[tuple[str, ...], ...] = ()

    def sized_cells(self) -> tuple[tuple[str, ...], ...]:
        """The cells the column widths are measured on: every matching row's."""
        return self.sizing or tuple(row.cells for row in self.rows)


@attrs.frozen
class Felt:
    """What a process's container felt in its node's newest poll: the throttled fraction and CPU
    pressure (PSI some avg10, %) of the process's cgroup, and the short-lived processes of its
    container (or watched host cgroup). None where the newest poll has no row to say it."""

    throttled: float | None = None
    pressure: float | None = None
    short_lived: int | None = None


@attrs.frozen
class Held:
    """A process's latest row within its node's held polls; `idle` when older than the newest;
    `felt` its container's figures in the newest poll."""

    node: str
    row: Row
    idle: bool
    age_ms: int
    felt: Felt = Felt()

    @property
    def cpu_cores(self) -> float:
        return 0.0 if self.idle else self.row.usage.cpu_cores

    @property
    def syscalls_per_s(self) -> float:
        return 0.0 if self.idle else sum(s.rate_per_sec for s in self.row.syscalls)


def _group(row: Row) -> str:
    """The container a row's short-lived processes are counted in: its id, or a host cgroup."""
    return row.process.container_id or f"cgroup:{row.process.cgroup}"


def held(poll: NodePoll) -> list[Held]:
    """Every row of the newest poll, then for each pid absent from it its latest earlier row
    (idle); each with what its container felt in the newest poll."""
    current = {row.tgid for row in poll.rows}
    latest: dict[int, Row] = {}
    for row in poll.earlier:
        if row.tgid not in current and row.unix_ms < poll.unix_ms:
            latest[row.tgid] = row
    by_cgroup: dict[str, tuple[float | None, float | None]] = {}
    short: dict[str, int] = {}
    for row in poll.rows:
        usage = row.cgroup_usage
        by_cgroup[row.process.cgroup] = (usage.cpu_throttled_fraction, usage.cpu_pressure_avg10)
        extra = row.short_lived.processes if row.short_lived is not None else 0
        short[_group(row)] = short.get(_group(row), 0) + extra

    def felt(row: Row) -> Felt:
        figures = by_cgroup.get(row.process.cgroup)
        return Felt(
            throttled=figures[0] if figures else None,
            pressure=figures[1] if figures else None,
            short_lived=short.get(_group(row)),
        )

    return [Held(poll.node, row, False, 0, felt(row)) for row in poll.rows] + [
        Held(poll.node, row, True, poll.unix_ms - row.unix_ms, felt(row)) for row in latest.values()
    ]


def matches(item: Held, text: str, *, node: bool = False) -> bool:
    """Whether `text` (case-insensitive) is in the container id, pod (namespace, name, container),
    cgroup, framework, workload, command, command line, for a host process its cwd and, with
    `node` (several nodes shown), the node's name."""
    if not text:
        return True
    row = item.row
    process = row.process
    fields = (process.container_id or "", process.cgroup, process.framework or "", row.workload)
    pod = (row.pod.namespace, row.pod.name, row.pod.container or "") if row.pod is not None else ()
    own = (process.comm, process.cmdline or "", process.cwd if process.container_id is None else "")
    haystack = "\n".join((*fields, *pod, *own, item.node if node else ""))
    return text.lower() in haystack.lower()


def _order(item: Held, view: View) -> tuple[float, str, str, int]:
    """The sort key of `item`: `view.sort`'s figure, busiest first (PID ascending), turned round
    with `view.reverse`; ties always by node, container and pid, ascending."""
    sign = -1 if view.reverse else 1
    tie = (item.node, item.row.process.container_id or "", item.row.tgid)
    if view.sort == "pid":
        return (sign * item.row.tgid, *tie)
    if view.sort == "memory":
        return (-sign * item.row.usage.rss_bytes, *tie)
    if view.sort == "syscalls":
        return (-sign * item.syscalls_per_s, *tie)
    return (-sign * item.cpu_cores, *tie)


def cells(item: Held, columns: Sequence[Column]) -> tuple[str, ...]:
    """`item`'s cell for each of `columns`, each within its column's `max_chars`."""
    row, usage = item.row, item.row.usage
    values: dict[str, str] = {}
    for column in columns:
        key = column.key
        if key == "node":
            values[key] = truncate(item.node, column.max_chars)
        elif key == "pod":
            values[key] = (
                "" if row.pod is None else pod_cell(row.pod.namespace, row.pod.name, column.max_chars)
            )
        elif key == "container":
            named = row.pod.container if row.pod is not None else None
            values[key] = (
                truncate(named, column.max_chars) if named else container_cell(row, column.max_chars)
            )
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
        elif key == "throttled":
            throttled = item.felt.throttled
            values[key] = "" if throttled is None else percent(throttled * 100)
        elif key == "pressure":
            values[key] = "" if item.felt.pressure is None else percent(item.felt.pressure)
        elif key == "short":
            values[key] = "" if item.felt.short_lived is None else str(item.felt.short_lived)
        elif key == "rss":
            values[key] = human_bytes(usage.rss_bytes)
        elif key in ("net", "io"):
            per_s = _bytes_s(item, key)
            values[key] = "-" if per_s is None else _rate_bytes(per_s)
        elif key == "age":
            values[key] = short_age(item.age_ms) if item.idle else ""
        elif key == "gpu":
            busy = gpu_busy_percent(row.gpus)
            values[key] = "" if busy is None else "0.0" if item.idle else cpu_percent(busy / 100)
        elif key == "gpu_memory":
            held = gpu_memory_bytes(row.gpus)
            values[key] = "" if held is None else human_bytes(held)
        elif key == "cgroup":
            values[key] = cgroup_cell(row, column.max_chars)
        elif key == "command":
            values[key] = truncate(row.process.cmdline or "", column.max_chars)
        else:
            values[key] = "" if item.idle else busiest_syscalls(row, WIDE_SYSCALLS)
    return tuple(values[column.key] for column in columns)


def _bytes_s(item: Held, kind: str) -> float | None:
    """Network ("net") or disk ("io") bytes per second of `item`, both ways summed: 0 for an idle
    process, None where its row measured neither (a figure croft could not read is not 0)."""
    usage = item.row.usage
    pair = (
        (usage.network_rx_bytes_s, usage.network_tx_bytes_s)
        if kind == "net"
        else (usage.read_bytes_s, usage.write_bytes_s)
    )
    measured = [value for value in pair if value is not None]
    if not measured:
        return None
    return 0.0 if item.idle else sum(measured)


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
    shown_all = _shown(items, view, several)
    start = 0
    if max_rows is None:
        shown = shown_all
    else:
        page = max(max_rows, 0)
        start = min(max(offset, 0), max(len(shown_all) - page, 0))
        shown = shown_all[start : start + page]
    shows = {
        "node": several,
        "pod": any(item.row.pod is not None for item in items),
        "command": any(item.row.process.cmdline for item in items),  # rows of older collectors have none
    }
    columns = tuple(c for c in COLUMNS if shows.get(c.key, True))
    if any(item.row.gpus for item in items):
        after = [c.key for c in columns].index("rss") + 1
        columns = (*columns[:after], *GPU_COLUMNS, *columns[after:])
    every = [cells(item, columns) for item in shown_all]
    table_rows = tuple(
        TopRow(every[start + k], item.cpu_cores, item.row.workload in GPU_WORKLOADS, item.idle)
        for k, item in enumerate(shown)
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
        tuple(every),
    )


def _shown(items: Sequence[Held], view: View, several: bool) -> list[Held]:
    """The items passing `view`'s filter, in its order."""
    return sorted((i for i in items if matches(i, view.filter, node=several)), key=lambda i: _order(i, view))


def percent(value: float) -> str:
    """A percentage of 0-100 in at most 5 characters: "0", "2.5", "95", "100"."""
    if value <= 0:
        return "0"
    return f"{value:.1f}" if value < 9.95 else f"{min(value, 999):.0f}"


def to_json(polls: Sequence[NodePoll], view: View | None = None) -> dict[str, object]:
    """The held processes of `polls` as one JSON object for scripts (`croft top --json`): the
    polls shown, then one object per process in `view` order (rates of idle ones are 0, their
    row's own time says how old it is)."""
    view = view or View()
    items = [item for poll in polls for item in held(poll)]
    ordered = _shown(items, view, len(polls) > 1)
    return {
        "polls": [{"node": p.node, "unix_ms": p.unix_ms, "time": iso_ms(p.unix_ms)} for p in polls],
        "processes": [
            {
                "node": item.node,
                "container_id": item.row.process.container_id,
                "pod": None
                if item.row.pod is None
                else {
                    "namespace": item.row.pod.namespace,
                    "name": item.row.pod.name,
                    "container": item.row.pod.container,
                },
                "cgroup": item.row.process.cgroup,
                "pid": item.row.tgid,
                "comm": item.row.process.comm,
                "cmdline": item.row.process.cmdline,
                "framework": item.row.process.framework,
                "workload": item.row.workload,
                "idle": item.idle,
                "row_unix_ms": item.row.unix_ms,
                "row_time": iso_ms(item.row.unix_ms),
                "cpu_cores": item.cpu_cores,
                "cpu_throttled_fraction": item.felt.throttled,
                "cpu_pressure_avg10": item.felt.pressure,
                "short_lived_processes": item.felt.short_lived,
                "rss_bytes": item.row.usage.rss_bytes,
                "network_bytes_s": _bytes_s(item, "net"),
                "io_bytes_s": _bytes_s(item, "io"),
                "syscalls": []
                if item.idle
                else [
                    {"name": s.name, "rate_per_sec": s.rate_per_sec}
                    for s in sorted(item.row.syscalls, key=lambda s: (-s.rate_per_sec, s.name))
                    if s.rate_per_sec > 0
                ],
                **_gpu_json(item),
            }
            for item in ordered
        ],
    }


def _gpu_json(item: Held) -> dict[str, object]:
    """`gpu_percent` and `gpu_memory_bytes` of a process whose row names its GPUs (GPU% 0 when
    idle), as the GPU% and GPUMEM columns show them; nothing for one whose row names none."""
    if not item.row.gpus:
        return {}
    busy = gpu_busy_percent(item.row.gpus)
    return {
        "gpu_percent": 0.0 if item.idle and busy is not None else busy,
        "gpu_memory_bytes": gpu_memory_bytes(item.row.gpus),
    }
