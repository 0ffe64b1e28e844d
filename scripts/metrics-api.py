#!/usr/bin/env python3
"""A metrics.k8s.io/v1beta1 stand-in for the test node (Debian packages no metrics-server).

It serves real numbers: each request reads the kubelet's own /stats/summary (metrics-server's
source) and /pods (for labels), with the API server's kubelet-client certificate, and answers
PodMetrics and NodeMetrics. scripts/kube-node.sh starts it on the node's bridge address and
registers it as an aggregated API (APIService -> selector-less Service -> Endpoints).
Standard library only: it runs with the machine's python3.

usage: metrics-api.py BIND_IP PORT KUBELET_URL SERVING_CERT SERVING_KEY CLIENT_CERT CLIENT_KEY
"""

from __future__ import annotations

import datetime
import json
import ssl
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

GROUP_VERSION = "metrics.k8s.io/v1beta1"
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": GROUP_VERSION,
    "resources": [
        {
            "name": "nodes",
            "singularName": "",
            "namespaced": False,
            "kind": "NodeMetrics",
            "verbs": ["get", "list"],
        },
        {
            "name": "pods",
            "singularName": "",
            "namespaced": True,
            "kind": "PodMetrics",
            "verbs": ["get", "list"],
        },
    ],
}


class Kubelet:
    def __init__(self, url: str, cert: str, key: str) -> None:
        self.url = url
        self.context = ssl.create_default_context()
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE  # the kubelet's self-signed serving certificate
        self.context.load_cert_chain(cert, key)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, context=self.context, timeout=5) as response:
            return json.load(response)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def selector_matches(labels: dict[str, str], selector: str) -> bool:
    """Equality-based selectors (a=b, a==b, a!=b), which the HPA sends."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def usage(stats: dict[str, Any]) -> dict[str, str]:
    cpu = (stats.get("cpu") or {}).get("usageNanoCores") or 0
    memory = (stats.get("memory") or {}).get("workingSetBytes") or 0
    return {"cpu": f"{cpu}n", "memory": str(memory)}


def pod_metrics(
    kubelet: Kubelet, namespace: str | None, name: str | None, selector: str
) -> list[dict[str, Any]]:
    labels = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"].get("labels") or {}
        for p in kubelet.get("/pods").get("items", [])
    }
    items = []
    for pod in kubelet.get("/stats/summary").get("pods", []):
        ref = pod["podRef"]
        if (namespace and ref["namespace"] != namespace) or (name and ref["name"] != name):
            continue
        if selector and not selector_matches(labels.get((ref["namespace"], ref["name"]), {}), selector):
            continue
        containers = [{"name": c["name"], "usage": usage(c)} for c in pod.get("containers") or []]
        if not containers:
            continue  # metrics-server leaves out pods it has no container numbers for
        items.append(
            {
                "metadata": {"name": ref["name"], "namespace": ref["namespace"], "creationTimestamp": now()},
                "timestamp": now(),
                "window": "10s",
                "containers": containers,
            }
        )
    return items


def handler(kubelet: Kubelet) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write("metrics-api: " + format % args + "\n")

        def send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def not_found(self) -> None:
            self.send(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                },
            )

        def do_GET(self) -> None:
            url = urlparse(self.path)
            selector = (parse_qs(url.query).get("labelSelector") or [""])[0]
            parts = [p for p in url.path.split("/") if p]
            try:
                if url.path in ("/healthz", "/livez", "/readyz"):
                    return self.send(200, {"status": "ok"})
                if parts[:3] != ["apis", "metrics.k8s.io", "v1beta1"]:
                    return self.not_found()
                rest = parts[3:]
                if not rest:
                    return self.send(200, RESOURCES)
                if rest[0] == "nodes":
                    node = kubelet.get("/stats/summary")["node"]
                    item = {
                        "metadata": {"name": node["nodeName"], "creationTimestamp": now()},
                        "timestamp": now(),
                        "window": "10s",
                        "usage": usage(node),
                    }
                    if len(rest) == 2:
                        if rest[1] != node["nodeName"]:
                            return self.not_found()
                        return self.send(200, {**item, "kind": "NodeMetrics", "apiVersion": GROUP_VERSION})
                    return self.send(
                        200, {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "items": [item]}
                    )
                namespace = name = None
                if rest[0] == "namespaces" and len(rest) >= 3:
                    namespace, rest = rest[1], rest[2:]
                if rest[0] != "pods":
                    return self.not_found()
                if len(rest) == 2:
                    name = rest[1]
                items = pod_metrics(kubelet, namespace, name, selector)
                if name:
                    if not items:
                        return self.not_found()
                    return self.send(200, {**items[0], "kind": "PodMetrics", "apiVersion": GROUP_VERSION})
                return self.send(200, {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "items": items})
            except (OSError, ValueError, KeyError) as error:
                return self.send(
                    500, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": str(error)}
                )

    return Handler


def main() -> None:
    bind, port, kubelet_url, cert, key, client_cert, client_key = sys.argv[1:8]
    server = ThreadingHTTPServer((bind, int(port)), handler(Kubelet(kubelet_url, client_cert, client_key)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
