"""croft collect: pull each node's dataset from the DaemonSet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.errors import UserError


def collect(
    *,
    namespace: Annotated[str, Parameter(help="the collector's namespace")] = "croft",
    out: Annotated[Path, Parameter(help="where per-node directories go")] = Path("research/data/nodes"),
) -> int:
    """Copy each collector pod's closed segments and live file into <out>/<node>/."""
    raise UserError("croft collect is not built yet", exit_code=2)
