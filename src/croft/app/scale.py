"""croft scale: add replicas from the eBPF request rate, ahead of the HPA."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from croft.errors import UserError


def scale(
    *,
    namespace: Annotated[str, Parameter(help="the Deployment's namespace")],
    deployment: Annotated[str, Parameter(help="the Deployment to scale")],
    calls_per_request: Annotated[float, Parameter(help="syscalls of --syscall per request")],
    cpu_per_request_ms: Annotated[float, Parameter(help="CPU time per request, ms")],
    syscall: Annotated[str, Parameter(help="the syscall that counts requests")] = "sendto",
    target: Annotated[float, Parameter(help="target CPU utilization, as the HPA's")] = 0.7,
    max_replicas: Annotated[int, Parameter(help="most replicas")] = 10,
    confirm_polls: Annotated[int, Parameter(help="polls asking for more before scaling")] = 2,
    interval: Annotated[float, Parameter(help="seconds between polls")] = 2.0,
    api: Annotated[
        str, Parameter(help="the Kubernetes API, through kubectl proxy")
    ] = "http://127.0.0.1:8001",
    dry_run: Annotated[bool, Parameter(negative=(), help="log decisions without changing replicas")] = False,
) -> int:
    """Every poll, read the collectors' /metrics, turn the syscall rate of the Deployment's pods into a
    request rate, and ask for rate x CPU per request / (CPU limit x target) replicas, rounded up."""
    raise UserError("croft scale is not built yet", exit_code=2)
