"""croft stats: a summary of a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET
from croft.errors import UserError


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
) -> int:
    """Summarize a dataset: files, rows, time span, polls, nodes, containers, processes, workloads,
    frameworks and the busiest syscalls. Reads plain files and zstd segments."""
    raise UserError("croft stats is not built yet", exit_code=2)
