"""apps.json: the applications under test. A new app is a new entry, not new code.

Each entry: namespace, deployment, selector (the pods' label selector), container, manifests
(files or directories, relative to this directory, applied in order), hpa (the HPA arm's
manifest), host (base URL the load goes to), paths (requested in turn), cpu_limit_cores,
max_replicas, target, calibration (syscall, calls_per_request, cpu_per_request_ms: what croft
scale needs; source says where they came from) and sim (the simulator's model: service_cv; service
and accept_cpu_ms, how a pod serves the requests it holds (croft.sim.cluster; `--service`,
`--accept-cpu-ms` override them); and the pod delays as [low, high] seconds drawn uniformly:
controller_delay_s from a scale-up to the pod object, pod_start_s from the object to its containers
running, readiness_s from running to Ready; `run.py simulate|answer
--pod-start-secs/--ready-secs/--controller-delay-secs` override them, and `answer --real` measures
them on the real runs).

An entry may start from another (`like`: every field of the named entry, then its own), and size
the webapp's pods itself (`pod`: `cpu`, the CPU request and limit as a Kubernetes quantity, which
is then the entry's cpu_limit_cores; `cpu_ms`, the CPU each request burns, the webapp's CPU_MS;
`max_connection_age_s`, the server's bound on a keep-alive connection's life,
MAX_CONNECTION_AGE_S, 0 for none): its manifests are then applied as `rendered` writes them. So the
lab's 1-CPU webapp, the test node's sizing of 2026-12-03 (250m) and today's (200m, bounded
connections) are three entries over the same manifests. `burst` (base and peak RPS, seconds before,
held and after, the ramp shapes) is the burst an entry is sized for, and `cluster` the settings of
the cluster it runs on that the simulator needs (croft scale's --interval and stabilization, the
HPA's sync period and stabilization, metrics-server's resolution, the probes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

import profiles
from croft.sim import SimApp

HERE = Path(__file__).resolve().parent
APPS_JSON = HERE / "apps.json"


class AppError(ValueError):
    """apps.json or the --app chosen is unusable; the message says what to fix."""


@attrs.frozen
class Calibration:
    syscall: str
    calls_per_request: float
    cpu_per_request_ms: float
    source: str = ""


@attrs.frozen
class PodSizing:
    """How an entry sizes the webapp's pods (workloads/webapp): `cpu` the CPU request and limit (a
    Kubernetes quantity), `cpu_ms` the CPU a request burns (CPU_MS), `max_connection_age_s` the
    server's bound on a keep-alive connection's life (MAX_CONNECTION_AGE_S; 0: none: a connection
    lives as long as its client keeps it), `image` the image to run instead of the manifest's."""

    cpu: str
    cpu_ms: float
    max_connection_age_s: float = 0.0
    image: str | None = None

    @property
    def cpu_cores(self) -> float:
        return cpu_cores(self.cpu)


@attrs.frozen
class BurstPlan:
    """The burst an entry is sized for: `base_rps` before and after, `peak_rps` held `hold_s`,
    reached in each of `shapes` seconds (0: a step) after `before_s` of base; `after_s` of base
    follow. A run puts `profiles.WARMUP_S` at the base rate in front."""

    base_rps: float
    peak_rps: float
    before_s: float = 60.0
    hold_s: float = profiles.BURST_S
    after_s: float = 60.0
    shapes: tuple[float, ...] = (0.0,)

    def profile(self, ramp_s: float) -> profiles.Profile:
        """The run's profile at ramp `ramp_s`, warm-up included."""
        burst = profiles.ramp_burst(
            self.base_rps, self.peak_rps, ramp_s, self.before_s, self.hold_s, self.after_s
        )
        return profiles.with_warmup(burst)


@attrs.frozen
class ClusterSettings:
    """What the cluster an entry runs on does that the simulator must do alike (None: the
    simulator's default): croft scale's --interval and --stabilization-secs, the HPA controller's
    sync period and scale-down stabilization, metrics-server's resolution; `probes` is run.py web's
    --probes. Autoscalers sized alike get the same scale-down stabilization."""

    scaler_interval_s: float | None = None
    scaler_stabilization_s: float | None = None
    hpa_sync_s: float | None = None
    hpa_down_stabilization_s: float | None = None
    metric_resolution_s: float | None = None
    probes: str = "default"


@attrs.frozen
class App:
    name: str
    namespace: str
    deployment: str
    selector: str
    container: str
    manifests: tuple[Path, ...]
    hpa: Path
    host: str
    paths: tuple[str, ...]
    cpu_limit_cores: float
    max_replicas: int
    target: float
    calibration: Calibration
    sim: dict[str, Any]
    pod: PodSizing | None = None
    burst: BurstPlan | None = None
    cluster: ClusterSettings = ClusterSettings()

    def sim_app(self) -> SimApp:
        """The simulator's view of this app: its calibration taken as the truth."""
        extra: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in self.sim.items()}
        if "sampled_delays" in extra:
            extra["sampled_delays"] = frozenset(extra["sampled_delays"])
        return SimApp(
            name=self.name,
            namespace=self.namespace,
            deployment=self.deployment,
            cpu_limit_cores=self.cpu_limit_cores,
            cpu_per_request_ms=self.calibration.cpu_per_request_ms,
            calls_per_request=self.calibration.calls_per_request,
            syscall=self.calibration.syscall,
            max_replicas=self.max_replicas,
            target=self.target,
            max_connection_age_s=self.pod.max_connection_age_s if self.pod is not None else 0.0,
            **extra,
        )


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity (`200m`, `0.5`, `1`) in cores; anything else is an `AppError`."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m?)", quantity.strip())
    if match is None or float(match.group(1)) <= 0:
        raise AppError(f"pod cpu {quantity!r} is not a CPU quantity above 0 such as 200m or 1")
    value = float(match.group(1))
    return value / 1000 if match.group(2) else value


def with_connection_age(app: App, max_connection_age_s: float) -> App:
    """`app` whose server bounds a connection's life at `max_connection_age_s` (0: no bound)."""
    if app.pod is None:
        raise AppError(
            f"app {app.name} does not size its pods (no pod in apps.json): it has no connection bound"
        )
    if not 0 <= max_connection_age_s < 1e6:
        raise AppError("a connection's age bound must be seconds, 0 (none) or more")
    return attrs.evolve(app, pod=attrs.evolve(app.pod, max_connection_age_s=max_connection_age_s))


def rendered(app: App, manifest: Path) -> str:
    """The YAML documents of `manifest` (a file, or a directory of .yaml/.yml files) as `app` applies
    them: every namespaced object in `app.namespace` (and the Namespace named so); with `app.pod`,
    the Deployment's container `app.container` (else its first) gets the pod's CPU as request and
    limit, its image, and CPU_MS and MAX_CONNECTION_AGE_S set in its env."""
    files = (
        sorted(p for p in manifest.iterdir() if p.suffix in (".yaml", ".yml"))
        if manifest.is_dir()
        else [manifest]
    )
    docs = []
    for path in files:
        try:
            loaded = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise AppError(f"manifest {path} cannot be read as YAML: {exc}") from None
        for doc in loaded:
            _place(doc, app)
            docs.append(doc)
    return yaml.safe_dump_all(docs, sort_keys=False)


def _place(doc: dict[str, Any], app: App) -> None:
    meta = doc.setdefault("metadata", {})
    if doc.get("kind") == "Namespace":
        meta["name"] = app.namespace
    else:
        meta["namespace"] = app.namespace
    if doc.get("kind") != "Deployment" or meta.get("name") != app.deployment or app.pod is None:
        return
    containers = doc["spec"]["template"]["spec"]["containers"]
    container = next((c for c in containers if c.get("name") == app.container), containers[0])
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        resources.setdefault(kind, {})["cpu"] = app.pod.cpu
    if app.pod.image is not None:
        container["image"] = app.pod.image
    env = {"CPU_MS": f"{app.pod.cpu_ms:g}", "MAX_CONNECTION_AGE_S": f"{app.pod.max_connection_age_s:g}"}
    kept = [e for e in container.get("env", []) if e.get("name") not in env]
    container["env"] = [*kept, *({"name": k, "value": v} for k, v in env.items())]


DELAY_FIELDS = ("controller_delay_s", "pod_start_s", "readiness_s")


def with_delays(app: App, delays: Mapping[str, tuple[float, ...]]) -> App:
    """`app` with its simulated pod delays (fields of `DELAY_FIELDS`: (low, high) s, or the values
    measured when the app's sim names the field in `sampled_delays`) replaced."""
    unknown = set(delays) - set(DELAY_FIELDS)
    if unknown:
        raise AppError(f"unknown pod delays {sorted(unknown)}; the delays are {', '.join(DELAY_FIELDS)}")
    return attrs.evolve(app, sim={**app.sim, **{k: list(v) for k, v in delays.items()}})


def parse_delay(option: str, text: str) -> tuple[float, float]:
    """`--pod-start-secs 2.5` or `2,4` as (low, high) seconds; anything else is an `AppError`."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or not all(0 <= v < 3600 for v in values) or values[0] > values[1]:
        raise AppError(f"{option} {text!r} is not seconds (2.5) or a range low,high (2,4) from 0 to 3600")
    return values[0], values[1]


def load_all(path: Path = APPS_JSON) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise AppError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise AppError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AppError(f"{path} must hold an object of apps by name")
    return data


def entry_of(data: Mapping[str, Any], name: str, path: Path) -> dict[str, Any]:
    """Entry `name` of apps.json's `data` with what it takes `like` another entry resolved."""
    if name not in data:
        raise AppError(f"--app {name!r} is not in {path}; it has {', '.join(sorted(data))}")
    entry = dict(data[name])
    seen = [name]
    while "like" in entry:
        like = entry.pop("like")
        if like in seen or like not in data:
            raise AppError(
                f"{path}: entry {name!r} is like {like!r}, which is "
                + ("a loop" if like in seen else "not there")
            )
        seen.append(like)
        entry = {**data[like], **entry}
    return entry


def load(name: str, path: Path = APPS_JSON) -> App:
    """The entry `name` of apps.json; paths are relative to the file's directory."""
    data = load_all(path)
    entry = entry_of(data, name, path)
    base = path.resolve().parent
    try:
        cal = entry["calibration"]
        pod = PodSizing(**entry["pod"]) if "pod" in entry else None
        burst = entry.get("burst")
        cluster = entry.get("cluster")
        limit = pod.cpu_cores if pod is not None else float(entry["cpu_limit_cores"])
        return App(
            name=name,
            namespace=entry["namespace"],
            deployment=entry["deployment"],
            selector=entry["selector"],
            container=entry.get("container", ""),
            manifests=tuple(base / m for m in entry["manifests"]),
            hpa=base / entry["hpa"],
            host=entry["host"],
            paths=tuple(entry["paths"]),
            cpu_limit_cores=limit,
            max_replicas=int(entry.get("max_replicas", 10)),
            target=float(entry.get("target", 0.7)),
            calibration=Calibration(
                cal["syscall"],
                float(cal["calls_per_request"]),
                float(cal["cpu_per_request_ms"]),
                cal.get("source", ""),
            ),
            sim=dict(entry.get("sim", {})),
            pod=pod,
            burst=None
            if burst is None
            else BurstPlan(**{**burst, "shapes": tuple(burst.get("shapes", (0.0,)))}),
            cluster=ClusterSettings(**cluster) if cluster is not None else ClusterSettings(),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AppError(f"{path}: entry {name!r} lacks or mistypes {exc}") from None


def write_calibration(name: str, calibration: dict[str, Any], path: Path = APPS_JSON) -> None:
    """Replace entry `name`'s calibration in apps.json, keeping every other byte's meaning."""
    data = load_all(path)
    if name not in data:
        raise AppError(f"--app {name!r} is not in {path}")
    data[name]["calibration"] = calibration
    path.write_text(json.dumps(data, indent=2) + "\n")
