"""croft stats: a summary of a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.app.answers import _size, render, render_containers, report_skips
from croft.app.options import DEFAULT_DATASET

__all__ = ["_size", "render", "render_containers", "report_skips", "stats"]


def stats(
    path: Annotated[
        Path,
        Parameter(
            env_var="DATASET_PATH", help="a file, a dataset directory or a directory of per-node directories"
        ),
    ] = DEFAULT_DATASET,
    *,
    json: Annotated[
        bool, Parameter(negative=(), help="print one JSON object instead of the summary")
    ] = False,
    containers: Annotated[
        bool,
        Parameter(
            negative=(),
            help="list every container (full id) and watched host cgroup: cgroup, framework, nodes, "
            "first and last seen, rows",
        ),
    ] = False,
) -> int:
    """Summarize a dataset: files, rows, time span, polls, nodes, containers, processes, workloads,
    frameworks and the busiest syscalls. Reads plain files and zstd segments. On a terminal, a read
    longer than a second shows its progress on stderr."""
    from croft.app import answers

    return answers.stats(path, json=json, containers=containers)
