"""croft run: the collector."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError


def run(
    *,
    dataset: DatasetOpt = DEFAULT_DATASET,
    watch: Annotated[
        str,
        Parameter(
            env_var="WATCH_CGROUPS",
            help="comma-separated cgroup path prefixes whose processes are written too "
            "(e.g. kubepods,system.slice/docker); empty: only GPU holders",
        ),
    ] = "",
    frameworks: Annotated[
        Path | None,
        Parameter(env_var="CROFT_FRAMEWORKS", help="a framework catalog file; default: the built-in catalog"),
    ] = None,
    metrics_addr: Annotated[
        str,
        Parameter(
            env_var="CROFT_METRICS_ADDR", help="host:port to serve Prometheus /metrics on; empty: none"
        ),
    ] = "",
    rotate_secs: Annotated[
        int, Parameter(env_var="CROFT_ROTATE_SECS", help="rotate the live file after this many seconds")
    ] = 3600,
    rotate_bytes: Annotated[
        int, Parameter(env_var="CROFT_ROTATE_BYTES", help="rotate the live file at this size (1 GiB)")
    ] = 1073741824,
    retain_days: Annotated[
        int, Parameter(env_var="CROFT_RETAIN_DAYS", help="delete segments older than this many days")
    ] = 30,
    retain_bytes: Annotated[
        int,
        Parameter(
            env_var="CROFT_RETAIN_BYTES", help="delete the oldest segments while all exceed this (10 GiB)"
        ),
    ] = 10737418240,
) -> int:
    """Load the eBPF programs, poll every 2 s and write the dataset. Needs root."""
    raise UserError("croft run is not built yet", exit_code=2)
