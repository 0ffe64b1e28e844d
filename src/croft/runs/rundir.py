"""The run-directory format shared by real and simulated web runs (docs/experiments.md, Output), so that
`run.py compare` scores both alike. The only module of `croft.sim` that touches files.

    <data>/runs.jsonl            one `RunRecord` per run: app, load, autoscaler, window, containers
    <data>/<run>/workload.csv    one `SecondStats` per second of the load (WORKLOAD_COLUMNS)
    <data>/<run>/timeline.json   a `Timeline`: rescales, replica set changes, pods created/Ready
    <data>/<run>/prometheus.csv  long format: unix_s, series, pod, value (PROMETHEUS_COLUMNS)
    <data>/<run>/scaler.log      croft's estimate and decision every poll (croft arm only)

Times are unix milliseconds in JSON, unix seconds in the CSV files.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from croft.runs.load import SecondStats

WORKLOAD_COLUMNS = (
    "second",
    "unix_s",
    "target_rps",
    "achieved_rps",
    "ok",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "failures",
    "timeouts",
)
PROMETHEUS_COLUMNS = ("unix_s", "series", "pod", "value")
PROMETHEUS_SERIES = (
    "cpu_cores",
    "cpu_throttled_fraction",
    "memory_bytes",
    "network_rx_bytes_s",
    "network_tx_bytes_s",
    "restarts",
    "replicas",
)


class BadRunDir(ValueError):
    """A run directory or runs.jsonl line that is not in this format; the message names the file."""


@attrs.frozen
class Rescale:
    """The Deployment's spec.replicas went `from_replicas` -> `to_replicas` at `at_ms`, asked by
    `source` (hpa, croft, or observed when the cause is unknown)."""

    at_ms: int
    from_replicas: int
    to_replicas: int
    source: str = "observed"
    reason: str = ""


@attrs.frozen
class PodLife:
    """One pod: created, containers started, Ready and deleted (unix ms; None when it did not happen
    inside the window) and its container ids (64 hex)."""

    name: str
    created_ms: int
    started_ms: int | None = None
    ready_ms: int | None = None
    deleted_ms: int | None = None
    container_ids: tuple[str, ...] = ()


@attrs.frozen
class ReplicaSetChange:
    at_ms: int
    name: str
    replicas: int


@attrs.frozen
class Timeline:
    """What the cluster did during a run; `initial_replicas` is spec.replicas at `start_ms`."""

    namespace: str
    deployment: str
    start_ms: int
    end_ms: int
    initial_replicas: int
    rescales: tuple[Rescale, ...] = ()
    replica_sets: tuple[ReplicaSetChange, ...] = ()
    pods: tuple[PodLife, ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()


@attrs.frozen
class RunRecord:
    """One line of runs.jsonl. `load` holds the profile's parameters; `burst_*` the burst's onset and
    end (unix ms) for burst runs; `autoscaler` is hpa, croft or fixed; `simulated` the simulator's
    parameters (None for a real run)."""

    run: str
    app: str
    namespace: str
    deployment: str
    autoscaler: str
    window_start_ms: int
    window_end_ms: int
    load: Mapping[str, Any]
    burst_onset_ms: int | None = None
    burst_end_ms: int | None = None
    containers: tuple[tuple[str, str], ...] = ()
    simulated: Mapping[str, Any] | None = None


def record_to_json(record: RunRecord) -> dict[str, Any]:
    load = dict(record.load)
    if record.burst_onset_ms is not None and record.burst_end_ms is not None:
        load["burst"] = {"onset_ms": record.burst_onset_ms, "end_ms": record.burst_end_ms}
    out: dict[str, Any] = {
        "run": record.run,
        "app": record.app,
        "namespace": record.namespace,
        "deployment": record.deployment,
        "load": load,
        "autoscaler": record.autoscaler,
        "window": {"start_ms": record.window_start_ms, "end_ms": record.window_end_ms},
        "containers": [{"pod": pod, "container_id": cid} for pod, cid in record.containers],
    }
    if record.simulated is not None:
        out["simulated"] = dict(record.simulated)
    return out


def record_from_json(obj: Mapping[str, Any]) -> RunRecord:
    """The inverse of `record_to_json`; a missing or mistyped field raises `BadRunDir`."""
    try:
        load = dict(obj["load"])
        burst = load.pop("burst", None)
        return RunRecord(
            run=str(obj["run"]),
            app=str(obj["app"]),
            namespace=str(obj["namespace"]),
            deployment=str(obj["deployment"]),
            autoscaler=str(obj["autoscaler"]),
            window_start_ms=int(obj["window"]["start_ms"]),
            window_end_ms=int(obj["window"]["end_ms"]),
            load=load,
            burst_onset_ms=None if burst is None else int(burst["onset_ms"]),
            burst_end_ms=None if burst is None else int(burst["end_ms"]),
            containers=tuple((str(c["pod"]), str(c["container_id"])) for c in obj.get("containers", ())),
            simulated=obj.get("simulated"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRunDir(f"not a runs.jsonl record ({type(exc).__name__}: {exc})") from None


def append_record(data_dir: Path, record: RunRecord) -> None:
    """Append `record` as one line to `<data_dir>/runs.jsonl`."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "runs.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(record_to_json(record), separators=(",", ":")) + "\n")


def read_records(data_dir: Path) -> list[RunRecord]:
    """Every record of `<data_dir>/runs.jsonl`, in file order; [] when there is none."""
    path = data_dir / "runs.jsonl"
    if not path.exists():
        return []
    records = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(record_from_json(json.loads(line)))
        except (json.JSONDecodeError, BadRunDir) as exc:
            raise BadRunDir(f"{path}:{line_no}: {exc}") from None
    return records


def _cell(value: float | int | None) -> str:
    return "" if value is None else str(value)


def write_workload(path: Path, rows: Iterable[SecondStats]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(WORKLOAD_COLUMNS)
        for row in rows:
            writer.writerow([_cell(getattr(row, name)) for name in WORKLOAD_COLUMNS])


def read_workload(path: Path) -> list[SecondStats]:
    """workload.csv back as `SecondStats`; a bad file raises `BadRunDir` naming it and the line."""
    rows = []
    with path.open(newline="", encoding="utf-8") as src:
        for line_no, row in enumerate(csv.DictReader(src), start=2):
            try:
                rows.append(
                    SecondStats(
                        second=int(row["second"]),
                        unix_s=float(row["unix_s"]),
                        target_rps=int(row["target_rps"]),
                        achieved_rps=int(row["achieved_rps"]),
                        ok=int(row["ok"]),
                        p50_ms=_maybe(row["p50_ms"]),
                        p95_ms=_maybe(row["p95_ms"]),
                        p99_ms=_maybe(row["p99_ms"]),
                        failures=int(row["failures"]),
                        timeouts=int(row["timeouts"]),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRunDir(f"{path}:{line_no}: not a workload.csv row ({exc})") from None
    return rows


def _maybe(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)


def timeline_to_json(timeline: Timeline) -> dict[str, Any]:
    return {
        "namespace": timeline.namespace,
        "deployment": timeline.deployment,
        "start_ms": timeline.start_ms,
        "end_ms": timeline.end_ms,
        "initial_replicas": timeline.initial_replicas,
        "rescales": [
            {
                "at_ms": r.at_ms,
                "from": r.from_replicas,
                "to": r.to_replicas,
                "source": r.source,
                "reason": r.reason,
            }
            for r in timeline.rescales
        ],
        "replica_sets": [attrs.asdict(c) for c in timeline.replica_sets],
        "pods": [{**attrs.asdict(p), "container_ids": list(p.container_ids)} for p in timeline.pods],
        "events": [dict(e) for e in timeline.events],
    }


def timeline_from_json(obj: Mapping[str, Any]) -> Timeline:
    try:
        return Timeline(
            namespace=str(obj["namespace"]),
            deployment=str(obj["deployment"]),
            start_ms=int(obj["start_ms"]),
            end_ms=int(obj["end_ms"]),
            initial_replicas=int(obj["initial_replicas"]),
            rescales=tuple(
                Rescale(
                    int(r["at_ms"]),
                    int(r["from"]),
                    int(r["to"]),
                    str(r.get("source", "observed")),
                    str(r.get("reason", "")),
                )
                for r in obj.get("rescales", ())
            ),
            replica_sets=tuple(
                ReplicaSetChange(int(c["at_ms"]), str(c["name"]), int(c["replicas"]))
                for c in obj.get("replica_sets", ())
            ),
            pods=tuple(
                PodLife(
                    str(p["name"]),
                    int(p["created_ms"]),
                    _maybe_int(p.get("started_ms")),
                    _maybe_int(p.get("ready_ms")),
                    _maybe_int(p.get("deleted_ms")),
                    tuple(str(c) for c in p.get("container_ids", ())),
                )
                for p in obj.get("pods", ())
            ),
            events=tuple(obj.get("events", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRunDir(f"not a timeline ({type(exc).__name__}: {exc})") from None


def _maybe_int(value: Any) -> int | None:
    return None if value is None else int(value)


def write_timeline(path: Path, timeline: Timeline) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(timeline_to_json(timeline), indent=1) + "\n", encoding="utf-8")


def read_timeline(path: Path) -> Timeline:
    try:
        return timeline_from_json(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, BadRunDir) as exc:
        raise BadRunDir(f"{path}: {exc}") from None


def write_prometheus(path: Path, rows: Iterable[tuple[float, str, str, float]]) -> None:
    """prometheus.csv from (unix_s, series, pod, value) rows; `pod` is "" for Deployment series."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(PROMETHEUS_COLUMNS)
        writer.writerows(rows)


def write_lines(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
