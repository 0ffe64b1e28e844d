"""Driving the real test node (scripts/kube-node.sh): images built with buildah and imported into
its containerd, pods waited for until Ready, files on the node read as root, the collector's rows."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from tests.helpers.kube import ControlPlane

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "kube-node.sh"
COLLECTOR_IMAGE = "localhost/croft-collector:test"
WEBAPP_IMAGE = "localhost/croft-webapp:test"
KUBECTL_IMAGE = "localhost/croft-kubectl:test"
# The collector's dataset on the node: a directory of the tests' own (croft deploy kubernetes
# --dataset-dir), never the host's default /var/lib/croft, which a `make run` on this host writes:
# two collectors on one directory is what croft run's lock refuses. kube-node.sh's `down` removes
# it when `up` made it.
DATASET_DIR = Path("/var/lib/croft-node")


@attrs.define
class Node:
    """The running node: its API (a ControlPlane), its address and name, and its script."""

    plane: ControlPlane
    name: str
    ip: str
    bin_dir: Path
    values: dict[str, str]

    def script(self, *args: str, timeout: float = 900) -> str:
        out = subprocess.run(
            ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if out.returncode != 0:
            raise AssertionError(f"kube-node.sh {' '.join(args)} failed: {out.stderr.strip()[-3000:]}")
        return out.stdout

    def build_image(self, tag: str, context: Path, dockerfile: Path, *options: str) -> None:
        """buildah bud FROM the local Debian base, imported into the node's containerd."""
        self.script("image-build", tag, str(context), str(dockerfile), *options)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        out = subprocess.run(
            [str(self.plane.bin_dir / "kubectl"), "--kubeconfig", str(self.plane.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=120,
            input=stdin,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def apply(self, yaml_text: str, namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.kubectl(*ns, "apply", "-f", "-", stdin=yaml_text)

    def get(self, path: str) -> Any:
        return self.plane.call("GET", path)

    def ready_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [p for p in self.plane.pods(namespace, selector) if pod_ready(p)]

    def wait_ready(
        self, namespace: str, selector: str, count: int, timeout_s: float = 180
    ) -> list[dict[str, Any]]:
        """The `count` pods matching `selector`, once all are Ready; on a timeout, says what the
        pods and their events said."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pods = self.plane.pods(namespace, selector)
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if len(live) == count and all(pod_ready(p) for p in live):
                return live
            time.sleep(0.5)
        raise AssertionError(f"{count} pods {selector} in {namespace} not Ready: {self.describe(namespace)}")

    def describe(self, namespace: str) -> str:
        pods = self.kubectl("-n", namespace, "get", "pods", "-o", "wide", check=False)
        events = self.kubectl("-n", namespace, "get", "events", "--sort-by=.lastTimestamp", check=False)
        return f"\n{pods}\n{events[-3000:]}"

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        extra = ["-c", container] if container else []
        return self.kubectl("-n", namespace, "logs", pod, *extra, check=False)


def reader_token(node: Node, account: str = "croft-metrics-reader", namespace: str = "croft") -> str:
    """A 10-minute token of the collectors' reader ServiceAccount `account` (TokenRequest, as the
    admin), for reading a collector deployed with --auth kubernetes directly."""
    from croft.domain.access import token_request

    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
    answer = node.plane.call("POST", path, token_request())
    return str(answer["status"]["token"])


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def container_ids(pod: dict[str, Any]) -> dict[str, str]:
    """Container name -> the runtime's id, from status.containerStatuses[].containerID
    (`containerd://<64 hex>`), the prefix dropped."""
    out = {}
    for status in pod["status"].get("containerStatuses") or []:
        runtime_id = status.get("containerID") or ""
        out[status["name"]] = re.sub(r"^[a-z-]+://", "", runtime_id)
    return out


def dataset_rows(directory: Path = DATASET_DIR) -> Iterator[dict[str, Any]]:
    """The rows of the live dataset file(s) under `directory` (plain .jsonl only: the tests run
    for minutes, far from an hourly rotation)."""
    for path in sorted(directory.glob("*.jsonl")):
        with path.open() as f:
            for line in f:
                if line.endswith("\n"):
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue


def wait_for(what: str, probe: Any, timeout_s: float = 60, every_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every_s)


SYSCTLS = (
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
)
NODE_DIRS = (
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/run/containerd",
    "/run/netns",
    "/etc/cni",
)


def host_state() -> dict[str, Any]:
    """What the node may change on the host and `down` must put back: iptables chains and rules,
    the sysctls above, network links, network namespaces, mounts and directories the kubelet and
    containerd use, and processes of this node."""

    def run(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    rules = {}
    for tool in ("iptables-save", "ip6tables-save"):
        rules[tool] = sorted(
            line for line in run(tool).splitlines() if line.startswith((":", "-A")) and "[" not in line
        )
    mounts = sorted(
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if any(k in line.split()[1] for k in ("/run/containerd", "/run/netns", "croft-node", "croft-k8s"))
    )
    return {
        "iptables": rules,
        "sysctls": {
            k: Path("/proc/sys", k).read_text().strip() for k in SYSCTLS if Path("/proc/sys", k).exists()
        },
        "links": sorted(
            line.split(":")[1].strip().split("@")[0] for line in run("ip", "-o", "link").splitlines()
        ),
        "netns": sorted(run("ip", "netns", "list").split()),
        "mounts": mounts,
        "dirs": sorted(d for d in NODE_DIRS if Path(d).exists()),
        "cgroups": sorted(
            str(p) for pattern in ("kubepods", "*/kubepods") for p in Path("/sys/fs/cgroup").glob(pattern)
        ),
        "processes": sorted(
            line
            for line in run("pgrep", "-af", "/tmp/croft-node|croft-node.lock").splitlines()
            if "pgrep" not in line
        ),
    }


def host_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two `host_state`s, one short line per key (the key first, so a
    truncated log still names it): items added and removed, or the values that moved."""
    lines = []
    for key in before:
        old, new = before[key], after[key]
        if old == new:
            continue
        if isinstance(old, list):
            added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
            lines.append(f"{key}: added {added[:8]}, removed {removed[:8]}")
        elif isinstance(old, dict):
            moved = {k: (old.get(k), new.get(k)) for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
            lines.append(f"{key}: {moved}" if key != "iptables" else f"{key}: {host_changes(old, new)}")
        else:
            lines.append(f"{key}: {old!r} -> {new!r}")
    return lines


class OpenLoop:
    """Requests at a fixed rate, each on its own connection from a small pool of threads, whatever
    the answers' latency (open loop); counts what was sent and answered."""

    def __init__(self, host: str, port: int, rate: float, seconds: float) -> None:
        self.sent = self.ok = 0
        self._lock = threading.Lock()
        self._slots = [time.monotonic() + i / rate for i in range(int(rate * seconds))]
        self._host, self._port = host, port
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(8)]

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._slots:
                    return
                due = self._slots.pop(0)
                self.sent += 1
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=10)
                connection.request("GET", "/work")
                if connection.getresponse().status == 200:
                    with self._lock:
                        self.ok += 1
                connection.close()
            except OSError:
                continue

    def __enter__(self) -> OpenLoop:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for thread in self._threads:
            thread.join(timeout=60)


# the test webapp's CPU time per request (ms): labs/research/experiment/workloads/webapp
CPU_MS = 20


def webapp_deployment(name: str, replicas: int, image: str, service_account_token: bool = False) -> str:
    # No readiness probe: a kubelet probe would add sendto calls the test did not send.
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, labels: {{app: {name}}}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      automountServiceAccountToken: {str(service_account_token).lower()}
      containers:
      - name: webapp
        image: {image}
        imagePullPolicy: Never
        env: [{{name: CPU_MS, value: "{CPU_MS}"}}, {{name: SENDTO, value: "2"}}]
        ports: [{{name: http, containerPort: 8080}}]
"""


def processes_in(container_id: str) -> list[int]:
    """Host pids whose cgroup path names `container_id`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if container_id in (entry / "cgroup").read_text():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def send_requests(ip: str, count: int, timeout_s: float = 30) -> None:
    """`count` GET /work on one keep-alive connection, each read to the end. The test pods have no
    readiness probe (it would add sendto calls), so Ready means the container started, not that
    the server listens yet: a refused connection is retried for 30 s. A request not answered within
    `timeout_s` fails the test, saying which."""
    deadline = time.monotonic() + 30
    while True:
        connection = http.client.HTTPConnection(ip, 8080, timeout=timeout_s)
        try:
            connection.connect()
            break
        except ConnectionRefusedError:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    try:
        for sent in range(count):
            connection.request("GET", "/work")
            try:
                response = connection.getresponse()
            except TimeoutError:
                raise AssertionError(
                    f"{ip} did not answer request {sent + 1} of {count} in {timeout_s} s"
                ) from None
            response.read()
            assert response.status == 200
    finally:
        connection.close()
