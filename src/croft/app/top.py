"""croft top: the processes of the newest poll, refreshed as a live table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from croft.adapters.dataset.tail import TopSnapshot
    from croft.adapters.host.clock import SystemClock
    from croft.domain.top import TopTable

WAITING = "waiting for the first poll"


def top(
    *,
    dataset: DatasetOpt = DEFAULT_DATASET,
    interval: Annotated[float, Parameter(help="seconds between refreshes; q or Ctrl-C quits")] = 2.0,
    once: Annotated[bool, Parameter(negative=(), help="print once and exit")] = False,
) -> int:
    """Show the processes of the newest poll: container, pid, comm, framework, workload, CPU, RSS and
    the busiest syscalls. Reads only the end of the live file."""
    if not (math.isfinite(interval) and interval > 0):
        raise UserError(
            f"--interval must be a positive number of seconds, got {interval:g}; try --interval 2"
        )
    import socket
    import sys

    from rich.console import Console

    from croft.adapters.host.clock import SystemClock

    screen = sys.stdout.isatty()
    console = Console(highlight=False) if screen else Console(width=1000, color_system=None, highlight=False)
    clock = SystemClock()
    node = socket.gethostname()
    snapshot = _read(dataset, node)  # a missing or empty dataset is an error at start, in both modes
    if once:
        if not snapshot.polls:
            raise UserError(f"{dataset} has no complete poll yet; wait for `croft run` to write one")
        _print(console, snapshot, clock.now().unix_ms, screen)
        return 0
    try:
        if screen:
            _live(console, dataset, node, interval, clock, snapshot)
        else:
            _batch(console, dataset, node, interval, clock, snapshot)
    except KeyboardInterrupt:
        pass
    return 0


def _read(path: Path, node: str) -> TopSnapshot:
    from croft.adapters.dataset.tail import NoDataset, read_newest

    try:
        return read_newest(path, node)
    except NoDataset as exc:
        raise UserError(f"{exc}; start `croft run`, or point --dataset (DATASET_PATH) at a dataset") from exc
    except OSError as exc:
        raise UserError(f"cannot read {exc.filename or path}: {exc.strerror}") from exc


def _read_or_wait(path: Path, node: str) -> TopSnapshot | str:
    """The snapshot, or the line to show while the dataset is away (rotated, being recreated)."""
    try:
        return _read(path, node)
    except UserError as exc:
        return f"{WAITING} ({exc})"


def _table(snapshot: TopSnapshot, now_ms: int, max_rows: int | None) -> TopTable:
    from croft.domain.top import build_table

    return build_table(snapshot.polls, now_ms, max_rows)


def _view(
    snapshot: TopSnapshot | str, now_ms: int, *, max_rows: int | None, width: int | None, styled: bool
) -> RenderableType:
    """The header, the notes and the table; `max_rows` None shows every process. In `width`
    characters the last column (the syscalls) ends in an ellipsis where it does not fit."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from croft.domain.top import fit_items

    if isinstance(snapshot, str) or not snapshot.polls:
        return Text(snapshot if isinstance(snapshot, str) else WAITING)
    table = _table(snapshot, now_ms, max_rows)
    lines: list[RenderableType] = [Text(table.header, style="bold" if styled else "")]
    notes = list(snapshot.notes)
    if snapshot.skipped_lines:
        notes.append(f"{snapshot.skipped_lines} lines skipped (not rows)")
    lines.extend(Text(note, style="yellow" if styled else "") for note in notes)
    grid = Table(
        box=None,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        show_edge=False,
        header_style="bold reverse" if styled else "",
    )
    # Cells come truncated to their column's width: each column is as wide as its widest cell,
    # and only the last one (the syscalls) gives way on a narrow terminal.
    widths = [
        max([len(column.title), *(len(row.cells[index]) for row in table.rows)])
        for index, column in enumerate(table.columns)
    ]
    if width is not None:
        widths[-1] = max(
            min(widths[-1], width - sum(widths[:-1]) - len(widths[:-1])), len(table.columns[-1].title)
        )
    for column, column_width in zip(table.columns, widths, strict=True):
        grid.add_column(
            column.title,
            justify="right" if column.justify == "right" else "left",
            width=column_width,
            no_wrap=True,
            overflow="ellipsis",
        )
    for row in table.rows:
        *fixed, items = row.cells
        grid.add_row(*fixed, fit_items(items, widths[-1]), style="green" if styled and row.gpu else None)
    lines.append(grid)
    if len(table.rows) < table.total_rows:
        lines.append(Text(f"{len(table.rows)} of {table.total_rows} processes shown, busiest CPU first"))
    return Group(*lines)


def _print(console: Console, snapshot: TopSnapshot, now_ms: int, styled: bool) -> None:
    if styled:
        console.print(_view(snapshot, now_ms, max_rows=None, width=console.width, styled=True))
        return
    with console.capture() as captured:
        console.print(_view(snapshot, now_ms, max_rows=None, width=None, styled=False))
    # rich pads every line to the table's width; a pipe gets the lines without trailing spaces
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    console.file.flush()


def _batch(
    console: Console, path: Path, node: str, interval: float, clock: SystemClock, snapshot: TopSnapshot
) -> None:
    """Not a terminal: print the whole table every `interval` seconds, like `top -b`."""
    deadline = clock.now().monotonic_ns
    current: TopSnapshot | str = snapshot
    while True:
        if isinstance(current, str):
            console.file.write(current + "\n")
            console.file.flush()
        else:
            _print(console, current, clock.now().unix_ms, styled=False)
        console.file.write("\n")
        deadline += int(interval * 1e9)
        clock.sleep_until(deadline)
        current = _read_or_wait(path, node)


def _live(
    console: Console, path: Path, node: str, interval: float, clock: SystemClock, snapshot: TopSnapshot
) -> None:
    """A full-screen table refreshed every `interval` seconds until q or Ctrl-C."""
    from rich.live import Live

    from croft.adapters.terminal import Keys

    def view(current: TopSnapshot | str) -> RenderableType:
        rows_fit = max(console.size.height - 4 - (0 if isinstance(current, str) else len(current.notes)), 1)
        return _view(current, clock.now().unix_ms, max_rows=rows_fit, width=console.size.width, styled=True)

    current: TopSnapshot | str = snapshot
    with Keys() as keys, Live(view(current), console=console, screen=True, auto_refresh=False) as live:
        deadline = clock.now().monotonic_ns
        while True:
            deadline += int(interval * 1e9)
            if keys.quit_before(deadline):
                return
            current = _read_or_wait(path, node)
            live.update(view(current), refresh=True)
