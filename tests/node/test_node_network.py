"""The collector pod across the network: `croft collect` pulls its dataset through the API server's
pod proxy, and a real Prometheus scrapes its /metrics at the pod's own address."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import DATASET_DIR, Node, container_ids
from tests.helpers.prometheus import prometheus, wait_for

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]


def test_croft_collect_pulls_the_pods_dataset_through_the_pod_proxy(
    node: Node, collector: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "nodes"
    first = subprocess.run(
        [CROFT, "collect", "--namespace", "croft", "--out", str(out),
         "--kubeconfig", str(node.plane.kubeconfig)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.startswith(f"{node.name}: "), first.stdout
    pulled = {p.name: p.read_bytes() for p in (out / node.name).iterdir()}
    on_node = {p.name: p.read_bytes() for p in DATASET_DIR.iterdir() if p.is_file()}
    assert pulled and set(pulled) <= set(on_node)
    for name, data in pulled.items():
        # the live file grows between the pull and this read: what was pulled is its beginning
        assert on_node[name].startswith(data), name
    assert b'"container_id"' in b"".join(pulled.values())


def test_prometheus_scrapes_the_collector_at_the_pods_address(
    node: Node, collector: dict[str, Any], tmp_path: Path
) -> None:
    ip = collector["status"]["podIP"]
    annotations = collector["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    target = f"{ip}:{annotations['prometheus.io/port']}"
    (cid,) = container_ids(collector).values()
    with prometheus({"croft": target}, tmp_path) as base:

        def query(expr: str) -> list[dict[str, Any]]:
            body = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=5).json()
            return list(body["data"]["result"])

        up = wait_for("a successful scrape of the pod", lambda: query('up{job="croft"} == 1'))
        assert up[0]["metric"]["instance"] == target
        # the collector watches kubepods, its own pod's container among them
        rates = wait_for(
            "the collector's own container in its metrics",
            lambda: query(f'croft_container_cpu_cores{{container_id="{cid}"}}'),
        )
        assert rates[0]["metric"]["instance"] == target
