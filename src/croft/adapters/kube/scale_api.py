"""The Kubernetes API as croft scale uses it, over plain HTTP to a kubectl proxy (`--api`).

Four calls: get one Deployment, list pods by label selector, PATCH a Deployment's scale
subresource, and GET a collector pod's /metrics through the API server's pod proxy
(`/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics`). Every call has a timeout and is retried
with exponential backoff on connection errors, timeouts and 5xx answers (kubectl proxy answers 502/503
while the API server restarts); all four are idempotent, so a retry is safe. Failures end as one
error of the port (`croft.adapters.kube.port`: `Unreachable`, `Denied`, `NotFound`, `KubeError`) whose
message is one sentence naming what failed and what to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from croft.adapters.kube.port import Denied, KubeError, NotFound, Unreachable

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class KubeClient:
    """The `ScaleApi` port by httpx against `base_url` (a kubectl proxy: no credentials of its own).

    `attempts` tries per call, sleeping `backoff_s`, 2 x `backoff_s`, ... between them."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 2.0,
        attempts: int = 3,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._attempts = max(attempts, 1)
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 1.0)),
            transport=transport,
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, what: str, attempts: int = 0, **kwargs: Any) -> httpx.Response:
        """One call with retries (`attempts`, or the client's); `what` names it in errors (e.g.
        "get deployment croft-exp/webapp")."""
        problem = ""
        attempts = attempts or self._attempts
        for attempt in range(attempts):
            if attempt:
                self._sleep(self._backoff_s * 2 ** (attempt - 1))
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TimeoutException:
                problem = "timed out"
                continue
            except httpx.TransportError as exc:
                problem = str(exc) or type(exc).__name__
                continue
            if response.status_code in RETRY_STATUSES:
                problem = f"HTTP {response.status_code} {_message(response)}".rstrip()
                continue
            if response.status_code in (401, 403):
                raise Denied(
                    f"the Kubernetes API denied {what} (HTTP {response.status_code}): grant that verb to "
                    "the scaler's ServiceAccount (see deploy/kubernetes/scaler.yaml)",
                    response.status_code,
                )
            if response.status_code == 404:
                raise NotFound(f"{what} failed: not found (HTTP 404)", 404)
            if response.status_code >= 400:
                raise KubeError(
                    f"{what} failed: HTTP {response.status_code} {_message(response)}".rstrip(),
                    response.status_code,
                )
            return response
        raise Unreachable(
            f"cannot {what} through {self.base_url} after {attempts} tries ({problem}); "
            "check that kubectl proxy runs there and reaches the API server"
        )

    def deployment(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The Deployment object (decoded JSON)."""
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        return _json(self._call("GET", path, f"get deployment {namespace}/{name}"))

    def pods(self, namespace: str, selector: str) -> list[Mapping[str, Any]]:
        """The pods of `namespace` matching the label `selector`."""
        what = f"list pods in {namespace} matching {selector}"
        body = _json(
            self._call(
                "GET", f"/api/v1/namespaces/{namespace}/pods", what, params={"labelSelector": selector}
            )
        )
        items = body.get("items") or []
        return [item for item in items if isinstance(item, Mapping)]

    def patch_scale(self, namespace: str, name: str, replicas: int) -> int:
        """Set the Deployment's spec.replicas through its scale subresource; returns what the API kept."""
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"
        response = self._call(
            "PATCH",
            path,
            f"patch deployments/scale {namespace}/{name}",
            content=f'{{"spec":{{"replicas":{int(replicas)}}}}}',
            headers={"Content-Type": "application/merge-patch+json"},
        )
        spec = _json(response).get("spec") or {}
        return int(spec.get("replicas", replicas))

    def pod_metrics(self, namespace: str, pod: str, port: int, query: str = "") -> str:
        """A pod's /metrics text through the API server's pod proxy, which passes `query` (the part of
        the URL after `?`) on to the pod; one try (the next poll retries)."""
        url = f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/metrics"
        if query:
            url = f"{url}?{query}"
        return self._call("GET", url, f"get /metrics of pod {namespace}/{pod}", attempts=1).text


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
    return str(body.get("message", ""))[:200] if isinstance(body, Mapping) else ""


def _json(response: httpx.Response) -> Mapping[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise KubeError(f"the Kubernetes API answered {response.request.url.path} with non-JSON") from None
    if not isinstance(body, Mapping):
        raise KubeError(f"the Kubernetes API answered {response.request.url.path} with a non-object")
    return body
