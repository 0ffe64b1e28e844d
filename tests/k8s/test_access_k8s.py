"""Who may read a collector, against a real kube-apiserver: a real `croft run --auth kubernetes`
(a trace replayed, then lingering) on this host's address, a collector pod object made Running at
that address, and the RBAC objects of `croft deploy kubernetes --dry-run`.

Through the API server's pod proxy (which drops the caller's Authorization header) croft collect
and croft scale send a reader's token they asked for; Prometheus scrapes directly with its own
ServiceAccount's token. A user the API server lets through the proxy but who may not ask for a
reader token is refused by the collector itself, and /metrics and /dataset are granted apart.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import yaml
from tests.helpers.cli import CROFT
from tests.helpers.kube import ControlPlane, host_ip
from tests.helpers.net import free_port
from tests.helpers.prometheus import prometheus, query, wait_for

from croft.adapters.dataset.lock import LOCK_NAME
from croft.adapters.kube.port import Denied
from croft.adapters.kube.scale_api import KubeClient
from croft.domain.metrics import names

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
NS = "croft-auth"
TRACE = REPO / "fixtures" / "traces" / "live"
LABELS = {"app.kubernetes.io/name": "croft-collector"}
NODE = "access-a"


@attrs.frozen
class Readers:
    plane: ControlPlane
    address: str
    port: int
    dataset: Path
    kubeconfigs: dict[str, Path]

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def token(self, who: str) -> str:
        found = re.search(r"token: '([^']+)'", self.kubeconfigs[who].read_text())
        assert found
        return found.group(1)

    def collect(self, who: str, out: Path) -> subprocess.CompletedProcess[str]:
        kubeconfig = str(self.kubeconfigs[who])
        return subprocess.run(
            [CROFT, "collect", "--namespace", NS, "--out", str(out), "--kubeconfig", kubeconfig,
             "--port", str(self.port)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip


def _apply(plane: ControlPlane, docs: list[Any], path: Path) -> None:
    path.write_text(yaml.safe_dump_all(docs))
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))


@pytest.fixture(scope="module")
def readers(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Readers]:
    address = host_ip()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address for the pod proxy to reach")
    plane = control_plane
    tmp = tmp_path_factory.mktemp("access")
    rendered = subprocess.run([CROFT, "deploy", "kubernetes", "--dry-run", "--namespace", NS],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(rendered) if d["kind"] not in ("DaemonSet", "Service")]
    _apply(plane, docs, tmp / "rbac.yaml")
    # researcher: croft-collect; scaler: croft-metrics; stranger: through the proxy, no reader token;
    # prometheus: the metrics reader's ClusterRole, as a cluster's Prometheus is bound
    stranger_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "proxy-only", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                  {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}],
    }  # fmt: skip
    bindings: list[Any] = [stranger_role]
    for who, kind, role in (("researcher", "Role", "croft-collect"), ("scaler", "Role", "croft-metrics"),
                            ("stranger", "Role", "proxy-only"),
                            ("prometheus", "ClusterRole", f"{NS}:croft-metrics-reader")):  # fmt: skip
        plane.call("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": who}})
        binding = "RoleBinding" if kind == "Role" else "ClusterRoleBinding"
        meta = {"name": f"{NS}-{who}", **({"namespace": NS} if kind == "Role" else {})}
        bindings.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": NS}],
        })  # fmt: skip
    _apply(plane, bindings, tmp / "bindings.yaml")
    kubeconfigs = {
        who: plane.service_account_kubeconfig(NS, who, tmp / f"{who}.kubeconfig")
        for who in ("croft-collector", "researcher", "scaler", "stranger", "prometheus")
    }
    port = free_port()
    dataset = tmp / "dataset"
    log = (tmp / "collector.log").open("wb")
    collector = subprocess.Popen(
        [CROFT, "run", "--replay", str(TRACE), "--dataset", str(dataset / "croft-dataset.jsonl"),
         "--metrics-addr", f"{address}:{port}", "--auth", "kubernetes", "--linger", "600"],
        stderr=log, env={**os.environ, "KUBECONFIG": str(kubeconfigs["croft-collector"])},
    )  # fmt: skip
    try:
        wait_for("the collector to serve", lambda: httpx.get(f"http://{address}:{port}/healthz", timeout=2))
        plane.call("POST", "/api/v1/nodes", {"metadata": {"name": NODE}})
        pod = {"metadata": {"name": "collector-a", "labels": LABELS},
               "spec": {"nodeName": NODE, "containers": [{"name": "collector", "image": "x"}]}}  # fmt: skip
        plane.call("POST", f"/api/v1/namespaces/{NS}/pods", pod)
        plane.make_running(NS, "collector-a", {"collector": f"{0xC011EC7:064x}"}, ip=address)
        yield Readers(plane, address, port, dataset, kubeconfigs)
    finally:
        plane.http.delete(f"/api/v1/nodes/{NODE}")
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=30)
        log.close()


def test_croft_collect_through_the_api_server_sends_a_reader_token_and_copies_the_dataset(
    readers: Readers, tmp_path: Path
) -> None:
    out = tmp_path / "nodes"
    done = readers.collect("researcher", out)
    assert done.returncode == 0, done.stdout + done.stderr
    (node,) = [p for p in out.iterdir() if p.is_dir()]
    served = sorted(p.name for p in readers.dataset.iterdir() if p.name != LOCK_NAME)
    assert sorted(p.name for p in node.iterdir()) == served and served
    for name in served:
        assert (node / name).read_bytes() == (readers.dataset / name).read_bytes()


def test_a_user_the_api_server_proxies_but_without_a_reader_token_is_refused_by_the_collector(
    readers: Readers, tmp_path: Path
) -> None:
    done = readers.collect("stranger", tmp_path / "nodes")
    assert done.returncode == 1
    assert "croft collect: no croft-dataset-reader token (" in done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "not collected" in line]
    assert line.startswith(f"{NODE}: not collected: pod {NS}/collector-a refused reading "), line
    assert "/dataset needs a bearer token" in line
    assert "Traceback" not in done.stderr


def test_direct_readers_need_a_token_the_api_server_accepts_and_a_grant_of_the_route(
    readers: Readers,
) -> None:
    url = readers.url
    assert httpx.get(f"{url}/dataset/", timeout=10).status_code == 401
    assert httpx.get(f"{url}/metrics", timeout=10).status_code == 401
    assert httpx.get(f"{url}/healthz", timeout=10).status_code in (200, 503)  # open: the kubelet's probes
    forged = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer forged"}, timeout=10)
    assert forged.status_code == 401 and forged.text.startswith(
        "croft: /metrics refused: the token is not valid"
    )
    prometheus_sa = {"Authorization": f"Bearer {readers.token('prometheus')}"}
    scraped = httpx.get(f"{url}/metrics", headers=prometheus_sa, timeout=10)
    assert scraped.status_code == 200 and names.LAST_POLL_TIMESTAMP_SECONDS in scraped.text
    dataset = httpx.get(f"{url}/dataset/", headers=prometheus_sa, timeout=10)
    assert dataset.status_code == 403  # /metrics and /dataset are granted apart
    assert dataset.text.startswith(f"croft: system:serviceaccount:{NS}:prometheus may not read /dataset")
    researcher = {"Authorization": f"Bearer {readers.token('researcher')}"}
    assert httpx.get(f"{url}/dataset/", headers=researcher, timeout=10).status_code == 403  # only its reader


def test_croft_scale_reads_metrics_through_kubectl_proxy_with_a_metrics_reader_token(
    readers: Readers,
) -> None:
    with readers.plane.proxy(readers.kubeconfigs["scaler"]) as api:
        client = KubeClient(api, timeout_s=10)
        try:
            body = client.pod_metrics(NS, "collector-a", readers.port)
        finally:
            client.close()
    assert names.LAST_POLL_TIMESTAMP_SECONDS in body
    with readers.plane.proxy(readers.kubeconfigs["stranger"]) as api:
        client = KubeClient(api, timeout_s=10)
        try:
            with pytest.raises(Denied) as refused:
                client.pod_metrics(NS, "collector-a", readers.port)
        finally:
            client.close()
    assert "the collector refused: /metrics needs a bearer token" in str(refused.value)


def test_prometheus_scrapes_metrics_with_its_service_account_token(readers: Readers, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(readers.token("prometheus"))
    target = f"{readers.address}:{readers.port}"
    with prometheus({"croft": target}, tmp_path, bearer_file=token) as base:
        up = wait_for("Prometheus to scrape the collector", lambda: query(base, 'up{job="croft"} == 1'), 60)
        assert up
        series = wait_for("a croft series", lambda: query(base, names.LAST_POLL_TIMESTAMP_SECONDS), 30)
    assert series[0]["metric"]["job"] == "croft"
