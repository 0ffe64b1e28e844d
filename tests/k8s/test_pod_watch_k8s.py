"""The collector's pod watch against a real kube-apiserver: with the RBAC of `croft deploy
kubernetes` only (its ClusterRole and binding, applied server-side, and a token of the collector's
ServiceAccount), it lists and watches the pods of its node and no other's, follows them as their
containers start and as they go, and without the binding says once, in one sentence, what to grant.

There is no kubelet here: pods are bound to a node by `spec.nodeName` and reported Running by hand
(tests/helpers/kube.py). On a real node, tests/node/test_node_collector.py checks the names the
collector writes against the API's."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.kube import ControlPlane
from tests.helpers.rows import make_row

from croft.adapters.kube.pod_watch import PodWatch, start_pod_watch
from croft.app.deploy import apply_all
from croft.domain.dataset.row import Pod
from croft.domain.deploy.manifests import DeployOptions, manifests

pytestmark = pytest.mark.k8s

NAMESPACE = "croft-names"  # the collector's
APPS = "shop"  # the pods it names
NODE, OTHER = "node-a", "node-b"
WEB, DB = "ab" * 32, "cd" * 32


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The collector's objects as croft deploy applies them, but the DaemonSet (no kubelet here),
    and a namespace of pods."""
    from croft.adapters.kube.cluster import Kube, load_configuration

    docs = tuple(d for d in manifests(DeployOptions(namespace=NAMESPACE)) if d["kind"] != "DaemonSet")
    kube = Kube(load_configuration(control_plane.kubeconfig))
    try:
        apply_all(kube, docs)
    finally:
        kube.close()
    control_plane.namespace(APPS)
    yield control_plane


def place(plane: ControlPlane, name: str, node: str) -> dict[str, Any]:
    """A pod bound to `node` (as the scheduler binds one), not yet started."""
    body = {
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [{"name": "web", "image": "x"}, {"name": "db", "image": "x"}],
        },
    }
    return dict(plane.call("POST", f"/api/v1/namespaces/{APPS}/pods", body))


def row_of(cid: str, uid: str) -> Any:
    return make_row(1, container_id=cid, cgroup=f"/kubepods/besteffort/pod{uid}/{cid}")


def test_the_collector_names_its_nodes_pods_with_the_manifests_rbac(
    plane: ControlPlane, tmp_path: Path
) -> None:
    kubeconfig = plane.service_account_kubeconfig(NAMESPACE, "croft-collector", tmp_path / "sa.kubeconfig")
    mine = place(plane, "web-0", NODE)
    theirs = place(plane, "web-1", OTHER)
    watch = start_pod_watch(kubeconfig, NODE)
    assert isinstance(watch, PodWatch)
    try:
        uid = mine["metadata"]["uid"]
        wait_for("the node's pod", lambda: uid in watch.directory().pods)
        assert theirs["metadata"]["uid"] not in watch.directory().pods  # another node's pod
        # not started: the pod by its UID (the sandbox), no container names yet
        assert watch.directory().pod_of(row_of(WEB, uid)) == Pod(namespace=APPS, name="web-0")
        plane.make_running(APPS, "web-0", {"web": WEB, "db": DB})
        named = wait_for(
            "the started containers' names", lambda: watch.directory().pod_of(row_of(DB, uid)).container
        )
        assert named == "db"
        assert watch.directory().pod_of(row_of(WEB, uid)) == Pod(
            namespace=APPS, name="web-0", container="web"
        )
        later = place(plane, "web-2", NODE)  # a pod placed after the list: seen by the watch
        wait_for("a new pod", lambda: later["metadata"]["uid"] in watch.directory().pods)
        plane.http.delete(f"/api/v1/namespaces/{APPS}/pods/web-0", params={"gracePeriodSeconds": "0"})
        wait_for("the deleted pod to go", lambda: uid not in watch.directory().pods)
        assert watch.lists == 1  # one list, then the watch followed every change
    finally:
        watch.close()


def test_without_the_binding_it_says_once_what_to_grant(
    plane: ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plane.call("POST", f"/api/v1/namespaces/{APPS}/serviceaccounts", {"metadata": {"name": "unbound"}})
    kubeconfig = plane.service_account_kubeconfig(APPS, "unbound", tmp_path / "unbound.kubeconfig")
    caplog.set_level(logging.INFO, logger="croft.run")
    watch = start_pod_watch(kubeconfig, NODE)
    assert watch is not None
    try:
        said = wait_for(
            "the warning",
            lambda: [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING],
        )
        time.sleep(3)  # it retries (1 s, then 2 s): the warning stays one
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == said and len(said) == 1
        assert "HTTP 403" in said[0] and "grant the collector's ServiceAccount get, list and watch" in said[0]
        assert watch.directory().pods == {}
    finally:
        watch.close()


def test_a_bare_host_has_no_api_access_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="croft.run")
    assert start_pod_watch(None, NODE) is None  # no --kubeconfig, not in a pod
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith("pod names: no Kubernetes API access")
