"""croft top's table as a pure function of the newest poll's rows and the clock.

`build_table(polls, now_ms)` turns the rows of each node's newest poll into one row per process,
busiest CPU first, plus a one-line header. Every cell is already a short string (ids shortened,
long names truncated with an ellipsis), so a renderer only lays them out: the table reads the same
in a 100-column terminal and in a pipe.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from croft.domain.dataset.row import GPU_WORKLOADS, Row
from croft.domain.utc import readable

SHORT_ID_CHARS = 12
BUSIEST_SYSCALLS = 3
ELLIPSIS = "…"
ITEM_SEP = "  "  # between the busiest syscalls of one cell


@attrs.frozen
class Column:
    """A table column: its title, "left" or "right" justified, and the most characters a cell
    takes (None: as wide as the screen lets it, the last column)."""

    title: str
    justify: str = "left"
    max_chars: int | None = None


@attrs.frozen
class NodePoll:
    """The rows of one node's newest complete poll; every row has `unix_ms`."""

    node: str
    unix_ms: int
    rows: tuple[Row, ...]


@attrs.frozen
class TopRow:
    """One process on screen. `cells` line up with `TopTable.columns`; `cpu_cores` orders the
    table; `gpu` is True for a GPU holder (gpu-onset or gpu-held), which a renderer may highlight."""

    cells: tuple[str, ...]
    cpu_cores: float
    gpu: bool


@attrs.frozen
class TopTable:
    """What croft top shows: a header line, the columns and the process rows (at most the
    `max_rows` asked for; `total_rows` says how many processes there were)."""

    header: str
    columns: tuple[Column, ...]
    rows: tuple[TopRow, ...]
    total_rows: int


COLUMNS: tuple[Column, ...] = (
    Column("CONTAINER", max_chars=16),
    Column("PID", "right", 7),
    Column("COMM", max_chars=15),
    Column("FRAMEWORK", max_chars=10),
    Column("WORKLOAD", max_chars=9),
    Column("CPU%", "right", 6),
    Column("RSS", "right", 5),
    Column("BUSIEST SYSCALLS"),
)
NODE_COLUMN = Column("NODE", max_chars=12)


def truncate(text: str, max_chars: int, *, keep_end: bool = False) -> str:
    """`text` in at most `max_chars` characters (>= 1): cut with a trailing ellipsis, or a leading
    one when `keep_end` (the end of a path says the most). Control characters become spaces."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text)
    if len(clean) <= max_chars:
        return clean
    if keep_end:
        return ELLIPSIS + clean[len(clean) - max_chars + 1 :]
    return clean[: max_chars - 1] + ELLIPSIS


def container_cell(row: Row, max_chars: int = 16) -> str:
    """The container's 12-character short id, or `host:<cwd>` for a host process (the cwd names
    its project; a long one keeps its end)."""
    container_id = row.process.container_id
    if container_id is not None:
        return truncate(container_id[:SHORT_ID_CHARS], max_chars)
    prefix = "host:"
    room = max_chars - len(prefix)
    cwd = truncate(row.process.cwd or "?", room, keep_end=True)
    if cwd.startswith(ELLIPSIS) and "/" in cwd[2:]:
        cwd = ELLIPSIS + cwd[cwd.index("/", 2) :]  # cut at a directory, not inside a name
    return prefix + cwd


def cpu_percent(cpu_cores: float) -> str:
    """CPU cores as a percentage of one core, like top, in at most 6 characters: 0.25 -> "25.0",
    16 -> "1600"."""
    percent = cpu_cores * 100
    if percent < 999.95:
        return f"{percent:.1f}"
    return f"{percent:.0f}" if percent < 99_999.5 else human_rate(percent)


def human_bytes(count: int) -> str:
    """Bytes in binary units, at most 5 characters: 0, 812B, 12K, 1.1G, 512M, 3.4T."""
    if count < 1024:
        return f"{count}B" if count else "0"
    value = float(count)
    for unit in "KMGTPE":
        value /= 1024
        if value < 9.95:
            return f"{value:.1f}{unit}"
        if value < 1023.5 or unit == "E":
            return f"{value:.0f}{unit}"
    raise AssertionError("unreachable: E is the last unit")  # pragma: no cover


def human_rate(per_sec: float) -> str:
    """A rate per second, short: 0.5, 3, 282, 1.2k, 35k, 4.1M."""
    if per_sec < 9.95:
        text = f"{per_sec:.1f}"
        return text.removesuffix(".0")
    for scale, unit in ((1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G")):
        value = per_sec / scale
        if value < 9.95 and unit:
            return f"{value:.1f}{unit}"
        if value < 999.5:
            return f"{value:.0f}{unit}"
    return f"{per_sec / 1e12:.0f}T"


def busiest_syscalls(row: Row, count: int = BUSIEST_SYSCALLS) -> str:
    """The `count` syscalls with the highest rate this poll as "name rate/s", busiest first (ties
    by name); syscalls with a zero rate are left out."""
    busy = sorted((s for s in row.syscalls if s.rate_per_sec > 0), key=lambda s: (-s.rate_per_sec, s.name))
    return ITEM_SEP.join(f"{truncate(s.name, 20)} {human_rate(s.rate_per_sec)}/s" for s in busy[:count])


def fit_items(cell: str, max_chars: int) -> str:
    """A list cell (items joined by two spaces) in at most `max_chars`: as many whole items as fit,
    then an ellipsis for the rest; a first item too long by itself is cut."""
    if len(cell) <= max_chars:
        return cell
    items = cell.split(ITEM_SEP)
    kept = items[0]
    if len(kept) + len(ITEM_SEP) + 1 > max_chars:
        return truncate(cell, max_chars)
    for item in items[1:]:
        longer = kept + ITEM_SEP + item
        if len(longer) + len(ITEM_SEP) + 1 > max_chars:
            break
        kept = longer
    return kept + ITEM_SEP + ELLIPSIS


def age(ms: int) -> str:
    """A duration in milliseconds, read as an age: "0.4 s", "12 s", "5 min", "3 h", "2 d"; a
    negative one (a clock behind the poll's) reads "in the future"."""
    if ms < 0:
        return "in the future"
    secs = ms / 1000
    if secs < 9.95:
        return f"{secs:.1f} s ago"
    if secs < 120:
        return f"{secs:.0f} s ago"
    if secs < 7200:
        return f"{secs / 60:.0f} min ago"
    if secs < 172_800:
        return f"{secs / 3600:.0f} h ago"
    return f"{secs / 86_400:.0f} d ago"


def _cells(row: Row, node: str | None) -> tuple[str, ...]:
    process = row.process
    cells = (
        container_cell(row, COLUMNS[0].max_chars or 16),
        str(row.tgid),
        truncate(process.comm, COLUMNS[2].max_chars or 15),
        truncate(process.framework or "", COLUMNS[3].max_chars or 10),
        row.workload,
        cpu_percent(row.usage.cpu_cores),
        human_bytes(row.usage.rss_bytes),
        busiest_syscalls(row),
    )
    if node is None:
        return cells
    return (truncate(node, NODE_COLUMN.max_chars or 12), *cells)


def header(polls: Sequence[NodePoll], now_ms: int, processes: int, gpu_holders: int) -> str:
    """One line: the node(s), the poll time in UTC and its age, processes and GPU holders. With
    several nodes the time is the newest node's poll and the age spans newest to oldest."""
    if not polls:
        return "no poll yet"
    newest = max(p.unix_ms for p in polls)
    oldest = min(p.unix_ms for p in polls)
    if len(polls) == 1:
        where = f"node {polls[0].node}"
        when = f"poll {readable(newest)} ({age(now_ms - newest)})"
    else:
        names = ", ".join(sorted(p.node for p in polls))
        where = f"{len(polls)} nodes ({names})"
        newest_age, oldest_age = age(now_ms - newest), age(now_ms - oldest)
        span = newest_age if newest_age == oldest_age else f"{newest_age}, oldest {oldest_age}"
        when = f"newest poll {readable(newest)} ({span})"
    noun = "process" if processes == 1 else "processes"
    holders = "GPU holder" if gpu_holders == 1 else "GPU holders"
    return f"{where} · {when} · {processes} {noun} · {gpu_holders} {holders}"


def build_table(polls: Sequence[NodePoll], now_ms: int, max_rows: int | None = None) -> TopTable:
    """The table of `polls` (one per node) at wall time `now_ms`: one row per process, highest
    CPU first (ties by node, container, pid), cut to `max_rows` when given. A NODE column comes
    first when there is more than one node."""
    several = len(polls) > 1
    rows = [
        (row.usage.cpu_cores, poll.node, row.process.container_id or "", row.tgid, row)
        for poll in polls
        for row in poll.rows
    ]
    rows.sort(key=lambda item: (-item[0], item[1], item[2], item[3]))
    shown = rows if max_rows is None else rows[: max(max_rows, 0)]
    table_rows = tuple(
        TopRow(_cells(row, node if several else None), cpu, row.workload in GPU_WORKLOADS)
        for cpu, node, _, _, row in shown
    )
    gpu_holders = sum(1 for *_, row in rows if row.workload in GPU_WORKLOADS)
    columns = (NODE_COLUMN, *COLUMNS) if several else COLUMNS
    return TopTable(header(polls, now_ms, len(rows), gpu_holders), columns, table_rows, len(rows))
