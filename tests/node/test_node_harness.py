"""`run.py web` (labs/research/experiment) end to end on the real node, both arms, a short burst:
the webapp's real pods under the open-loop load, the HPA (from the metrics.k8s.io stand-in) or croft
scale (reading the collector pod), workload.csv, timeline.json with the kubelet's real created and
Ready times, scaler.log, prometheus.csv from a real Prometheus scraping the kubelet's cAdvisor
endpoint, and `compare` scoring both."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import REPO, Node, pod_ready, wait_for

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


def test_run_py_web_sends_its_load_only_once_kube_proxy_has_wired_the_service(
    node: Node, harness_app: apps.App, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-proxy is paused (SIGSTOP) from before the first pod exists until 5 s after it went Ready,
    as a kube-proxy behind on a loaded node is: the Service's ClusterIP refuses connections then (its
    rule for a Service without endpoints), and a run that starts its load when the pods are Ready
    fails every request (CI's HPA arm, 96 of 96). web() waits until the Service answers."""
    service_yaml = next(rel for rel in harness_app.manifests if rel.name == "service.yaml")
    node.kubectl("apply", "-f", str(service_yaml))
    ip = node.get(f"/api/v1/namespaces/{namespace}/services/webapp")["spec"]["clusterIP"]

    def refusing() -> bool:  # kube-proxy wrote the rule: no probe leaves for an address nobody serves
        rules = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True).stdout
        return any(ip in line and "REJECT" in line for line in rules.splitlines())

    wait_for(f"kube-proxy's REJECT rule for {ip}", refusing, 60)
    proxy = int((node.plane.run_dir / "kube-proxy.pid").read_text())
    paused_s = 5.0

    def resume_after_ready() -> None:
        try:
            wait_for(
                "a Ready webapp pod",
                lambda: any(map(pod_ready, node.plane.pods(namespace, "app=webapp"))),
                120,
            )
            time.sleep(paused_s)
        finally:
            os.kill(proxy, signal.SIGCONT)

    os.kill(proxy, signal.SIGSTOP)
    resumer = threading.Thread(target=resume_after_ready, daemon=True)
    try:
        resumer.start()
        options = web.WebOptions(
            app=harness_app,
            prefix="wired-",
            profile=profiles.constant(duration_s=4, rps=4),
            data_dir=tmp_path / "data",
            host=f"http://{ip}:8080",
            kubectl=str(node.plane.bin_dir / "kubectl"),
            kubeconfig=str(node.plane.kubeconfig),
            cooldown_s=0,
            ready_timeout_s=120,
        )
        run_dir = web.web(options)
    finally:
        resumer.join(timeout=130)
        os.kill(proxy, signal.SIGCONT)
    rows = read_workload(run_dir / "workload.csv")
    assert sum(r.ok for r in rows) == sum(r.target_rps for r in rows) == 16, rows
    waited = re.search(r"answered (\d+\.\d) s after its pods were Ready", capsys.readouterr().err)
    assert waited is not None and float(waited.group(1)) >= paused_s - 2, waited
