"""deploy/kubernetes/scaler.yaml for real: croft scale in a pod beside its kubectl-proxy sidecar
(kubectl from the built tree), reading the collector pod's /metrics through the API server, scales
the webapp Deployment under open-loop load, and the new pods go Ready."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.node import KUBECTL_IMAGE, REPO, Node, OpenLoop, wait_for

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

LAB = REPO / "labs" / "research" / "experiment" / "workloads" / "webapp"
RATE = 24.0  # requests/s: croft scale wants ceil(24 x 50 ms / (1 CPU x 0.7)) = 2 replicas
LOAD_S = 60.0


@pytest.fixture(scope="session")
def kubectl_image(node: Node, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sidecar's kubectl: the binary the node's tree built, on the local Debian base."""
    context = tmp_path_factory.mktemp("kubectl-image")
    shutil.copy2(node.plane.bin_dir / "kubectl", context / "kubectl")
    (context / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY kubectl /usr/local/bin/kubectl\n")
    node.build_image(KUBECTL_IMAGE, context, context / "Dockerfile")
    return KUBECTL_IMAGE


def lab_webapp(namespace: str, image: str) -> str:
    """The lab's Deployment and Service, in `namespace`, with the local image; 5 ms of real CPU per
    request (the scaler is told 50: it decides from the request rate, not from the CPU used), and a
    CPU request this 2-core node can fit several times (the limit, which croft scale reads, stays 1)."""
    text = (
        (LAB / "k8s" / "deployment.yaml").read_text() + "---\n" + (LAB / "k8s" / "service.yaml").read_text()
    )
    text = text.replace("namespace: croft-exp", f"namespace: {namespace}")
    text = text.replace("image: croft-webapp:v1", f"image: {image}")
    text = text.replace('{name: CPU_MS, value: "50"}', '{name: CPU_MS, value: "5"}')
    text = text.replace('requests: {cpu: "1", memory: 64Mi}', "requests: {cpu: 100m, memory: 64Mi}")
    assert text.count(namespace) == 2 and image in text and 'value: "5"' in text and "100m" in text
    return text


def scaler_manifest(namespace: str, collector_image: str, kubectl_image: str) -> str:
    text = (REPO / "deploy" / "kubernetes" / "scaler.yaml").read_text()
    text = text.replace("croft-exp", namespace)
    text = text.replace("image: croft-collector", f"image: {collector_image}")
    text = text.replace("image: bitnami/kubectl:1.30", f"image: {kubectl_image}")
    assert "croft-exp" not in text and "bitnami" not in text
    return text


def test_croft_scale_in_its_pod_scales_the_webapp_under_load(
    node: Node,
    collector: dict[str, Any],
    collector_image: str,
    kubectl_image: str,
    webapp_image: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    node.apply(lab_webapp(namespace, webapp_image))
    node.wait_ready(namespace, "app=webapp", 1)
    node.apply(scaler_manifest(namespace, collector_image, kubectl_image))
    (scaler,) = node.wait_ready(namespace, "app.kubernetes.io/name=croft-scaler", 1)
    service = node.get(f"/api/v1/namespaces/{namespace}/services/webapp")["spec"]["clusterIP"]
    with OpenLoop(service, 8080, RATE, LOAD_S) as load:
        scaled = wait_for(
            "croft scale to add a replica",
            lambda: node.plane.replicas(namespace, "webapp") >= 2,
            LOAD_S,
            every_s=1,
        )
        pods = node.wait_ready(namespace, "app=webapp", node.plane.replicas(namespace, "webapp"), 120)
    log = node.logs(namespace, scaler["metadata"]["name"], "scaler")
    (tmp_path / "scaler.log").write_text(log)
    print(f"croft scale's decisions (sent {load.sent}, answered {load.ok}):\n{log}")
    assert scaled and len(pods) >= 2
    assert load.ok >= 0.95 * load.sent
    assert "up" in log
