"""Option types shared by several commands, with the env variables and defaults of commands.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

DEFAULT_DATASET = Path("/var/lib/croft/croft-dataset.jsonl")

DatasetOpt = Annotated[
    Path,
    Parameter(
        name="--dataset",
        env_var="DATASET_PATH",
        help="the dataset: a file, a dataset directory or a directory of per-node directories",
    ),
]
