"""prometheus.csv: the run's window of Prometheus series (cAdvisor and kube-state-metrics names),
one row per (time, series, pod) through the HTTP API's query_range."""

from __future__ import annotations

from typing import Any

import httpx

from apps import App

STEP_S = 5
RATE_WINDOW = "30s"
_POD = 'namespace="{ns}",pod=~"{dep}-.*"'
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
    "replicas": 'kube_deployment_spec_replicas{namespace="{ns}",deployment="{dep}"}',
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
            query = template.replace("{ns}", app.namespace).replace("{dep}", app.deployment)
            params: dict[str, Any] = {
                "query": query,
                "start": start_ms / 1000,
                "end": end_ms / 1000,
                "step": step_s,
            }
            try:
                response = client.get("/api/v1/query_range", params=params)
                response.raise_for_status()
                body = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise PrometheusError(
                    f"Prometheus at {url} did not answer the {series} query: {exc}"
                ) from None
            for result in body.get("data", {}).get("result", ()):
                pod = result.get("metric", {}).get("pod", "")
                for at, value in result.get("values", ()):
                    rows.append((float(at), series, pod, float(value)))
    return sorted(rows)
