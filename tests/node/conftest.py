"""A real single-node cluster (scripts/kube-node.sh), started once per test session for the tests
under tests/node, with a namespace of its own for each test.

`make test` builds the binaries and base images first (make node-setup, cached under
/var/cache/croft-k8s). The tests skip, saying why, where the node cannot be built here (no root,
no Debian source package, no mirror) or another croft node already runs on the machine; a node
that builds but does not start fails them. The node's directories are fixed by the kubelet
(/var/log/pods, /run/netns, ...), so never run these tests from parallel workers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.kube import ControlPlane
from tests.helpers.net import free_port
from tests.helpers.node import (
    COLLECTOR_IMAGE,
    DATASET_DIR,
    REPO,
    SCRIPT,
    WEBAPP_IMAGE,
    Node,
    host_changes,
    host_state,
)
from tests.helpers.prometheus import wait_for

# labs/research/experiment, a directory of modules run as `python run.py` (the harness fixtures)
HARNESS = REPO / "labs" / "research" / "experiment"
if str(HARNESS) not in sys.path:
    sys.path.insert(0, str(HARNESS))

import apps  # noqa: E402


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    """The running node, stopped (and the host restored) at the end of the session."""
    if os.geteuid() != 0:
        pytest.skip("the real test node needs root (containerd, the kubelet, iptables, a bridge)")
    for step, what in (
        ("build", "the node's binaries cannot be built"),
        ("images", "its images cannot be made"),
    ):
        out = _script(step, timeout=3600)
        if out.returncode != 0:
            pytest.skip(f"{what} here: {_last_line(out.stderr)}")
    before = host_state()
    up = _script("up", timeout=600)
    if up.returncode != 0:
        down = _script("down", timeout=300)
        if "another croft node runs" in up.stderr:
            pytest.skip(_last_line(up.stderr))
        pytest.fail(f"scripts/kube-node.sh up failed: {up.stderr.strip()[-3000:]}\n{down.stderr[-1000:]}")
    values = dict(line.split("=", 1) for line in up.stdout.splitlines() if "=" in line)
    plane = ControlPlane.from_env(values, script=SCRIPT, env=dict(os.environ))
    try:
        yield Node(
            plane=plane,
            name=values["CROFT_NODE_NAME"],
            ip=values["CROFT_NODE_IP"],
            bin_dir=Path(values["CROFT_NODE_BIN"]),
            values=values,
        )
    finally:
        plane.http.close()
        down = _script("down", timeout=300)
        assert down.returncode == 0, f"scripts/kube-node.sh down failed: {down.stderr[-2000:]}"
        changed = host_changes(before, host_state())
        assert not changed, f"scripts/kube-node.sh down left the host changed: {'; '.join(changed)}"


@pytest.fixture
def namespace(node: Node, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards (without waiting for its pods to go)."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:5]}"
    node.plane.namespace(name)
    try:
        yield name
    finally:
        node.plane.http.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="session")
def collector_image(node: Node) -> str:
    """deploy/docker/Dockerfile built for real, FROM the local Debian base."""
    node.build_image(COLLECTOR_IMAGE, REPO, REPO / "deploy" / "docker" / "Dockerfile")
    return COLLECTOR_IMAGE


@pytest.fixture(scope="session")
def collector(node: Node, collector_image: str) -> dict[str, Any]:
    """`croft deploy kubernetes --image <local>`: the collector's pod on the node, Ready, writing a
    dataset directory of the tests' own (DATASET_DIR) and checking who reads it (--auth kubernetes,
    the default).

    --kernel-5-11-or-later: root on this kind of machine lacks CAP_SYS_RESOURCE in its bounding set,
    so runc refuses any container that asks for it ("unable to apply caps"); the kernel (>= 5.11)
    charges BPF maps to the memory cgroup and needs no RLIMIT_MEMLOCK raise."""
    out = subprocess.run(
        [CROFT, "deploy", "kubernetes", "--image", collector_image, "--kernel-5-11-or-later",
         "--dataset-dir", str(DATASET_DIR), "--kubeconfig", str(node.plane.kubeconfig), "--timeout", "300"],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert out.returncode == 0, f"croft deploy kubernetes failed: {out.stderr}{node.describe('croft')}"
    pods = node.wait_ready("croft", "app.kubernetes.io/name=croft-collector", 1, timeout_s=300)
    return pods[0]


@pytest.fixture(scope="session")
def webapp_image(node: Node) -> str:
    """labs/research/experiment/workloads/webapp/Dockerfile built for real."""
    context = REPO / "labs" / "research" / "experiment" / "workloads" / "webapp"
    node.build_image(WEBAPP_IMAGE, context, context / "Dockerfile")
    return WEBAPP_IMAGE


UTILIZATION_70 = "target: {type: Utilization, averageUtilization: 70}"
AVERAGE_700M = "target: {type: AverageValue, averageValue: 700m}"


@pytest.fixture
def harness_app(namespace: str, webapp_image: str, tmp_path: Path) -> apps.App:
    """apps.json's webapp in this test's namespace, with the local image and a CPU request the node
    fits several times. The limit stays 1 CPU, and the HPA's target becomes 700m of CPU a pod (an
    AverageValue) instead of 70 % of the request: both arms then size by 0.7 core a pod, as with
    the lab's request = limit. With the 100m request a 70 % Utilization target is 70m a pod, and the
    HPA arm went from 1 to 3 pods at 4 req/s (0.2 core), before every burst."""
    root = tmp_path / "harness"
    entry = json.loads(apps.APPS_JSON.read_text())["webapp"]
    for rel in [*entry["manifests"], entry["hpa"]]:
        text = (HARNESS / rel).read_text().replace("croft-exp", namespace)
        text = text.replace("image: croft-webapp:v1", f"image: {webapp_image}")
        text = text.replace('requests: {cpu: "1", memory: 64Mi}', "requests: {cpu: 100m, memory: 64Mi}")
        text = text.replace(UTILIZATION_70, AVERAGE_700M)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert AVERAGE_700M in (root / entry["hpa"]).read_text(), "hpa.yaml's target changed: update harness_app"
    entry["namespace"] = namespace
    (root / "apps.json").write_text(json.dumps({"webapp": entry}))
    return apps.load("webapp", root / "apps.json")


@pytest.fixture
def cadvisor_prometheus(node: Node, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping the kubelet's /metrics/cadvisor every second (TLS, the admin
    token, which the kubelet's webhook authorization accepts)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary: `make test` installs the Debian package as root")
    directory = tmp_path / "prometheus"
    directory.mkdir()
    kubelet = node.values["CROFT_NODE_KUBELET"].removeprefix("https://")
    (directory / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: cadvisor\n"
        "    scheme: https\n"
        "    metrics_path: /metrics/cadvisor\n"
        f"    authorization: {{credentials: {node.plane.token}}}\n"
        "    tls_config: {insecure_skip_verify: true}\n"
        f"    static_configs: [{{targets: ['{kubelet}']}}]\n"
    )
    port = free_port()
    with (directory / "prometheus.log").open("wb") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=directory,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:

            def scraped() -> bool:
                body = httpx.get(
                    f"{base}/api/v1/query", params={"query": 'up{job="cadvisor"}'}, timeout=2
                ).json()
                return any(r["value"][1] == "1" for r in body["data"]["result"])

            wait_for("Prometheus' first scrape of the kubelet's cAdvisor", scraped, 60)
            yield base
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
