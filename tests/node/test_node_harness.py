"""`run.py web` (labs/research/experiment) end to end on the real node, both arms, a short burst:
the webapp's real pods under the open-loop load, the HPA (from the metrics.k8s.io stand-in) or croft
scale (reading the collector pod), workload.csv, timeline.json with the kubelet's real created and
Ready times, scaler.log, prometheus.csv from a real Prometheus scraping the kubelet's cAdvisor
endpoint, and `compare` scoring both."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import REPO, Node

HARNESS = REPO / "labs" / "research" / "experiment"
if str(HARNESS) not in sys.path:
    sys.path.insert(0, str(HARNESS))

import apps  # noqa: E402
import profiles  # noqa: E402
import scoring  # noqa: E402
import web  # noqa: E402
from croft.runs.rundir import read_records, read_timeline, read_workload  # noqa: E402

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]


def options(node: Node, app: apps.App, data: Path, prometheus: str, **kw: Any) -> web.WebOptions:
    # 2 s warm-up, then a 10 s burst: 4 req/s, 16 req/s for 4 s from t=3, 4 req/s.
    profile = profiles.Profile(
        "burst", ((0, 4), (3, 4), (3, 16), (7, 16), (7, 4), (10, 4)), (("scale", 0.0),), burst_s=(3.0, 7.0)
    )
    return web.WebOptions(
        app=app,
        profile=profiles.with_warmup(profile, 2.0),
        data_dir=data,
        kubectl=str(node.plane.bin_dir / "kubectl"),
        kubeconfig=str(node.plane.kubeconfig),
        croft=CROFT,
        prometheus=prometheus,
        cooldown_s=0,
        ready_timeout_s=120,
        **kw,
    )


def test_run_py_web_runs_both_arms_end_to_end_on_the_node(
    node: Node,
    collector: dict[str, Any],
    harness_app: apps.App,
    cadvisor_prometheus: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    # The Service exists once the first run applied it; its ClusterIP is where the load goes (the
    # node has no DNS for webapp.<namespace>.svc). Apply the manifests once to learn it.
    for rel in harness_app.manifests:
        node.kubectl("apply", "-f", str(rel))
    service = node.get(f"/api/v1/namespaces/{namespace}/services/webapp")["spec"]["clusterIP"]
    host = f"http://{service}:8080"
    hpa_run = web.web(options(node, harness_app, data, cadvisor_prometheus, prefix="hpa-", host=host))
    croft_run = web.web(
        options(node, harness_app, data, cadvisor_prometheus, prefix="duo-", host=host, scaler="croft",
                croft_args=("--interval", "1"))
    )  # fmt: skip
    for run_dir in (hpa_run, croft_run):
        rows = read_workload(run_dir / "workload.csv")
        # web() sent the load once the Service answered (its pods Ready is not enough: kube-proxy)
        assert sum(r.ok for r in rows) >= 0.95 * sum(r.target_rps for r in rows), rows
        timeline = read_timeline(run_dir / "timeline.json")
        # the first pod went Ready before the load; one a late scale-up made may not be yet
        assert timeline.pods and timeline.pods[0].ready_ms is not None
        for pod in timeline.pods:
            assert pod.ready_ms is None or pod.ready_ms >= pod.created_ms, pod
            assert all(len(cid) == 64 for cid in pod.container_ids), pod
        series = (run_dir / "prometheus.csv").read_text()
        # the gauges; cAdvisor's counters (cpu_cores, network) need two samples of the kubelet's 10 s
        # housekeeping inside the 30 s rate window, more than this 12 s profile has
        assert ",memory_bytes,webapp-" in series, series[:500]
    log = (croft_run / "scaler.log").read_text()
    assert " decision=" in log
    records = {r.autoscaler for r in read_records(data / "web")}
    assert records == {"hpa", "croft"}
    scores = scoring.score_prefixes(data / "web", ["hpa-", "duo-"])
    assert sorted(s.autoscaler for s in scores) == ["croft", "hpa"]
