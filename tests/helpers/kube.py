"""Driving the test control plane: admin calls, kubectl, ServiceAccount kubeconfigs, kubectl proxy,
pods made Running by hand (there is no kubelet), and a stand-in collector /metrics server."""

from __future__ import annotations

import base64
import contextlib
import http.server
import os
import re
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx


@attrs.define
class ControlPlane:
    server: str
    ca: Path
    token: str
    kubeconfig: Path
    bin_dir: Path
    run_dir: Path
    script: Path
    env: dict[str, str]
    http: httpx.Client

    @classmethod
    def from_env(cls, values: Mapping[str, str], script: Path, env: dict[str, str]) -> ControlPlane:
        http = httpx.Client(
            base_url=values["CROFT_K8S_SERVER"],
            verify=ssl.create_default_context(cafile=values["CROFT_K8S_CA"]),
            headers={"Authorization": f"Bearer {values['CROFT_K8S_TOKEN']}"},
            timeout=10,
        )
        return cls(
            server=values["CROFT_K8S_SERVER"],
            ca=Path(values["CROFT_K8S_CA"]),
            token=values["CROFT_K8S_TOKEN"],
            kubeconfig=Path(values["KUBECONFIG"]),
            bin_dir=Path(values["CROFT_K8S_BIN"]),
            run_dir=Path(values["CROFT_K8S_RUN"]),
            script=script,
            env=env,
            http=http,
        )

    # -- admin calls -------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json"} if patch else {}
        response = self.http.request(method, path, json=body, headers=headers)
        if response.status_code == 409 and method == "POST":
            return None  # already there (a test module re-creating a namespace)
        response.raise_for_status()
        return response.json()

    def kubectl(self, *args: str, kubeconfig: Path | None = None, check: bool = True) -> str:
        out = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def wait_for(self, what: str, probe: Any, timeout_s: float = 30) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def wait_for_default_service_account(self) -> None:
        def ready() -> bool:
            response = self.http.get("/api/v1/namespaces/default/serviceaccounts/default")
            return response.status_code == 200 and bool(response.json().get("secrets"))

        self.wait_for("the default ServiceAccount and its token", ready, 60)

    def namespace(self, name: str) -> None:
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

    def deployment(self, namespace: str, name: str, replicas: int = 1, cpu_limit: str = "1") -> None:
        labels = {"app": name}
        body = {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "containers": [
                            {
                                "name": "web",
                                "image": "webapp:test",
                                "resources": {"limits": {"cpu": cpu_limit}},
                            }
                        ],
                    },
                },
            },
        }
        self.call("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body)

    def replicas(self, namespace: str, name: str) -> int:
        return int(
            self.call("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")["spec"]["replicas"]
        )

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods"
        return list(self.http.get(path, params={"labelSelector": selector}).json()["items"])

    def pod(self, namespace: str, name: str, labels: Mapping[str, str]) -> None:
        body = {
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"automountServiceAccountToken": False, "containers": [{"name": "main", "image": "x"}]},
        }
        self.call("POST", f"/api/v1/namespaces/{namespace}/pods", body)

    def make_running(self, namespace: str, pod: str, container_ids: Mapping[str, str], ip: str = "") -> None:
        """What a kubelet would report: Running, Ready, each container started with its id."""
        statuses = [
            {
                "name": name,
                "ready": True,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "containerID": f"containerd://{cid}",
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            }
            for name, cid in container_ids.items()
        ]
        status: dict[str, Any] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": statuses,
        }
        if ip:
            status.update(podIP=ip, podIPs=[{"ip": ip}], hostIP=ip)
        self.call(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}/status", {"status": status}, patch=True
        )

    # -- identities and proxies --------------------------------------------------------------------

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        def token() -> str:
            sa = self.http.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}").json()
            for ref in sa.get("secrets") or []:
                secret = self.call("GET", f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
                if "token" in (secret.get("data") or {}):
                    return base64.b64decode(secret["data"]["token"]).decode()
            return ""

        value = self.wait_for(f"a token for ServiceAccount {namespace}/{name}", token, 60)
        cluster = f"{{server: '{self.server}', certificate-authority: '{self.ca}'}}"
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: t, cluster: {cluster}}}]\n"
            f"users: [{{name: sa, user: {{token: '{value}'}}}}]\n"
            "contexts: [{name: t, context: {cluster: t, user: sa}}]\ncurrent-context: t\n"
        )
        return path

    @contextmanager
    def proxy(self, kubeconfig: Path | None = None) -> Iterator[str]:
        """A real `kubectl proxy` on a free loopback port; yields its URL."""
        process = subprocess.Popen(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig), "proxy",
             "--address=127.0.0.1", "--port=0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            match = re.search(r"127\.0\.0\.1:(\d+)", line)
            assert match, f"kubectl proxy said {line!r}"
            yield f"http://127.0.0.1:{match.group(1)}"
        finally:
            process.terminate()
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()

    def stop_apiserver(self) -> None:
        subprocess.run(["bash", str(self.script), "stop-apiserver"], env=self.env, check=True, timeout=60)

    def start_apiserver(self) -> None:
        subprocess.run(
            ["bash", str(self.script), "start-apiserver"],
            env=self.env,
            check=True,
            timeout=120,
            capture_output=True,
        )


def host_ip() -> str | None:
    """This host's non-loopback IPv4 address (the API server's pod proxy refuses loopback targets)."""
    candidates: list[str] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, contextlib.suppress(OSError):
        probe.connect(("192.0.2.1", 9))  # UDP connect sends nothing; it only picks a route
        candidates.append(str(probe.getsockname()[0]))
    with contextlib.suppress(OSError):
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
        candidates += [str(info[4][0]) for info in infos]
    usable = [a for a in candidates if not a.startswith("127.") and a != "0.0.0.0"]
    return usable[0] if usable else None


class MetricsServer:
    """A stand-in for a collector's /metrics: serves what `make_body()` returns at each request,
    whatever its query (as a collector older than the query does); `paths` are the paths asked,
    query included."""

    def __init__(self, address: str) -> None:
        self.make_body: Callable[[], str] = lambda: ""
        self.requests = 0
        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                outer.paths.append(self.path)
                data = outer.make_body().encode()
                self.send_response(200 if self.path.partition("?")[0] == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def croft_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
