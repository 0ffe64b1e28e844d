"""Option types shared by several commands, with the env variables and defaults of docs/commands.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.app.checks import DEFAULT_DATASET, window

__all__ = ["DEFAULT_DATASET", "DatasetOpt", "FromOpt", "ToOpt", "window"]

DatasetOpt = Annotated[
    Path,
    Parameter(
        name="--dataset",
        env_var="DATASET_PATH",
        help="the dataset: a file, a dataset directory or a directory of per-node directories",
    ),
]


FromOpt = Annotated[
    str | None,
    Parameter(
        name="--from",
        help="start of the window, inclusive: RFC 3339 (2026-10-20T14:20:00Z), relative (10m, 2h ago) "
        "or unix ms",
    ),
]
ToOpt = Annotated[
    str | None,
    Parameter(name="--to", help="end of the window, inclusive: as --from (e.g. 5m ago, now)"),
]
