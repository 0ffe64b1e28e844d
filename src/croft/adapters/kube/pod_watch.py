"""The pods of the collector's own node, kept current in the background: one list, then a watch,
both with the field selector `spec.nodeName=<node>` (RBAC: get, list and watch pods; the DaemonSet's
ClusterRole grants those only). The poll loop reads the newest `PodDirectory` without waiting.

Only `croft run` with API access starts one (`api_access`): inside a pod with a service account
token, or with `--kubeconfig`. Only then is the kubernetes client imported, for its configuration
loaders; the requests themselves go through httpx. A bare host has none: `croft run` writes rows
without pod names, as before, and says so once.

A watch ends after `WATCH_SECONDS` (the server closes it) and is opened again from the last
resourceVersion seen (bookmarks keep it fresh); a 410 Gone, or any failure, lists again. A
failure is logged once, with what to do, until the pods are read again; the collector never stops
for it: rows keep their container ids, and names come back with the next list.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from croft.domain.collector.pods import PodDirectory

log = logging.getLogger("croft.run")

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
WATCH_SECONDS = 300
RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)  # waits after successive failures, the last repeated


def api_access(
    kubeconfig: Path | None,
    environ: Mapping[str, str] = os.environ,
    token: Path = SERVICE_ACCOUNT_TOKEN,
) -> str | None:
    """How `croft run` reaches the Kubernetes API: "kubeconfig" (given), "in-cluster" (a pod with
    a service account token and the API's address in its environment), or None (a bare host)."""
    if kubeconfig is not None:
        return "kubeconfig"
    if environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT") and token.is_file():
        return "in-cluster"
    return None


def pods_path(node: str, **query: str) -> tuple[str, dict[str, str]]:
    """The path and query of the pods of `node`, every namespace (a list, or a watch with `query`)."""
    return "/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}", **query}


class PodWatch:
    """The node's pods through `client` (an httpx client for the API server, with its credentials),
    listed and watched on a thread of its own; `directory()` is the newest `PodDirectory`."""

    def __init__(
        self,
        client: httpx.Client,
        node: str,
        *,
        wait: Callable[[float], bool] | None = None,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self._client = client
        self._node = node
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        self._watch_seconds = watch_seconds
        self._directory = PodDirectory()
        self._failed: str | None = None  # the failure said last, until the pods are read again
        self.lists = 0  # lists that succeeded (the tests count relists)
        self._thread = threading.Thread(target=self._run, name="croft-pod-watch", daemon=True)

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def directory(self) -> PodDirectory:
        """The pods as last read (empty before the first list and while none can be read)."""
        return self._directory

    def close(self) -> None:
        self._stopping.set()
        self._client.close()
        self._thread.join(timeout=1)  # a daemon thread: a watch blocked in a read does not hold the exit

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                version: str | None = self._list()
                failures = 0
                while version is not None and not self._stopping.is_set():
                    version = self._watch(version)
            except Exception as exc:  # never let the names stop the collector: say it, retry
                if self._stopping.is_set():
                    return
                self._say(exc)
                failures += 1
                if self._wait(RETRY_S[min(failures, len(RETRY_S)) - 1]):
                    return

    def _list(self) -> str:
        path, query = pods_path(self._node)
        response = self._client.get(path, params=query)
        _raise_for(response, f"list the pods of node {self._node}")
        body = response.json()
        self._directory = PodDirectory.of(body.get("items") or [])
        self.lists += 1
        if self._failed is not None or self.lists == 1:
            log.info(
                "pod names: %d pods on node %s from the Kubernetes API; watching them",
                len(self._directory.pods),
                self._node,
            )
        self._failed = None
        version = (body.get("metadata") or {}).get("resourceVersion")
        return str(version or "")

    def _watch(self, version: str) -> str | None:
        """Apply the events of one watch from `version`; the version to watch from next, or None
        to list again (410 Gone: the version is too old)."""
        path, query = pods_path(
            self._node,
            watch="true",
            resourceVersion=version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(self._watch_seconds),
        )
        timeout = httpx.Timeout(10.0, read=self._watch_seconds + 30.0)
        with self._client.stream("GET", path, params=query, timeout=timeout) as response:
            _raise_for(response, f"watch the pods of node {self._node}")
            for line in response.iter_lines():
                if self._stopping.is_set():
                    return None
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise WatchError(f"the watch answered {obj.get('code')}: {obj.get('message')}")
                self._directory = self._directory.applied(str(kind), obj)
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        return version

    def _say(self, exc: Exception) -> None:
        what = _sentence(exc, self._node)
        if what != self._failed:
            log.warning("%s", what)
        self._failed = what


class WatchError(Exception):
    """The API server refused a list or a watch (`status` its HTTP status, 0 for an error event
    in a watch other than 410 Gone)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def _raise_for(response: httpx.Response, what: str) -> None:
    if response.status_code < 400:
        return
    response.read()
    try:
        message = str(response.json().get("message", ""))[:200]
    except (ValueError, AttributeError):
        message = response.text.strip()[:200]
    raise WatchError(f"cannot {what}: HTTP {response.status_code} {message}".rstrip(), response.status_code)


def _sentence(exc: Exception, node: str) -> str:
    """One sentence for a failure to read the pods, with what to do."""
    status = exc.status if isinstance(exc, WatchError) else 0
    if status in (401, 403):
        return (
            f"pod names: {exc}; grant the collector's ServiceAccount get, list and watch on "
            "pods (croft deploy kubernetes applies the ClusterRole croft-collector); rows keep their "
            "container ids meanwhile"
        )
    cause = str(exc) if isinstance(exc, WatchError) else f"{type(exc).__name__}: {exc}"
    return (
        f"pod names: cannot read the pods of node {node} ({cause}); retrying, rows keep their container ids"
    )


def start_pod_watch(kubeconfig: Path | None, node: str | None, live: bool = True) -> PodWatch | None:
    """The running `PodWatch` of `croft run`, or None: without API access (said once, at start), for
    a replay (its rows were named, or not, when recorded) or without a node name. A configuration
    that cannot be loaded is a `UserError` for --kubeconfig, and said once in a pod."""
    if not live:
        return None
    access = api_access(kubeconfig)
    if access is None:
        log.info(
            "pod names: no Kubernetes API access (not in a pod with a service account token, no "
            "--kubeconfig): rows carry container ids and cgroups, no pod names"
        )
        return None
    if node is None:
        return None
    from croft.adapters.kube.cluster import http_client, in_cluster_configuration, load_configuration

    if access == "kubeconfig":
        configuration = load_configuration(kubeconfig)  # a UserError naming the file
    else:
        try:
            configuration = in_cluster_configuration()
        except Exception as exc:
            log.warning("pod names: the pod's service account cannot be used (%s); no pod names", exc)
            return None
    client = http_client(configuration, httpx.Timeout(30.0, connect=10.0))
    log.info("pod names: reading the pods of node %s from %s (%s)", node, configuration.host, access)
    return PodWatch(client, node).start()
