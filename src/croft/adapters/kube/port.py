"""The Kubernetes port: what croft scale asks of the API server, and the one taxonomy of API failures.

Both Kubernetes adapters raise these errors: `croft.adapters.kube.scale_api` (httpx to a kubectl
proxy, for croft scale) and `croft.adapters.kube.cluster` (a kubeconfig, for croft deploy and croft
collect). The app catches them by kind, so no adapter's own exception types leak into it:

- `Unreachable`: no answer (connection refused, timeout, 5xx from the proxy) after the retries.
- `Denied`: the API refused a verb (HTTP 401 or 403), i.e. the account lacks it.
- `NotFound`: the object does not exist (HTTP 404).
- `KubeError`: any other failure; the base of all four.

Every message is one sentence naming what failed and what to do; `status` is the HTTP status, 0
when there was no answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class KubeError(Exception):
    """A Kubernetes API call that failed; the message is one sentence, `status` the HTTP status (0:
    no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Unreachable(KubeError):
    """The API (or the proxy in front of it) did not answer, even after the retries."""


class Denied(KubeError):
    """The API refused a verb: the account lacks it (HTTP 401/403)."""


class NotFound(KubeError):
    """The object does not exist (HTTP 404)."""


def error_for(status: int, message: str) -> KubeError:
    """The error of kind `status` (an HTTP status; 0: no answer) with `message`."""
    if status == 0:
        return Unreachable(message)
    if status in (401, 403):
        return Denied(message, status)
    if status == 404:
        return NotFound(message, status)
    return KubeError(message, status)


class ScaleApi(Protocol):
    """The four calls of croft scale; each raises one of the errors above."""

    def deployment(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The Deployment object (decoded JSON)."""
        ...

    def pods(self, namespace: str, selector: str) -> list[Mapping[str, Any]]:
        """The pods of `namespace` matching the label `selector`."""
        ...

    def patch_scale(self, namespace: str, name: str, replicas: int) -> int:
        """Set the Deployment's spec.replicas; returns what the API kept."""
        ...

    def pod_metrics(self, namespace: str, pod: str, port: int, query: str = "") -> str:
        """A pod's /metrics text through the API server's pod proxy; `query` (the part of the URL
        after `?`, croft.domain.metrics.query) asks for only some series."""
        ...
