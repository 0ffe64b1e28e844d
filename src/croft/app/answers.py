"""What `croft stats` and `croft profile` answer, apart from their cyclopts signatures (croft.app.stats,
croft.app.profile): plain options reach these through `croft.app.fastargs` without importing
cyclopts, whose import and app cost more than a summarized dataset's whole answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from croft.app.checks import DEFAULT_DATASET, window
from croft.app.fastargs import Spec
from croft.domain.utc import readable
from croft.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from croft.domain.dataset.containers import ContainerEntry
    from croft.domain.dataset.summary import Stats

SHOWN_IDS = 10  # an ambiguous prefix lists at most this many of the ids it matches
# lines (decompressed) below which croft profile reads in this process: its work per line (a search
# for the subject) is a fraction of stats', so a worker pool's start (multiprocessing's imports, the
# forks, ~0.1 CPU s) pays only beyond a few hourly segments (benchmarks/summaries.py: an hour's
# window, one 65 MB segment and three 11 MB live files, 0.44-0.60 s inline vs 0.66-0.84 s on 2 workers)
PROFILE_INLINE_BYTES = 256 << 20


# the options of croft.app.stats.stats and croft.app.profile.profile, for `croft.app.fastargs.parse_spec`
STATS = Spec(
    options={},
    flags={"--json": "json", "--containers": "containers"},
    positional=("path", "Path"),
    env={"path": "DATASET_PATH"},
)
PROFILE = Spec(
    options={
        "--cgroup": ("cgroup", "str | None"),
        "--pid": ("pid", "int | None"),
        "--dataset": ("dataset", "Path"),
        "--from": ("from_", "str | None"),
        "--to": ("to", "str | None"),
        "--from-ms": ("from_ms", "int | None"),
        "--to-ms": ("to_ms", "int | None"),
    },
    positional=("container_id", "str | None"),
    env={"dataset": "DATASET_PATH"},
)


def stats(path: Path = DEFAULT_DATASET, *, json: bool = False, containers: bool = False) -> int:
    """Summarize a dataset: files, rows, time span, polls, nodes, containers, processes, workloads,
    frameworks and the busiest syscalls. Reads plain files and zstd segments. On a terminal, a read
    longer than a second shows its progress on stderr."""
    from croft.adapters.dataset.scan import read_containers, read_stats
    from croft.adapters.dataset.summaries import remembered_checks
    from croft.adapters.host.clock import SystemClock
    from croft.app.progress import Progress

    remembered_checks(SystemClock().now().unix_ms * 1_000_000)
    with Progress.on_stderr() as progress:
        if containers:
            _, listing = read_containers(path, progress=progress.update)
        else:
            facts, total = read_stats(path, syscalls=True, progress=progress.update)
    if containers:
        report_skips(listing.skips.report())
        entries = listing.listing()
        if not entries:
            raise UserError(f"{path} holds no rows; give a dataset that the collector has written to")
        if json:
            import orjson

            body = {"containers": [entry.to_json() for entry in entries]}
            sys.stdout.write(orjson.dumps(body).decode() + "\n")
        else:
            render_containers(entries)
        return 0
    report_skips(total.skips.report())
    summary = total.summary(facts)
    if summary.rows == 0:
        raise UserError(f"{path} holds no rows; give a dataset that the collector has written to")
    if json:
        import orjson

        sys.stdout.write(orjson.dumps(summary.to_json()).decode() + "\n")
    else:
        render(path, summary)
    return 0


def profile(
    container_id: str | None = None,
    *,
    cgroup: str | None = None,
    pid: int | None = None,
    dataset: Path = DEFAULT_DATASET,
    from_: str | None = None,
    to: str | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
) -> int:
    """Print the nodes a container (or a host cgroup, or a process) ran on, its polls and processes,
    the share of polls holding a GPU, and mean, p95 and max of CPU cores, memory, throttling and CPU
    pressure over the window."""
    import orjson

    from croft.adapters.dataset.scan import read_profile
    from croft.adapters.host.clock import SystemClock
    from croft.domain.dataset.profile import Subject, prefix_error, subject_profile

    given = [
        name
        for name, value in (("a container id", container_id), ("--cgroup", cgroup), ("--pid", pid))
        if value is not None
    ]
    if len(given) != 1:
        raise UserError(
            "give one of a container id, --cgroup PATH or --pid PID"
            + (f", not {' and '.join(given)}" if given else "")
        )
    now_ms = SystemClock().now().unix_ms
    start, end = window(from_, to, from_ms, to_ms, now_ms)
    if cgroup is not None:
        subject = Subject("cgroup", "/" + cgroup.strip("/") if cgroup.strip("/") else "/")
        what = f"cgroup {subject.value}"
    elif pid is not None:
        if pid <= 0:
            raise UserError(f"--pid takes a process id above 0, got {pid}")
        subject = Subject("pid", str(pid))
        what = f"process {pid}"
    else:
        assert container_id is not None
        problem = prefix_error(container_id)
        if problem:
            raise UserError(problem + "; for a host cgroup or a process use --cgroup PATH or --pid PID")
        subject = Subject("container", container_id.lower())
        what = ""
    from croft.adapters.dataset.summaries import remembered_checks

    remembered_checks(now_ms * 1_000_000)
    found = read_profile(
        dataset,
        subject.value if subject.kind == "container" else "",
        start,
        end,
        subject=subject,
        inline_bytes=PROFILE_INLINE_BYTES,
    )
    report_skips(found.skips.report())
    ids = found.matching_ids()
    if not ids:
        hint = "croft stats --containers lists the containers and cgroups it holds"
        if subject.kind == "container":
            raise UserError(f"no container id starting with {subject.value} in {dataset}; {hint}")
        raise UserError(f"no rows of {what} in {dataset}; {hint}")
    if len(ids) > 1:
        shown = ", ".join(ids[:SHOWN_IDS]) + (
            f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        )
        raise UserError(
            f"container id prefix {subject.value} matches {len(ids)} containers: {shown}; give more digits"
        )
    track = found.tracks[ids[0]]
    result = subject_profile(subject, ids[0], track, start, end)
    if result is None:
        name = what or f"container {ids[0]}"
        raise UserError(
            f"{name} has no rows from {_end(start)} to {_end(end)}; its rows span "
            f"{track.first_ms} to {track.last_ms} (unix ms)"
        )
    sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
    return 0


def render_containers(entries: Sequence[ContainerEntry]) -> None:
    """One line per container or host cgroup; full ids, whole cgroup paths."""
    from croft.app.console import PipeConsole

    console = PipeConsole(highlight=False, soft_wrap=True)
    titles = ("CONTAINER ID", "FRAMEWORK", "NODES", "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "ROWS", "CGROUP")
    rows = [
        (
            entry.container_id or "(host)",
            entry.framework or "-",
            ",".join(entry.nodes),
            readable(entry.first_ms)[:-4],
            readable(entry.last_ms)[:-4],
            f"{entry.rows:,}",
            entry.cgroup,
        )
        for entry in entries
    ]
    widths = [max(len(title), *(len(row[i]) for row in rows)) for i, title in enumerate(titles)]
    right = {5}
    for cells in (titles, *rows):
        line = "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        )
        console.print(line.rstrip(), markup=False, style="bold" if cells is titles else None)
    noun = "container" if sum(e.container_id is not None for e in entries) == 1 else "containers"
    hosts = sum(e.container_id is None for e in entries)
    cgroups = "host cgroup" if hosts == 1 else "host cgroups"
    console.print(
        f"{sum(e.container_id is not None for e in entries)} {noun}, {hosts} {cgroups}", markup=False
    )


def report_skips(sentences: tuple[str, ...]) -> None:
    """Each skip report as one `croft: ...` line on stderr."""
    for sentence in sentences:
        print(f"croft: {sentence}", file=sys.stderr)


def _size(n: float) -> str:
    """Bytes in binary units, as croft top writes them: 812 B, 12.0 KiB, 1.1 GiB."""
    from croft.app.stats_text import size

    return size(n)


def render(path: Path, s: Stats) -> None:
    """The human summary: a table of totals, then workloads, frameworks and syscalls side by side
    (one under the other in a narrow terminal). Where rich would write it without control codes
    and wrap nothing, it is written as the same text without importing rich (croft.app.stats_text)."""
    import os

    from croft.app.stats_text import plain_lines, plain_width

    width = plain_width(os.environ, sys.stdout)
    lines = None if width is None else plain_lines(path, s, width)
    if lines is not None:
        sys.stdout.write("".join(line + "\n" for line in lines))
        return
    render_rich(path, s)


def render_rich(path: Path, s: Stats, console: Console | None = None) -> None:
    """`render` through rich: a table of totals, then workloads, frameworks and syscalls side by
    side, or one under the other on a console narrower than 80 columns."""
    from rich import box
    from rich.table import Table

    from croft.app.console import PipeConsole
    from croft.app.stats_text import tables, totals

    console = console or PipeConsole(highlight=False)
    table_of_totals = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    table_of_totals.add_column(style="bold")
    table_of_totals.add_column()
    for name, value in totals(s):
        table_of_totals.add_row(name, value)
    console.print(f"[bold]croft stats[/bold] {path}")
    console.print(table_of_totals)

    def table(title: str, headers: tuple[str, str], items: list[tuple[str, str]]) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        # whole names (a syscall name is never cut): the column is as wide as its longest
        t.add_column(headers[0], no_wrap=True, min_width=max([len(headers[0]), *(len(n) for n, _ in items)]))
        t.add_column(headers[1], justify="right")
        for name, value in items:
            t.add_row(name, value)
        return t

    three = [table(*part) for part in tables(s)]
    if console.width >= 80:  # side by side; one under the other in a narrow terminal
        grid = Table.grid(padding=(0, 4))
        grid.add_row(*three)
        console.print()
        console.print(grid)
        return
    for t in three:
        console.print()
        console.print(t)


def _end(unix_ms: int | None) -> str:
    return "the start" if unix_ms is None else str(unix_ms)
