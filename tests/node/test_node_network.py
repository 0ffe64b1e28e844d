"""The collector pod across the network: `croft collect` pulls its dataset through the API server's
pod proxy, and a real Prometheus scrapes its /metrics at the pod's own address; the test node's
bridge keeps its address while pods come and go."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import (
    DATASET_DIR,
    Node,
    container_ids,
    processes_in,
    reader_token,
    send_requests,
    webapp_deployment,
)
from tests.helpers.node import wait_for as wait_until
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
    token = tmp_path / "token"  # the collector checks who reads: a Prometheus scrapes with a token
    token.write_text(reader_token(node))
    with prometheus({"croft": target}, tmp_path, bearer_file=token) as base:

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


def host_veth_mac(pid: int) -> str:
    """The MAC address of the host end of the veth pair whose other end is `pid`'s eth0."""
    link = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", "ip", "-o", "link", "show", "eth0"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    match = re.match(r"\d+: eth0@if(\d+):", link)
    assert match, link
    for device in Path("/sys/class/net").iterdir():
        if (device / "ifindex").read_text().strip() == match.group(1):
            return (device / "address").read_text().strip()
    raise AssertionError(f"no host device has ifindex {match.group(1)}")


def test_a_pod_keeps_answering_when_another_pod_on_the_bridge_goes(
    node: Node, collector: dict[str, Any], webapp_image: str, namespace: str
) -> None:
    """A Linux bridge whose address was never set takes the lowest address of its ports and
    changes it when that port goes: the pods' ARP caches then hold an address of the node that no
    port has any more. scripts/kube-node.sh sets the bridge's address, as Docker does for
    docker0. Deleting the pod whose veth has the lowest address, the bridge keeps its address and
    the other pods answer at once."""
    node.apply(webapp_deployment("webapp", 3, webapp_image), namespace)
    pods = node.wait_ready(namespace, "app=webapp", 3)
    macs = {}
    for pod in pods:
        (pid,) = processes_in(container_ids(pod)["webapp"])
        macs[pod["metadata"]["name"]] = host_veth_mac(pid)
    victim = min(macs, key=lambda name: macs[name])
    survivors = [p["status"]["podIP"] for p in pods if p["metadata"]["name"] != victim]
    bridge = Path("/sys/class/net") / node.values["CROFT_NODE_BRIDGE"]
    before = (bridge / "address").read_text()
    for ip in survivors:
        send_requests(ip, 2, timeout_s=5)  # their ARP caches now hold the node's address
    node.kubectl("-n", namespace, "delete", "pod", victim, "--grace-period=1", "--wait=true")
    wait_until(
        "the deleted pod's veth to leave the bridge", lambda: macs[victim] not in bridge_port_macs(bridge), 30
    )
    assert (bridge / "address").read_text() == before
    for ip in survivors:
        send_requests(ip, 5, timeout_s=5)


def bridge_port_macs(bridge: Path) -> set[str]:
    """The addresses of the bridge's ports (a port may go while they are read)."""
    macs = set()
    for port in (bridge / "brif").iterdir():
        try:
            macs.add((bridge.parent / port.name / "address").read_text().strip())
        except OSError:
            continue
    return macs
