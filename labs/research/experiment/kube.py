"""The cluster side of a web run, through kubectl (whatever KUBECONFIG or --kubeconfig names).

- `prepare`: delete the previous HPA (its stabilization memory goes with it), apply the app's
  manifests, set the starting replicas, optionally relax the probes, wait until that many pods are
  Ready, then create the HPA of the hpa arm.
- `Watcher`: polls the Deployment, its ReplicaSets and pods every second on a thread and builds the
  run's `Timeline` (rescales, replica set changes, pods created/started/Ready/deleted).
- `events`: the namespace's events in the window (HPA rescales, ReplicaSet scaling, pods).
- `CroftScaler`: croft scale as a subprocess through its own `kubectl proxy`, log to scaler.log.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import apps
from apps import App
from croft.runs.rundir import PodLife, ReplicaSetChange, Rescale, Timeline

POLL_S = 1.0
PROBES = {
    "default": None,
    "relaxed": {"initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
}


class KubeError(RuntimeError):
    """kubectl failed; the message has its command and what it said."""


def parse_time_ms(text: str | None) -> int | None:
    """An RFC 3339 time of the API (`2026-01-01T00:00:00Z`, maybe with fractions) as unix ms."""
    if not text:
        return None
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


class Kubectl:
    def __init__(
        self, kubectl: str = "kubectl", kubeconfig: str | None = None, timeout_s: float = 60
    ) -> None:
        self.base = [kubectl, *(["--kubeconfig", kubeconfig] if kubeconfig else [])]
        self.timeout_s = timeout_s

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        try:
            out = subprocess.run(
                [*self.base, *args],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise KubeError(f"{self.base[0]} not found: install kubectl or pass --kubectl PATH") from None
        except subprocess.TimeoutExpired:
            raise KubeError(f"kubectl {' '.join(args)} took over {self.timeout_s:.0f} s") from None
        if check and out.returncode != 0:
            raise KubeError(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json"))


def _manifest_args(paths: Sequence[Path]) -> list[str]:
    args = []
    for path in paths:
        if not path.exists():
            raise KubeError(f"manifest {path} does not exist (see apps.json)")
        args += ["-f", str(path)]
    return args


def apply(kube: Kubectl, app: App, paths: Sequence[Path], verb: str = "apply", *flags: str) -> None:
    """`kubectl <verb>` of the manifests at `paths` as `app` runs them: the files themselves, or,
    for an app that sizes its pods (apps.json `pod`), as `apps.rendered` writes them."""
    if app.pod is None:
        kube.run(verb, *_manifest_args(paths), *flags)
        return
    _manifest_args(paths)  # each must exist
    text = "---\n".join(apps.rendered(app, path) for path in paths)
    kube.run(verb, "-f", "-", *flags, stdin=text)


def relax_probes(kube: Kubectl, app: App, probes: str) -> None:
    """Set the probe timing of `PROBES[probes]` on every probe of the Deployment's containers."""
    timing = PROBES[probes]
    if timing is None:
        return
    obj = kube.json("-n", app.namespace, "get", "deployment", app.deployment)
    patch = []
    for i, container in enumerate(obj["spec"]["template"]["spec"]["containers"]):
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            if probe in container:
                for key, value in timing.items():
                    patch.append(
                        {
                            "op": "add",
                            "path": f"/spec/template/spec/containers/{i}/{probe}/{key}",
                            "value": value,
                        }
                    )
    if patch:
        kube.run(
            "-n", app.namespace, "patch", "deployment", app.deployment, "--type=json", "-p", json.dumps(patch)
        )


def ready_pods(kube: Kubectl, app: App) -> list[dict[str, Any]]:
    pods = kube.json("-n", app.namespace, "get", "pods", "-l", app.selector)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and _ready_condition(p)[0]]


def prepare(
    kube: Kubectl, app: App, autoscaler: str, replicas: int, probes: str, ready_timeout_s: float
) -> None:
    """The app at `replicas` Ready replicas, with its HPA only for the hpa arm."""
    apply(kube, app, [app.hpa], "delete", "--ignore-not-found")
    apply(kube, app, app.manifests)
    kube.run("-n", app.namespace, "scale", "deployment", app.deployment, f"--replicas={replicas}")
    relax_probes(kube, app, probes)
    deadline = time.monotonic() + ready_timeout_s
    while True:
        pods = kube.json("-n", app.namespace, "get", "pods", "-l", app.selector)["items"]
        alive = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(alive) == replicas and all(_ready_condition(p)[0] for p in alive):
            break
        if time.monotonic() > deadline:
            raise KubeError(
                f"{app.namespace}/{app.deployment} did not have {replicas} Ready pods (and no others) "
                f"within {ready_timeout_s:.0f} s: kubectl -n {app.namespace} describe pods -l {app.selector}"
            )
        time.sleep(POLL_S)
    if autoscaler == "hpa":
        apply(kube, app, [app.hpa])


def _ready_condition(pod: Mapping[str, Any]) -> tuple[bool, int | None]:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True", parse_time_ms(condition.get("lastTransitionTime"))
    return False, None


def _started_ms(pod: Mapping[str, Any]) -> int | None:
    times = [
        parse_time_ms(((s.get("state") or {}).get("running") or {}).get("startedAt"))
        for s in (pod.get("status") or {}).get("containerStatuses") or ()
    ]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _container_ids(pod: Mapping[str, Any]) -> tuple[str, ...]:
    ids = []
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        raw = status.get("containerID") or ""
        if raw:
            ids.append(raw.split("://", 1)[-1])
    return tuple(ids)


class Watcher:
    """Samples the Deployment, its ReplicaSets and pods every `POLL_S` on a thread."""

    def __init__(self, kube: Kubectl, app: App, source: str) -> None:
        self.kube, self.app, self.source = kube, app, source
        self.rescales: list[Rescale] = []
        self.replica_sets: list[ReplicaSetChange] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.errors = 0
        self.initial_replicas: int | None = None
        self._replicas: int | None = None
        self._rs: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="timeline")

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.sample()
            except (KubeError, json.JSONDecodeError):
                self.errors += 1  # one missed sample; the next one catches up

    def sample(self) -> None:
        now = int(time.time() * 1000)
        ns, sel = self.app.namespace, self.app.selector
        items = self.kube.json("-n", ns, "get", "deployments,replicasets,pods", "-l", sel)["items"]
        seen = set()
        for obj in items:
            kind, meta = obj.get("kind"), obj["metadata"]
            if kind == "Deployment" and meta["name"] == self.app.deployment:
                replicas = int(obj["spec"].get("replicas", 1))
                if self._replicas is None:
                    self.initial_replicas = replicas
                elif replicas != self._replicas:
                    self.rescales.append(Rescale(now, self._replicas, replicas, self.source))
                self._replicas = replicas
            elif kind == "ReplicaSet":
                replicas = int(obj["spec"].get("replicas", 0))
                if self._rs.get(meta["name"]) != replicas:
                    self.replica_sets.append(ReplicaSetChange(now, meta["name"], replicas))
                    self._rs[meta["name"]] = replicas
            elif kind == "Pod":
                seen.add(meta["name"])
                self._pod(now, obj)
        for name, pod in self.pods.items():
            if name not in seen and pod["deleted_ms"] is None:
                pod["deleted_ms"] = now

    def _pod(self, now: int, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        pod = self.pods.setdefault(
            meta["name"],
            {
                "created_ms": parse_time_ms(meta.get("creationTimestamp")) or now,
                "started_ms": None,
                "ready_ms": None,
                "deleted_ms": None,
                "container_ids": (),
            },
        )
        pod["started_ms"] = pod["started_ms"] or _started_ms(obj)
        ready, since = _ready_condition(obj)
        if ready and pod["ready_ms"] is None:
            pod["ready_ms"] = since or now
        if meta.get("deletionTimestamp") and pod["deleted_ms"] is None:
            pod["deleted_ms"] = parse_time_ms(meta["deletionTimestamp"]) or now
        pod["container_ids"] = _container_ids(obj) or pod["container_ids"]

    def timeline(self, start_ms: int, end_ms: int, events: Sequence[Mapping[str, Any]] = ()) -> Timeline:
        return Timeline(
            namespace=self.app.namespace,
            deployment=self.app.deployment,
            start_ms=start_ms,
            end_ms=end_ms,
            initial_replicas=self.initial_replicas or 1,
            rescales=tuple(self.rescales),
            replica_sets=tuple(self.replica_sets),
            pods=tuple(
                PodLife(
                    name,
                    p["created_ms"],
                    p["started_ms"],
                    p["ready_ms"],
                    p["deleted_ms"],
                    tuple(p["container_ids"]),
                )
                for name, p in sorted(self.pods.items(), key=lambda kv: kv[1]["created_ms"])
            ),
            events=tuple(events),
        )


def events(kube: Kubectl, app: App, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
    """The namespace's events whose last time falls in [start_ms, end_ms], oldest first."""
    out = []
    for event in kube.json("-n", app.namespace, "get", "events")["items"]:
        at = parse_time_ms(
            event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
        )
        if at is None or not start_ms <= at <= end_ms:
            continue
        involved = event.get("involvedObject") or {}
        out.append(
            {
                "at_ms": at,
                "reason": event.get("reason", ""),
                "message": event.get("message", ""),
                "object": f"{involved.get('kind', '?')}/{involved.get('name', '?')}",
                "count": event.get("count", 1),
                "source": (event.get("source") or {}).get("component", ""),
            }
        )
    return sorted(out, key=lambda e: e["at_ms"])


@contextlib.contextmanager
def kubectl_proxy(kube: Kubectl) -> Iterator[str]:
    """A `kubectl proxy` on a free loopback port for the length of the block; yields its URL."""
    process = subprocess.Popen(
        [*kube.base, "proxy", "--address=127.0.0.1", "--port=0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not match:
            raise KubeError(f"kubectl proxy did not start: {line.strip()}")
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def overridden(argv: Sequence[str], extra: Sequence[str]) -> list[str]:
    """`argv` (options each followed by one value) with `extra` after it, less the options `extra`
    names again: the caller's choice wins and no option is given twice."""
    named = {arg for arg in extra if arg.startswith("--")}
    kept: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in named:
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        kept.append(arg)
    return [*kept, *extra]


class CroftScaler:
    """croft scale for one Deployment, its output into scaler.log, stopped with SIGTERM."""

    def __init__(self, croft: str, app: App, api: str, log: Path, extra: Sequence[str] = ()) -> None:
        cal = app.calibration
        self.argv = [
            croft,
            "scale",
            "--namespace",
            app.namespace,
            "--deployment",
            app.deployment,
            "--syscall",
            cal.syscall,
            "--calls-per-request",
            str(cal.calls_per_request),
            "--cpu-per-request-ms",
            str(cal.cpu_per_request_ms),
            "--target",
            str(app.target),
            "--max-replicas",
            str(app.max_replicas),
            "--api",
            api,
        ]
        self.argv = [croft, *overridden(self.argv[1:], extra)]
        self.log_path = log
        self._log: IO[str] | None = None
        self._process: subprocess.Popen[str] | None = None

    def start(self, check_s: float = 2.0) -> None:
        """Starts it and, for `check_s`, watches that it stays up: a scaler that refused its options
        must stop the run, not leave it to run without one."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self._process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, text=True)
        try:
            code = self._process.wait(timeout=check_s)
        except subprocess.TimeoutExpired:
            return
        self._log.close()
        lines = [line.strip(" │╭╮╰╯─") for line in self.log_path.read_text().splitlines()]
        said = " ".join(line for line in lines if line)
        raise KubeError(f"croft scale exited with {code} as it started: {said[-300:]} (see {self.log_path})")

    def stop(self) -> int | None:
        code = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
            try:
                code = self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                code = self._process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
        return code
