"""croft profile: the resource profile of one container, host cgroup or process, as JSON."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from croft.app.answers import SHOWN_IDS
from croft.app.options import DEFAULT_DATASET, DatasetOpt, FromOpt, ToOpt

__all__ = ["SHOWN_IDS", "profile"]


def profile(
    container_id: Annotated[
        str | None, Parameter(help="a container id, or a prefix of at least 4 hex digits")
    ] = None,
    *,
    cgroup: Annotated[
        str | None,
        Parameter(
            help="profile a cgroup instead, by its path as rows write it (e.g. /system.slice/etl.service)"
        ),
    ] = None,
    pid: Annotated[
        int | None,
        Parameter(
            help="profile one process instead: its own CPU and RSS, its cgroup's throttling and pressure"
        ),
    ] = None,
    dataset: DatasetOpt = DEFAULT_DATASET,
    from_: FromOpt = None,
    to: ToOpt = None,
    from_ms: Annotated[int | None, Parameter(help="start of the window, unix ms, inclusive")] = None,
    to_ms: Annotated[int | None, Parameter(help="end of the window, unix ms, inclusive")] = None,
) -> int:
    """Print the nodes a container (or a host cgroup, or a process) ran on, its polls and processes,
    the share of polls holding a GPU, and mean, p95 and max of CPU cores, memory, throttling and CPU
    pressure over the window."""
    from croft.app import answers

    return answers.profile(
        container_id,
        cgroup=cgroup,
        pid=pid,
        dataset=dataset,
        from_=from_,
        to=to,
        from_ms=from_ms,
        to_ms=to_ms,
    )
