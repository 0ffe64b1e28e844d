"""croft deploy kubernetes and croft collect against a real kube-apiserver and controller manager.

There is no kubelet and no scheduler: Node objects are made by hand (one tainted like a GPU node, one
Windows node the DaemonSet must skip); the DaemonSet controller creates a pod per eligible node,
which counts as scheduled. For croft collect, collector pods are bound to those nodes and reported
Running with this host's address, where a real dataset server listens, reached through the API
server's pod proxy (which refuses loopback pod IPs) with the RBAC of the manifests' Role.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.helpers.cli import CROFT
from tests.helpers.collect import collector, write_polls
from tests.helpers.dataset import LIVE
from tests.helpers.kube import ControlPlane, host_ip

from croft import __version__
from croft.adapters.dataset.lock import LOCK_NAME
from croft.domain.deploy.manifests import DEFAULT_IMAGE

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NODES = {
    "gpu-a": {"labels": {"kubernetes.io/os": "linux"}, "taints": [GPU_TAINT]},
    "cpu-b": {"labels": {"kubernetes.io/os": "linux"}, "taints": []},
    "win-c": {"labels": {"kubernetes.io/os": "windows"}, "taints": []},
}  # fmt: skip


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    for name, spec in NODES.items():
        body = {"metadata": {"name": name, "labels": spec["labels"]}, "spec": {"taints": spec["taints"]}}
        control_plane.call("POST", "/api/v1/nodes", body)
    try:
        yield control_plane
    finally:
        for name in NODES:
            control_plane.http.delete(f"/api/v1/nodes/{name}")


def deploy(plane: ControlPlane, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CROFT, "deploy", "kubernetes", "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def daemonset(plane: ControlPlane, namespace: str) -> Any:
    return plane.call("GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/croft-collector")


def test_every_manifest_applies_server_side(control_plane: ControlPlane) -> None:
    plane = control_plane
    plane.namespace("croft-exp")  # scaler.yaml's Deployment namespace, made by its user
    files = sorted((REPO / "deploy/kubernetes").glob("*.yaml"))
    assert {f.name for f in files} >= {"collector.yaml", "scaler.yaml"}
    try:
        for path in files:
            out = plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            for doc in yaml.safe_load_all(path.read_text()):
                meta = doc["metadata"]
                assert f"{doc['kind'].lower()}" in out.lower() or meta["name"] in out
                where = ["-n", meta["namespace"]] if "namespace" in meta else []
                got = plane.kubectl("get", doc["kind"], meta["name"], *where, "-o", "name")
                assert got.strip().endswith(f"/{meta['name']}")
    finally:  # leave namespace croft as croft scale's tests expect it: no DaemonSet pods in it
        plane.kubectl("delete", "daemonset", "-n", "croft", "croft-collector", "--ignore-not-found")
        plane.kubectl("delete", "deployment", "-n", "croft-exp", "croft-scaler-webapp", "--ignore-not-found")


def test_deploy_creates_then_changes_nothing_then_rolls_a_new_image(plane: ControlPlane) -> None:
    first = deploy(plane, "--namespace", "croft-dt")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[:5] == [
        "created Namespace croft-dt", "created ServiceAccount croft-dt/croft-collector",
        "created ClusterRole croft-collector-croft-dt", "created ClusterRoleBinding croft-collector-croft-dt",
        "created DaemonSet croft-dt/croft-collector",
    ]  # fmt: skip
    assert first.stdout.splitlines()[-1].startswith("the collector is deployed on 2 nodes")
    assert "nodes with an up-to-date collector scheduled" in first.stderr
    pods = plane.pods("croft-dt", "app.kubernetes.io/name=croft-collector")
    targets = sorted(_target_node(pod) for pod in pods)
    assert targets == ["cpu-b", "gpu-a"]  # the GPU node's taint tolerated, the Windows node skipped

    generation = daemonset(plane, "croft-dt")["metadata"]["generation"]
    second = deploy(plane, "--namespace", "croft-dt")
    assert second.returncode == 0, second.stderr
    assert all(line.startswith("unchanged ") for line in second.stdout.splitlines()[:7])
    assert "nothing changed: the cluster already runs the collector as asked" in second.stdout
    assert second.stdout.splitlines()[-1].startswith("the collector is in place on 2 nodes")
    assert daemonset(plane, "croft-dt")["metadata"]["generation"] == generation

    third = deploy(plane, "--namespace", "croft-dt", "--image", "croft-collector:2")
    assert third.returncode == 0, third.stderr
    rolled = f"configured DaemonSet croft-dt/croft-collector: image {DEFAULT_IMAGE} -> croft-collector:2"
    assert f"{rolled}, rolling out" in third.stdout
    assert third.stdout.splitlines()[-1].startswith("the collector is rolled out on 2 nodes")
    pods = plane.wait_for(
        "the rolled pods",
        lambda: [p for p in plane.pods("croft-dt", "app.kubernetes.io/name=croft-collector")
                 if "deletionTimestamp" not in p["metadata"]],
    )  # fmt: skip
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"croft-collector:2"}


def test_deploy_that_cannot_schedule_says_why(plane: ControlPlane) -> None:
    plane.namespace("croft-q")
    quota = {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}
    plane.call("POST", "/api/v1/namespaces/croft-q/resourcequotas", quota)
    out = deploy(plane, "--namespace", "croft-q", "--timeout", "6")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("croft: the DaemonSet was not scheduled within 6 s: FailedCreate: ")
    assert "exceeded quota: no-pods" in last


# --- croft collect through the pod proxy ------------------------------------------------------------


def _target_node(pod: Any) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return str(terms["nodeSelectorTerms"][0]["matchFields"][0]["values"][0])


def test_collect_through_the_pod_proxy_with_the_manifests_role(plane: ControlPlane, tmp_path: Path) -> None:
    address = host_ip()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address for the pod proxy to reach")
    ns = "croft-ct"
    plane.namespace(ns)
    manifest = subprocess.run([CROFT, "deploy", "kubernetes", "--dry-run", "--namespace", ns],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    role = next(d for d in yaml.safe_load_all(manifest) if d["kind"] == "Role")
    (tmp_path / "role.yaml").write_text(yaml.safe_dump(role))
    plane.kubectl("apply", "--server-side", "-f", str(tmp_path / "role.yaml"))
    plane.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "researcher"}})
    plane.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "stranger"}})
    binding = {
        "metadata": {"name": "croft-collect"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "croft-collect"},
        "subjects": [{"kind": "ServiceAccount", "name": "researcher", "namespace": ns}],
    }
    plane.call("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)
    researcher = plane.service_account_kubeconfig(ns, "researcher", tmp_path / "researcher")
    stranger = plane.service_account_kubeconfig(ns, "stranger", tmp_path / "stranger")

    dataset = tmp_path / "node"
    dataset.mkdir()
    write_polls(dataset, 0, 30, 1_792_505_950_000)
    write_polls(dataset, 600, 10, 1_792_506_950_000)
    labels = {"app.kubernetes.io/name": "croft-collector"}
    for pod, node in (("collector-gpu-a", "gpu-a"), ("collector-cpu-b", "cpu-b"), ("collector-pending", "")):
        spec: dict[str, Any] = {
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "x"}],
        }
        if node:
            spec["nodeName"] = node
        plane.call("POST", f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": pod, "labels": labels},
                                                             "spec": spec})  # fmt: skip
        if node:
            plane.make_running(ns, pod, {"c": f"{abs(hash(pod)):064x}"[:64]}, ip=address)
    out = tmp_path / "nodes"
    with collector(dataset, host=address) as server:

        def collect(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [CROFT, "collect", "--namespace", ns, "--out", str(out), "--kubeconfig", str(kubeconfig),
                 "--port", str(server.port)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        first = collect(researcher)
        second = collect(researcher)
        denied = collect(stranger)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "skipped pod croft-ct/collector-pending: not scheduled on a node yet" in first.stderr
    assert [line.split(":")[0] for line in first.stdout.splitlines()[:2]] == ["cpu-b", "gpu-a"]
    for node in ("cpu-b", "gpu-a"):
        served = sorted(
            p.name for p in dataset.iterdir() if p.name != LOCK_NAME
        )  # the writer's lock is not served
        assert sorted(p.name for p in (out / node).iterdir()) == served
        assert (out / node / LIVE).read_bytes() == (dataset / LIVE).read_bytes()
    assert second.returncode == 0
    assert second.stdout.splitlines()[0] == "cpu-b: 0 files, 0 bytes copied, 2 unchanged"
    assert denied.returncode == 1
    assert denied.stderr.startswith("croft: cannot list the collector pods in croft-ct: ")
    assert "HTTP 403" in denied.stderr and "bind the Role croft-collect" in denied.stderr


def test_delete_removes_what_deploy_applied_and_keeps_a_namespace_in_use(plane: ControlPlane) -> None:
    assert deploy(plane, "--namespace", "croft-del", "--image", "croft-collector:1").returncode == 0
    dry = deploy(plane, "--namespace", "croft-del", "--delete", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == "would delete Role croft-del/croft-metrics"
    assert daemonset(plane, "croft-del")["metadata"]["name"] == "croft-collector"  # a dry run deletes nothing

    gone = deploy(plane, "--namespace", "croft-del", "--delete")
    assert gone.returncode == 0, gone.stderr
    readers = [
        f"deleted {kind} {name}"
        for reader in ("croft-metrics-reader", "croft-dataset-reader")
        for kind, name in (("ClusterRoleBinding", f"croft-del:{reader}"),
                           ("ServiceAccount", f"croft-del/{reader}"), ("ClusterRole", f"croft-del:{reader}"))
    ]  # fmt: skip
    assert gone.stdout.splitlines() == [
        "deleted Role croft-del/croft-metrics", *readers,
        "deleted ClusterRoleBinding croft-del:croft-collector:auth-delegator",
        "deleted Role croft-del/croft-collect", "deleted Service croft-del/croft-collector",
        "deleted DaemonSet croft-del/croft-collector", "deleted ClusterRoleBinding croft-collector-croft-del",
        "deleted ClusterRole croft-collector-croft-del", "deleted ServiceAccount croft-del/croft-collector",
        "deleted Namespace croft-del",
    ]  # fmt: skip
    again = deploy(plane, "--namespace", "croft-del", "--delete")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] in (
        "kept Namespace croft-del: being deleted already",
        "nothing to delete: croft's collector is not deployed in namespace croft-del",
    )

    plane.namespace("croft-shared")
    plane.pod("croft-shared", "someone-elses", {"app": "web"})
    assert deploy(plane, "--namespace", "croft-shared", "--image", "croft-collector:1").returncode == 0
    shared = deploy(plane, "--namespace", "croft-shared", "--delete")
    assert shared.returncode == 0, shared.stderr
    assert "deleted DaemonSet croft-shared/croft-collector" in shared.stdout
    assert "kept Namespace croft-shared: other pods run in it (someone-elses): kept" in shared.stdout
    assert plane.call("GET", "/api/v1/namespaces/croft-shared")["metadata"]["name"] == "croft-shared"


def test_a_missing_image_says_which_image_and_how_to_build_it(plane: ControlPlane) -> None:
    out = deploy(plane, "--namespace", "croft-img", "--dry-run")
    assert out.returncode == 0
    assert f"croft-collector:{__version__}" == DEFAULT_IMAGE  # the image tag follows croft's version
    assert out.stderr.startswith(f"croft: no --image: using {DEFAULT_IMAGE} (this croft's version)")
    assert f"docker build -f deploy/docker/Dockerfile -t {DEFAULT_IMAGE} ." in out.stderr
    assert f"image: {DEFAULT_IMAGE}" in out.stdout and "croft: no --image" not in out.stdout
