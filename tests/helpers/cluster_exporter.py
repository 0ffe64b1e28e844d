"""A stand-in for a cluster's cAdvisor and kube-state-metrics endpoints, for prom.py's test: the
metric names and labels the harness's export queries (no cluster here), with known values.

    python cluster_exporter.py PORT        serves /metrics on 127.0.0.1:PORT until SIGTERM

Counters grow at a constant rate from when the process starts (`BASE + rate * seconds`), so a
Prometheus `rate()` over them is that rate; gauges are constant. Besides the two pods of the
Deployment `webapp` in `croft-exp`, it serves what the export must leave out: the pause container
(`container="POD"`) and the pod-level cgroup (`container=""`) of each pod, a Deployment `webapp-db`
in the same namespace, and a `webapp` in another namespace.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

NAMESPACE = "croft-exp"
PODS = ("webapp-5d8f7c9b4-x2k7q", "webapp-5d8f7c9b4-m9v4t")
DECOYS = (("croft-exp", "webapp-db-6c7d8f9b5-klmno"), ("other", "webapp-5d8f7c9b4-zzzzz"))
BASE = 1000.0  # every counter's value at start: far from zero, so rate() never extrapolates to it

# Per pod of PODS (same order): per container (webapp, envoy, POD, "").
CPU_CORES = ((0.25, 0.05, 0.01, 0.31), (0.40, 0.05, 0.01, 0.46))
THROTTLED_PER_S = ((3.0, 0.0, 0.0, 100.0), (6.0, 0.0, 0.0, 100.0))
PERIODS_PER_S = ((10.0, 10.0, 0.0, 100.0), (10.0, 10.0, 0.0, 100.0))
MEMORY_BYTES = ((50e6, 10e6, 1e6, 61e6), (80e6, 10e6, 1e6, 91e6))
CONTAINERS = ("webapp", "envoy", "POD", "")
# Per pod: per interface (eth0, tunl0), of the pod's network namespace (container="").
RX_BYTES_PER_S = ((1000.0, 10.0), (3000.0, 10.0))
TX_BYTES_PER_S = ((2000.0, 0.0), (500.0, 0.0))
INTERFACES = ("eth0", "tunl0")
# Per pod: per real container (webapp, envoy).
RESTARTS = ((0.0, 1.0), (2.0, 0.0))
# (namespace, deployment, spec.replicas)
REPLICAS = (("croft-exp", "webapp", 2.0), ("croft-exp", "webapp-db", 5.0), ("other", "webapp", 7.0))
DECOY_SCALE = 1000.0  # decoy pods serve the first pod's values times this: a leak is obvious


class ClusterCollector:
    def __init__(self, started: float) -> None:
        self.started = started

    def collect(self) -> Iterator[Metric]:
        elapsed = time.time() - self.started
        pods = [(NAMESPACE, pod, i, 1.0) for i, pod in enumerate(PODS)]
        pods += [(ns, pod, 0, DECOY_SCALE) for ns, pod in DECOYS]
        labels = ["namespace", "pod", "container"]
        cpu = CounterMetricFamily("container_cpu_usage_seconds_total", "CPU seconds", labels=labels)
        throttled = CounterMetricFamily(
            "container_cpu_cfs_throttled_periods_total", "throttled", labels=labels
        )
        periods = CounterMetricFamily("container_cpu_cfs_periods_total", "periods", labels=labels)
        memory = GaugeMetricFamily("container_memory_working_set_bytes", "working set", labels=labels)
        net_labels = [*labels, "interface"]
        rx = CounterMetricFamily("container_network_receive_bytes_total", "rx", labels=net_labels)
        tx = CounterMetricFamily("container_network_transmit_bytes_total", "tx", labels=net_labels)
        restarts = CounterMetricFamily("kube_pod_container_status_restarts_total", "restarts", labels=labels)
        for ns, pod, i, scale in pods:
            for c, container in enumerate(CONTAINERS):
                at = [ns, pod, container]
                cpu.add_metric(at, BASE + scale * CPU_CORES[i][c] * elapsed)
                throttled.add_metric(at, BASE + scale * THROTTLED_PER_S[i][c] * elapsed)
                periods.add_metric(at, BASE + scale * PERIODS_PER_S[i][c] * elapsed)
                memory.add_metric(at, scale * MEMORY_BYTES[i][c])
            for n, interface in enumerate(INTERFACES):
                at = [ns, pod, "", interface]
                rx.add_metric(at, BASE + scale * RX_BYTES_PER_S[i][n] * elapsed)
                tx.add_metric(at, BASE + scale * TX_BYTES_PER_S[i][n] * elapsed)
            for c, container in enumerate(CONTAINERS[:2]):
                restarts.add_metric([ns, pod, container], scale * RESTARTS[i][c])
        replicas = GaugeMetricFamily(
            "kube_deployment_spec_replicas", "spec.replicas", labels=["namespace", "deployment"]
        )
        for ns, deployment, value in REPLICAS:
            replicas.add_metric([ns, deployment], value)
        yield from (cpu, throttled, periods, memory, rx, tx, restarts, replicas)


def main() -> None:
    port = int(sys.argv[1])
    registry = CollectorRegistry()
    registry.register(ClusterCollector(time.time()))  # type: ignore[arg-type]
    start_http_server(port, addr="127.0.0.1", registry=registry)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
