"""croft profile: the resource profile of one container, as JSON."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError


def profile(
    container_id: Annotated[str, Parameter(help="a container id, or a prefix of at least 4 hex digits")],
    *,
    dataset: DatasetOpt = DEFAULT_DATASET,
    from_ms: Annotated[int | None, Parameter(help="start of the window, unix ms, inclusive")] = None,
    to_ms: Annotated[int | None, Parameter(help="end of the window, unix ms, inclusive")] = None,
) -> int:
    """Print the nodes a container ran on, its polls and processes, the share of polls holding a GPU,
    and mean, p95 and max of CPU cores, memory, throttling and CPU pressure over the window."""
    raise UserError("croft profile is not built yet", exit_code=2)
