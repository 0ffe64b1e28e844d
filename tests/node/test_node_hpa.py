"""The webapp's HorizontalPodAutoscaler (autoscaling/v2beta2, as the lab ships it) on the real node:
its CPU numbers come from the metrics.k8s.io stand-in, which serves the kubelet's own
/stats/summary, and under load it scales the Deployment up."""

from __future__ import annotations

from typing import Any

import pytest
from tests.helpers.node import REPO, Node, OpenLoop, wait_for

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.slow]

LAB = REPO / "labs" / "research" / "experiment" / "workloads" / "webapp"


def lab_objects(namespace: str, image: str) -> str:
    """deployment.yaml, service.yaml and hpa.yaml in `namespace` with the local image and a 100m CPU
    request (70 % of it is the HPA's target: a few requests/s of 50 ms each are well above it)."""
    text = "---\n".join(
        (LAB / "k8s" / f).read_text() for f in ("deployment.yaml", "service.yaml", "hpa.yaml")
    )
    text = text.replace("namespace: croft-exp", f"namespace: {namespace}")
    text = text.replace("image: croft-webapp:v1", f"image: {image}")
    text = text.replace('requests: {cpu: "1", memory: 64Mi}', "requests: {cpu: 100m, memory: 64Mi}")
    assert text.count(namespace) == 3 and image in text and "100m" in text
    return text


def test_the_hpa_scales_the_webapp_from_the_kubelets_real_cpu_numbers(
    node: Node, webapp_image: str, namespace: str
) -> None:
    node.apply(lab_objects(namespace, webapp_image))
    node.wait_ready(namespace, "app=webapp", 1)
    (pod,) = node.plane.pods(namespace, "app=webapp")
    name = pod["metadata"]["name"]
    path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}"

    def pod_metrics() -> Any:
        response = node.plane.http.get(path)
        return response.json() if response.status_code == 200 else None

    metrics = wait_for("the stand-in's numbers for the webapp pod", pod_metrics, 60)
    assert metrics["containers"][0]["name"] == "webapp"
    service = node.get(f"/api/v1/namespaces/{namespace}/services/webapp")["spec"]["clusterIP"]
    hpa_path = f"/apis/autoscaling/v2beta2/namespaces/{namespace}/horizontalpodautoscalers/webapp"
    with OpenLoop(service, 8080, 6.0, 90.0):
        wait_for(
            "the HPA to add replicas", lambda: node.plane.replicas(namespace, "webapp") >= 2, 90, every_s=1
        )
        hpa: dict[str, Any] = node.get(hpa_path)
    current = hpa["status"]["currentMetrics"][0]["resource"]["current"]
    assert current["averageUtilization"] > 70, hpa["status"]
    replicas = node.plane.replicas(namespace, "webapp")
    node.wait_ready(namespace, "app=webapp", replicas, 120)
