"""prometheus.csv for real: a real Prometheus (the Debian package) on loopback scrapes, every second,
a real exporter process serving the cAdvisor and kube-state-metrics names the export queries
(cluster_exporter.py: there is no cluster here, so it stands in for the kubelet's cAdvisor and for
kube-state-metrics); the harness's export over a window, written as `web` writes it, is checked
against what was served, value by value.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import apps
import prom
from croft.runs.rundir import PROMETHEUS_COLUMNS, PROMETHEUS_SERIES, write_prometheus
from tests.helpers import cluster_exporter as served
from tests.helpers.net import free_port
from tests.helpers.prometheus import prometheus as prometheus_on_loopback
from tests.helpers.prometheus import query, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
EXPORTER = Path(served.__file__)
STEP_S = 2
WINDOW_S = 10
POD_0, POD_1 = served.PODS

# Worked out by hand from cluster_exporter's table: sums over the real containers (webapp, envoy),
# not the pause container or the pod-level cgroup; both interfaces; the decoys left out.
EXPECTED = {
    ("cpu_cores", POD_0): 0.25 + 0.05,
    ("cpu_cores", POD_1): 0.40 + 0.05,
    ("cpu_throttled_fraction", POD_0): (3 + 0) / (10 + 10),
    ("cpu_throttled_fraction", POD_1): (6 + 0) / (10 + 10),
    ("memory_bytes", POD_0): 50e6 + 10e6,
    ("memory_bytes", POD_1): 80e6 + 10e6,
    ("network_rx_bytes_s", POD_0): 1000 + 10,
    ("network_rx_bytes_s", POD_1): 3000 + 10,
    ("network_tx_bytes_s", POD_0): 2000 + 0,
    ("network_tx_bytes_s", POD_1): 500 + 0,
    ("restarts", POD_0): 0 + 1,
    ("restarts", POD_1): 2 + 0,
    ("replicas", ""): 2,
}


@pytest.fixture(scope="module")
def exporter() -> Iterator[str]:
    """host:port of a running cluster_exporter.py."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(EXPORTER), str(port)])
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def prometheus(exporter: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prometheus_on_loopback({"cluster": exporter}, tmp_path_factory.mktemp("prometheus")) as base:
        yield base


@pytest.fixture(scope="module")
def webapp() -> apps.App:
    app = apps.load("webapp", apps.APPS_JSON)
    assert (app.namespace, app.deployment) == (served.NAMESPACE, "webapp")
    return app


@attrs.frozen
class Export:
    start_s: int
    end_s: int
    rows: list[dict[str, str]]
    header: list[str]


@pytest.fixture(scope="module")
def export(prometheus: str, webapp: apps.App, tmp_path_factory: pytest.TempPathFactory) -> Export:
    """A 10 s window, exported and written as `run.py web` does, once every rate window of the export
    (30 s) is full of samples: over a window only partly covered, Prometheus' rate() divides what
    it saw by the whole window, which is what a pod's first 30 s look like in prometheus.csv."""

    def rates() -> list[dict]:
        return query(prometheus, "rate(container_cpu_usage_seconds_total[30s])")

    wait_for("Prometheus to have two scrapes of the exporter", rates)
    start_s = math.ceil(time.time()) + int(prom.RATE_WINDOW.removesuffix("s")) + 1
    end_s = start_s + WINDOW_S
    while time.time() < end_s + 2.5:  # two scrapes past the window's end
        time.sleep(0.25)
    path = tmp_path_factory.mktemp("run") / "prometheus.csv"
    write_prometheus(path, prom.export(prometheus, webapp, start_s * 1000, end_s * 1000, step_s=STEP_S))
    with path.open(newline="", encoding="utf-8") as lines:
        reader = csv.DictReader(lines)
        rows = list(reader)
    return Export(start_s, end_s, rows, list(reader.fieldnames or ()))


def test_every_series_every_step_for_exactly_the_deployment_s_pods(export: Export) -> None:
    assert export.header == list(PROMETHEUS_COLUMNS)
    steps = [float(t) for t in range(export.start_s, export.end_s + 1, STEP_S)]
    assert len(steps) == 6
    got: dict[tuple[str, str], list[float]] = {}
    for row in export.rows:
        got.setdefault((row["series"], row["pod"]), []).append(float(row["unix_s"]))
    assert sorted(got) == sorted(EXPECTED)  # no pause container, no webapp-db, no other namespace
    assert {series for series, _ in got} == set(PROMETHEUS_SERIES)
    for key, times in got.items():
        assert times == steps, key


def test_the_values_are_what_the_exporter_served(export: Export) -> None:
    for row in export.rows:
        expected = EXPECTED[(row["series"], row["pod"])]
        value = float(row["value"])
        # Counters' rates within 2 % (scrape timestamps jitter against the exporter's clock);
        # gauges exactly.
        assert value == pytest.approx(expected, rel=0.02), row
        if row["series"] in ("memory_bytes", "restarts", "replicas"):
            assert value == expected, row


def test_a_query_prometheus_refuses_is_named_with_its_error(prometheus: str, webapp: apps.App) -> None:
    broken = attrs.evolve(webapp, deployment='web"app')
    now_ms = int(time.time() * 1000)
    with pytest.raises(prom.PrometheusError) as caught:
        prom.export(prometheus, broken, now_ms - 10_000, now_ms)
    message = str(caught.value)
    assert message.startswith(f"Prometheus at {prometheus} refused the cpu_cores query (HTTP 400): ")
    assert "parse error" in message, message


def test_no_prometheus_there_is_one_sentence(webapp: apps.App) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(prom.PrometheusError, match=r"^Prometheus at .* did not answer the cpu_cores query: "):
        prom.export(url, webapp, 0, 10_000)
