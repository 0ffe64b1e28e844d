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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

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
            **extra,
        )


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


def load(name: str, path: Path = APPS_JSON) -> App:
    """The entry `name` of apps.json; paths are relative to the file's directory."""
    data = load_all(path)
    if name not in data:
        raise AppError(f"--app {name!r} is not in {path}; it has {', '.join(sorted(data))}")
    entry = data[name]
    base = path.resolve().parent
    try:
        cal = entry["calibration"]
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
            cpu_limit_cores=float(entry["cpu_limit_cores"]),
            max_replicas=int(entry.get("max_replicas", 10)),
            target=float(entry.get("target", 0.7)),
            calibration=Calibration(
                cal["syscall"],
                float(cal["calls_per_request"]),
                float(cal["cpu_per_request_ms"]),
                cal.get("source", ""),
            ),
            sim=dict(entry.get("sim", {})),
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
