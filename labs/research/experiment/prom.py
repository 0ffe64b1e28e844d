"""prometheus.csv: the run's window of Prometheus series (cAdvisor and kube-state-metrics names),
one row per (time, series, pod) through the HTTP API's query_range.

A Deployment's pods are named `<deployment>-<pod-template-hash>-<5 characters>`: the pod selector
matches that shape exactly, so that another Deployment whose name starts with this one's
(`webapp-db` next to `webapp`) is not counted in it."""

from __future__ import annotations

from typing import Any

import httpx

from apps import App

STEP_S = 5
RATE_WINDOW = "30s"
_POD = 'namespace="{ns}",pod=~"{dep}-[a-z0-9]{1,10}-[a-z0-9]{5}"'
_CONTAINER = _POD + ',container!="",container!="POD"'


def _rate(metric: str, selector: str) -> str:
    return "sum by (pod) (rate(" + metric + "{" + selector + "}[" + RATE_WINDOW + "]))"


def _gauge(metric: str, selector: str) -> str:
    return "sum by (pod) (" + metric + "{" + selector + "})"


QUERIES = {
    "cpu_cores": _rate("container_cpu_usage_seconds_total", _CONTAINER),
    "cpu_throttled_fraction": _rate("container_cpu_cfs_throttled_periods_total", _CONTAINER)
    + " / "
    + _rate("container_cpu_cfs_periods_total", _CONTAINER),
    "memory_bytes": _gauge("container_memory_working_set_bytes", _CONTAINER),
    "network_rx_bytes_s": _rate("container_network_receive_bytes_total", _POD),
    "network_tx_bytes_s": _rate("container_network_transmit_bytes_total", _POD),
    "restarts": _gauge("kube_pod_container_status_restarts_total", _POD),
    # max: one series even where two kube-state-metrics replicas are scraped.
    "replicas": 'max(kube_deployment_spec_replicas{namespace="{ns}",deployment="{dep}"})',
}


class PrometheusError(RuntimeError):
    """Prometheus did not answer a query; the message names the series."""


def export(
    url: str, app: App, start_ms: int, end_ms: int, step_s: int = STEP_S
) -> list[tuple[float, str, str, float]]:
    """(unix_s, series, pod, value) rows of every series of QUERIES over the window."""
    rows: list[tuple[float, str, str, float]] = []
    with httpx.Client(base_url=url.rstrip("/"), timeout=30) as client:
        for series, template in QUERIES.items():
            # Names are DNS labels/subdomains: a dot is the only regex character one can hold.
            dep = app.deployment if series == "replicas" else app.deployment.replace(".", "[.]")
            query = template.replace("{ns}", app.namespace).replace("{dep}", dep)
            params: dict[str, Any] = {
                "query": query,
                "start": start_ms / 1000,
                "end": end_ms / 1000,
                "step": step_s,
            }
            try:
                response = client.get("/api/v1/query_range", params=params)
                body = response.json() if response.content else {}
            except (httpx.HTTPError, ValueError) as exc:
                raise PrometheusError(
                    f"Prometheus at {url} did not answer the {series} query: {exc}"
                ) from None
            if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
                error = body.get("error") if isinstance(body, dict) else None
                raise PrometheusError(
                    f"Prometheus at {url} refused the {series} query (HTTP {response.status_code}): "
                    f"{error or response.text[:200]}"
                )
            for result in body.get("data", {}).get("result", ()):
                pod = result.get("metric", {}).get("pod", "")
                for at, value in result.get("values", ()):
                    rows.append((float(at), series, pod, float(value)))
    return sorted(rows)
