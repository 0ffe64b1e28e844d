"""Who may read the collector on a real node: a pod of another namespace reaches the collector
pod's port over the pod network, and is refused /metrics and /dataset, with no token and with its
own ServiceAccount's; /healthz still answers it (the kubelet's probes carry no token). croft collect
(tests/node/test_node_network.py), croft scale (test_node_scaler.py) and Prometheus (test_node_network.py)
read it through the API server, or with a reader's token."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from tests.helpers.node import Node

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

PROBE = """
import json, pathlib, httpx
base = "http://{ip}:{port}"
token = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/token").read_text().strip()
tried = {{}}
ways = ({{}}, {{"Authorization": "Bearer " + token}}, {{"X-Croft-Authorization": "Bearer " + token}})
for path in ("/metrics", "/dataset/", "/dataset/croft-dataset.jsonl"):
    tried[path] = [httpx.get(base + path, headers=headers, timeout=10).status_code for headers in ways]
tried["/healthz"] = [httpx.get(base + "/healthz", timeout=10).status_code]
print(json.dumps(tried))
"""


def test_a_pod_of_the_cluster_is_refused_the_dataset_and_the_metrics(
    node: Node, collector: dict[str, Any], collector_image: str, namespace: str
) -> None:
    ip = collector["status"]["podIP"]
    port = collector["metadata"]["annotations"]["prometheus.io/port"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "curious", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": True,  # its own token: valid, but not a reader's
            "containers": [{
                "name": "probe", "image": collector_image, "imagePullPolicy": "Never",
                "command": ["python3", "-c", PROBE.format(ip=ip, port=port)],
            }],
        },
    }  # fmt: skip
    node.apply(json.dumps(pod), namespace)
    deadline = time.monotonic() + 180
    phase = ""
    while time.monotonic() < deadline:
        phase = node.get(f"/api/v1/namespaces/{namespace}/pods/curious").get("status", {}).get("phase", "")
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(1)
    log = node.logs(namespace, "curious")
    assert phase == "Succeeded", f"{phase}: {log}{node.describe(namespace)}"
    tried = json.loads(log.strip().splitlines()[-1])
    for path in ("/metrics", "/dataset/", "/dataset/croft-dataset.jsonl"):
        assert tried[path] == [401, 403, 403], (path, tried)  # no token; a token of no reader
    assert tried["/healthz"] == [200]
