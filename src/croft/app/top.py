"""croft top: each process's latest row from the last 15 polls, as a live, interactive table."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from rich.console import Console, RenderableType

    from croft.adapters.dataset.tail import TopSnapshot
    from croft.adapters.host.clock import SystemClock
    from croft.domain.top.keys import Screen
    from croft.domain.top.replay import Replay
    from croft.domain.top.table import NodePoll

WAITING = "waiting for the first poll"
AT_BEFORE_MS = 15 * 2_000 * 2  # read back far enough to hold 15 polls before --at
AT_AFTER_MS = 10 * 60_000  # and this far after it, to step forwards
ASCII_SYMBOLS = str.maketrans({"…": "~", "·": "|", "↑": "^", "↓": "v", "←": "<", "→": ">"})


def top(
    dataset: DatasetOpt = DEFAULT_DATASET,
    *,
    interval: Annotated[float, Parameter(help="seconds between refreshes; q or Ctrl-C quits")] = 2.0,
    once: Annotated[bool, Parameter(negative=(), help="print once and exit")] = False,
    json: Annotated[bool, Parameter(negative=(), help="print the processes once as one JSON object")] = False,
    at: Annotated[
        str | None,
        Parameter(
            help="look back: show the poll at this time (2026-10-20T14:20:00Z, 10m ago, unix ms) and "
            "step through the polls around it with ← and →, as `below replay` does"
        ),
    ] = None,
) -> int:
    """Show each process's latest row from the last 15 polls (idle ones at 0 % with the age of
    their row): pod, container, pid, comm, framework, workload, CPU, what its container felt
    (throttling, CPU pressure, short-lived processes), RSS, network, I/O, cgroup, the busiest
    syscalls and the command line. Keys: c/m/s/p sort (again: reversed), / filter, arrows and
    PgUp/PgDn scroll, ? or h the keys, q quits. Reads only the end of the live file."""
    if not (math.isfinite(interval) and 0.1 <= interval <= 86400):
        raise UserError(
            f"--interval must be a positive number of seconds, got {interval:g} (0.1 to 86400 are "
            "accepted); try --interval 2"
        )
    import socket
    import sys

    from croft.adapters.host.clock import SystemClock
    from croft.app.console import PipeConsole

    screen = sys.stdout.isatty()
    styled = screen and not os.environ.get("NO_COLOR")
    ascii_only = not _encodes(sys.stdout, "…·↑↓←→")
    console = (
        PipeConsole(highlight=False, no_color=not styled, emoji=False)
        if screen
        else PipeConsole(width=1000, color_system=None, highlight=False, emoji=False)
    )
    clock = SystemClock()
    node = socket.gethostname()
    if at is not None:
        replay, index = _replay(dataset, node, at, clock.now().unix_ms)
        polls = replay.at(index)
        if json or once or not screen:
            now_ms = clock.now().unix_ms
            _print_once(
                console, polls, "", now_ms, json=json, styled=styled, ascii_only=ascii_only, live=False
            )
            return 0
        with contextlib.suppress(KeyboardInterrupt):
            _live(console, lambda _step: (polls, ""), clock, interval, styled, ascii_only, replay, index)
        return 0
    snapshot = _read(dataset, node)  # a missing or empty dataset is an error at start, in both modes
    if once or json:
        if not snapshot.polls:
            raise UserError(f"{dataset} has no complete poll yet; wait for `croft run` to write one")
        notes = _notes(snapshot)
        _print_once(
            console,
            snapshot.polls,
            notes,
            clock.now().unix_ms,
            json=json,
            styled=styled,
            ascii_only=ascii_only,
        )
        return 0
    try:
        if screen:
            _live(console, lambda _step: _current(dataset, node), clock, interval, styled, ascii_only)
        else:
            _batch(console, dataset, node, interval, clock)
    except KeyboardInterrupt:
        pass
    return 0


def _encodes(stream: object, text: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _read(path: Path, node: str) -> TopSnapshot:
    from croft.adapters.dataset.tail import NoDataset, read_newest

    try:
        return read_newest(path, node)
    except NoDataset as exc:
        raise UserError(f"{exc}; {_what_to_do(path)}") from exc
    except OSError as exc:
        raise UserError(f"cannot read {exc.filename or path}: {exc.strerror}") from exc


def _what_to_do(path: Path) -> str:
    """What to do about a dataset with no poll yet, from whether a collector holds its lock."""
    from croft.adapters.dataset.lock import holder

    writer = holder(path if path.is_dir() else path.parent)
    if writer is None:
        return "start `croft run`, or point --dataset (DATASET_PATH) at a dataset"
    watch = writer.get("watch")
    if watch == "":
        return (
            f"{writer.named()} writes it, but without --watch it writes only GPU holders, and there is "
            "none: restart it with --watch (WATCH_CGROUPS), e.g. "
            "`WATCH_CGROUPS=system.slice,user.slice make run`"
        )
    under = f" under --watch {watch}" if watch else " it watches"
    return (
        f"{writer.named()} writes it: rows come from its second poll on (4 s), for GPU holders and the "
        f"processes in cgroups{under}; if none come, compare its --watch with /proc/<pid>/cgroup"
    )


def _current(path: Path, node: str) -> tuple[Sequence[NodePoll], str]:
    """The polls to show and the notes (or the waiting line while the dataset is away)."""
    try:
        snapshot = _read(path, node)
    except UserError as exc:
        return (), f"{WAITING} ({exc})"
    return snapshot.polls, _notes(snapshot)


def _notes(snapshot: TopSnapshot) -> str:
    notes = list(snapshot.notes)
    if snapshot.skipped_lines:
        notes.append(f"{snapshot.skipped_lines} lines skipped (not rows)")
    return "\n".join(notes)


def _replay(path: Path, node: str, at: str, now_ms: int) -> tuple[Replay, int]:
    from croft import dataset
    from croft.domain.times import BadTime, parse_time
    from croft.domain.top.cells import age, utc_time
    from croft.domain.top.replay import AT_TOLERANCE_MS, Replay

    try:
        at_ms = parse_time(at, now_ms)
    except BadTime as exc:
        raise UserError(f"--at {exc}") from exc
    try:
        rows = dataset.node_rows(path, from_ms=at_ms - AT_BEFORE_MS, to_ms=at_ms + AT_AFTER_MS, host=node)
        replay = Replay.of(rows)
    except OSError as exc:
        raise UserError(f"cannot read {exc.filename or path}: {exc.strerror}") from exc
    index = replay.nearest(at_ms)
    if index is None:
        # the same answer for a time typed as a time and as an age (10m): the data must cover it
        when = f"--at {at} ({utc_time(at_ms)})"
        if replay.times:
            nearest = min(replay.times, key=lambda t: abs(t - at_ms))
            gap = age(abs(nearest - at_ms)).removesuffix(" ago")
            side = "later" if nearest > at_ms else "earlier"
            found = f"the nearest poll is {gap} {side}, {utc_time(nearest)}"
        else:
            found = f"no poll between {utc_time(at_ms - AT_BEFORE_MS)} and {utc_time(at_ms + AT_AFTER_MS)}"
        raise UserError(
            f"{path} has no poll within {AT_TOLERANCE_MS // 1000} s of {when}: {found}; "
            "give an --at time the dataset covers (croft stats shows its span)"
        )
    return replay, index


def _print_once(
    console: Console,
    polls: Sequence[NodePoll],
    notes: str,
    now_ms: int,
    *,
    json: bool,
    styled: bool,
    ascii_only: bool,
    live: bool = True,
) -> None:
    import sys

    if json:
        import msgspec

        from croft.domain.top.table import to_json

        sys.stdout.write(msgspec.json.encode(to_json(polls)).decode() + "\n")
        return
    width = console.width if console.is_terminal else None
    lines, _ = _lines(polls, notes, now_ms, width=width, height=None, screen=None, live=live)
    _write(console, lines, styled, ascii_only)


StyledLine = tuple[str, str]
"""A line and its style ("" for none): "header", "note", "titles", "gpu", "idle", "hint"."""


def _lines(
    polls: Sequence[NodePoll],
    notes: str,
    now_ms: int,
    *,
    width: int | None,
    height: int | None,
    screen: Screen | None,
    live: bool = True,
    steps: int = 0,
) -> tuple[list[StyledLine], int]:
    """The screen's lines: header, notes, column titles, rows (scrolled and cut to `height` when
    given), a count when rows are cut, and on a live screen the key hints; and the first row shown
    (the offset asked for, clamped to the last page)."""
    from croft.domain.top.keys import HELP_LINES, Screen, hint_line
    from croft.domain.top.layout import layout, lines
    from croft.domain.top.table import build_table

    state = screen or Screen()
    if state.help:
        keys = [(text, "header" if not index else "") for index, text in enumerate(HELP_LINES)]
        keys.append((hint_line(state, steps > 0), "hint"))
        return [(text[:width] if width is not None else text, style) for text, style in keys], state.offset
    if not polls:
        return [(notes or WAITING, "")], 0
    note_lines = [n for n in notes.split("\n") if n]
    chrome = 2 + len(note_lines) + (2 if screen is not None else 0)
    page = None if height is None else max(height - chrome - 1, 1)
    table = build_table(polls, now_ms, page, view=state.view, offset=state.offset, live=live)
    note_lines = [*table.notes, *note_lines]
    titles, rows = lines(table, layout(table, width))
    out: list[StyledLine] = [(table.header, "header")]
    out.extend((note, "note") for note in note_lines)
    out.append((titles, "titles"))
    for text, row in zip(rows, table.rows, strict=True):
        out.append((text, "idle" if row.idle else "gpu" if row.gpu else ""))
    if len(table.rows) < table.matching or table.matching < table.total_rows:
        first = table.first + 1
        shown = f"rows {first}-{first + len(table.rows) - 1} of {table.matching}" if table.rows else "no rows"
        of = f" ({table.total_rows} before the filter)" if table.matching < table.total_rows else ""
        out.append((f"{shown}{of}", ""))
    if screen is not None:
        out.append((hint_line(state, steps > 0), "hint"))
    if width is not None:
        from croft.domain.top.cells import fit_parts

        out = [
            (fit_parts(text, width) if style in ("header", "hint") else text[:width], style)
            for text, style in out
        ]
    return out, table.first


STYLES = {
    "header": "bold",
    "note": "yellow",
    "titles": "bold reverse",
    "gpu": "green",
    "idle": "dim",
    "hint": "reverse",
}


def _renderable(lines: Sequence[StyledLine], styled: bool, ascii_only: bool) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    return Group(
        *(
            Text(
                text.translate(ASCII_SYMBOLS) if ascii_only else text,
                style=STYLES.get(style, "") if styled else "",
                no_wrap=True,
                overflow="crop",
                end="\n",
            )
            for text, style in lines
        )
    )


def _write(console: Console, lines: Sequence[StyledLine], styled: bool, ascii_only: bool) -> None:
    if styled:
        console.print(_renderable(lines, styled, ascii_only))
        return
    text = "".join(line.rstrip() + "\n" for line, _ in lines)
    if ascii_only:
        text = text.translate(ASCII_SYMBOLS)
    console.file.write(text)
    console.file.flush()


def _batch(console: Console, path: Path, node: str, interval: float, clock: SystemClock) -> None:
    """Not a terminal: print the whole table every `interval` seconds, like `top -b`."""
    ascii_only = not _encodes(console.file, "…·")
    deadline = clock.now().monotonic_ns
    while True:
        polls, notes = _current(path, node)
        lines, _ = _lines(polls, notes, clock.now().unix_ms, width=None, height=None, screen=None)
        _write(console, [*lines, ("", "")], styled=False, ascii_only=ascii_only)
        deadline += int(interval * 1e9)
        clock.sleep_until(deadline)


def _live(
    console: Console,
    read: Callable[[int | None], tuple[Sequence[NodePoll], str]],
    clock: SystemClock,
    interval: float,
    styled: bool,
    ascii_only: bool,
    replay: Replay | None = None,
    index: int | None = None,
) -> None:
    """A full-screen table refreshed every `interval` seconds (live) until q or Ctrl-C; keys sort,
    filter, scroll and, with a replay, step through its polls."""
    import attrs
    from rich.live import Live

    from croft.adapters.terminal import Keys
    from croft.domain.top.keys import Screen, press

    state = Screen(step=index)
    steps = len(replay.times) if replay is not None else 0

    def current() -> tuple[Sequence[NodePoll], str]:
        if replay is not None and state.step is not None:
            from croft.domain.top.cells import utc_time

            moment = replay.times[state.step]
            return replay.at(
                state.step
            ), f"looking back: poll {state.step + 1} of {steps}, {utc_time(moment)}"
        return read(None)

    def view(polls: Sequence[NodePoll], notes: str) -> RenderableType:
        nonlocal state
        size = console.size
        lines, first = _lines(
            polls,
            notes,
            clock.now().unix_ms,
            width=size.width,
            height=size.height,
            screen=state,
            live=replay is None,
            steps=steps,
        )
        state = attrs.evolve(state, offset=first)
        return _renderable(lines, styled, ascii_only)

    polls, notes = current()
    with Keys() as keys, Live(view(polls, notes), console=console, screen=True, auto_refresh=False) as live:
        deadline = clock.now().monotonic_ns + int(interval * 1e9)
        while True:
            pressed = keys.wait(deadline)
            page = max(console.size.height - 6, 1)
            for key in pressed:
                state = press(state, key, page, steps)
            if state.quit:
                return
            if clock.now().monotonic_ns >= deadline or (replay is not None and pressed):
                polls, notes = current()
                deadline = max(deadline + int(interval * 1e9), clock.now().monotonic_ns)
            live.update(view(polls, notes), refresh=True)
