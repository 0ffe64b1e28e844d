"""croft deploy: start the collector on Docker or Kubernetes."""

from __future__ import annotations

from typing import Annotated

from cyclopts import App, Parameter

from croft.errors import UserError

deploy_app = App(name="deploy", help="start the collector on Docker or Kubernetes")


@deploy_app.command
def docker(
    *,
    image: Annotated[str, Parameter(help="the collector image")] = "croft-collector",
    watch: Annotated[str, Parameter(help="comma-separated cgroup path prefixes to watch")] = "",
    dry_run: Annotated[bool, Parameter(negative=(), help="print the docker run command instead")] = False,
) -> int:
    """Run the collector in a Docker container on this host."""
    raise UserError("croft deploy docker is not built yet", exit_code=2)


@deploy_app.command
def kubernetes(
    *,
    image: Annotated[str, Parameter(help="the collector image")] = "croft-collector",
    watch: Annotated[str, Parameter(help="comma-separated cgroup path prefixes to watch")] = "kubepods",
    dry_run: Annotated[bool, Parameter(negative=(), help="print the manifests instead")] = False,
) -> int:
    """Apply the collector's DaemonSet and its companions to the cluster."""
    raise UserError("croft deploy kubernetes is not built yet", exit_code=2)
