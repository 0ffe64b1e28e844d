"""croft stats: a summary of a dataset."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.domain.utc import readable
from croft.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console
    from rich.table import Table

    from croft.domain.dataset.containers import ContainerEntry
    from croft.domain.dataset.summary import Stats

SIDE_BY_SIDE_WIDTH = 80  # the three tables stand side by side from this width on


def stats(
    path: DatasetOpt = DEFAULT_DATASET,
    *,
    json: Annotated[
        bool, Parameter(negative=(), help="print one JSON object instead of the summary")
    ] = False,
    containers: Annotated[
        bool,
        Parameter(
            negative=(),
            help="list every container (full id) and watched host cgroup: its pod and name in it (where "
            "the collector read them), cgroup, framework, nodes, first and last seen, rows",
        ),
    ] = False,
) -> int:
    """Summarize a dataset: files, rows, time span, polls, nodes, containers, processes, workloads,
    frameworks and the busiest syscalls. Reads plain files and zstd segments. On a terminal, a read
    longer than a second shows its progress on stderr."""
    import msgspec

    from croft.adapters.dataset.scan import read_containers, read_stats
    from croft.app.console import report_skips
    from croft.app.progress import Progress

    with Progress(after_s=1.0) as progress:
        task = progress.add("croft: reading")

        def told(done_bytes: int, total_bytes: int) -> None:
            progress.update(task, completed=done_bytes, total=total_bytes)

        if containers:
            _, listing = read_containers(path, progress=told)
        else:
            facts, total = read_stats(path, syscalls=True, progress=told)
    if containers:
        report_skips(listing.skips.report())
        entries = listing.listing()
        if not entries:
            raise UserError(f"{path} holds no rows; give a dataset that the collector has written to")
        if json:
            body = {"containers": [entry.to_json() for entry in entries]}
            sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
        else:
            render_containers(entries)
        return 0
    report_skips(total.skips.report())
    summary = total.summary(facts)
    if summary.rows == 0:
        raise UserError(f"{path} holds no rows; give a dataset that the collector has written to")
    if json:
        sys.stdout.write(msgspec.json.encode(summary.to_json()).decode() + "\n")
    else:
        render(path, summary)
    return 0


def render_containers(entries: Sequence[ContainerEntry], console: Console | None = None) -> None:
    """One line per container or host cgroup; full ids, whole cgroup paths; where rows named pods,
    each container's pod (`namespace/name`) and its name in the pod."""
    from rich import box
    from rich.table import Table

    from croft.app.console import PipeConsole

    console = console or PipeConsole(highlight=False, soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    named = any(entry.pod is not None for entry in entries)
    titles = ("CONTAINER ID", *(("POD", "CONTAINER") if named else ()), "FRAMEWORK", "NODES")
    for title in (*titles, "FIRST SEEN (UTC)", "LAST SEEN (UTC)"):
        table.add_column(title, no_wrap=True)
    table.add_column("ROWS", justify="right", no_wrap=True)
    table.add_column("CGROUP", no_wrap=True)
    for entry in entries:
        pod = entry.pod
        names = (f"{pod[0]}/{pod[1]}", pod[2] or "-") if pod is not None else ("-", "-")
        table.add_row(
            entry.container_id or "(host)",
            *(names if named else ()),
            entry.framework or "-",
            ",".join(entry.nodes),
            readable(entry.first_ms)[:-4],
            readable(entry.last_ms)[:-4],
            f"{entry.rows:,}",
            entry.cgroup,
        )
    if console.is_terminal:
        console.print(table)
    else:  # a pipe or a file: whole values, at the table's own width, no trailing blanks
        console.file.write(plain_text(table))
    containers = sum(e.container_id is not None for e in entries)
    hosts = len(entries) - containers
    console.print(
        f"{containers} {'container' if containers == 1 else 'containers'}, "
        f"{hosts} {'host cgroup' if hosts == 1 else 'host cgroups'}",
        markup=False,
    )


def size(n: float) -> str:
    """Bytes in binary units: 812 B, 12.0 KiB, 1.1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def totals(s: Stats) -> list[tuple[str, str]]:
    """The (name, value) rows of the summary's first table."""
    f = s.files
    noun = "file" if f.files == 1 else "files"
    rows = [
        (
            "files",
            f"{f.files} {noun} ({f.compressed} zstd, {f.files - f.compressed} plain), "
            f"{size(f.bytes_on_disk)} on disk",
        ),
        ("rows", f"{s.rows:,}"),
        ("skipped", f"{s.skipped_lines:,} lines"),
    ]
    if s.first_ms is not None and s.last_ms is not None:
        rows.append(("first", f"{s.first_ms}  {readable(s.first_ms, ms=True)}"))
        rows.append(("last", f"{s.last_ms}  {readable(s.last_ms, ms=True)}"))
    rows.append(("polls", f"{s.polls:,}"))
    rows.append(("nodes", f"{len(s.nodes)}: {', '.join(s.nodes)}"))
    rows.append(("containers", f"{s.containers:,}"))
    rows.append(("processes", f"{s.processes:,} (distinct node and pid)"))
    return rows


def render(path: Path, s: Stats, console: Console | None = None) -> None:
    """The human summary: a table of totals, then workloads, frameworks and syscalls side by side,
    or one under the other on a console narrower than `SIDE_BY_SIDE_WIDTH`."""
    from rich.table import Table
    from rich.text import Text

    from croft.app.console import PipeConsole

    console = console or PipeConsole(highlight=False)
    table_of_totals = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    table_of_totals.add_column(style="bold")
    table_of_totals.add_column()
    for name, value in totals(s):
        table_of_totals.add_row(name, value)
    console.print(Text.assemble(("croft stats", "bold"), " ", str(path)))
    console.print(table_of_totals)
    three = [
        _table("workloads", ("workload", "rows"), [(w, f"{n:,}") for w, n in s.workloads]),
        _table("frameworks", ("framework", "containers"), [(w, f"{n:,}") for w, n in s.frameworks]),
        _table(
            "busiest syscalls",
            ("syscall", "mean calls/s"),
            [(name, f"{rate:,.1f}") for name, rate in s.busiest_syscalls],
        ),
    ]
    if console.width >= SIDE_BY_SIDE_WIDTH:
        grid = Table.grid(padding=(0, 4))
        grid.add_row(*three)
        console.print()
        console.print(grid)
        return
    for t in three:
        console.print()
        console.print(t)


def _table(title: str, headers: tuple[str, str], items: list[tuple[str, str]]) -> Table:
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    # whole names (a syscall name is never cut): the column is as wide as its longest
    t.add_column(headers[0], no_wrap=True, min_width=max([len(headers[0]), *(len(n) for n, _ in items)]))
    t.add_column(headers[1], justify="right")
    for name, value in items:
        t.add_row(name, value)
    return t


def plain_text(renderable: Table) -> str:
    """`renderable` as plain text at its natural width (nothing cut or wrapped), lines right-trimmed."""
    import io

    from rich.console import Console

    natural = Console(width=1 << 16, file=io.StringIO()).measure(renderable).maximum
    console = Console(width=natural, file=io.StringIO(), color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in captured.get().splitlines())
