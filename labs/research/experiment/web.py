"""`run.py web`: one run of an application of apps.json under open-loop load (or Locust users), at
fixed replicas or under an autoscaler, recorded in data/web/ (docs/experiments.md, Output).

deploy at the starting replicas with the arm's autoscaler -> the app answers through its host ->
timeline watcher and node CPU on -> (croft scale)
-> warm-up + profile -> export events, timeline, Prometheus series, node CPU -> runs.jsonl -> cool down.

node_cpu.csv is the CPU of the machine this runs on (nodecpu.py): on the test node, the node.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

import apps
import kube
import loadgen
import locust_mode
import nodecpu
import prom
from apps import App
from croft.runs.rundir import RunRecord, append_record, write_prometheus, write_timeline
from profiles import Profile

AUTOSCALERS = {"none": "hpa", "croft": "croft"}


class WebError(RuntimeError):
    """A web run cannot start; the message says what to fix."""


@attrs.frozen
class WebOptions:
    app: App
    prefix: str
    profile: Profile
    data_dir: Path
    scaler: str = "none"
    replicas: int | None = None
    probes: str = "default"
    host: str | None = None
    timeout_s: float = 10.0
    keepalive: bool = True
    users: int | None = None
    spawn_rate: float = 5.0
    kubectl: str = "kubectl"
    kubeconfig: str | None = None
    croft: str = "croft"
    croft_args: tuple[str, ...] = ()
    prometheus: str | None = None
    ready_timeout_s: float = 300.0
    cooldown_s: float = 15.0
    max_connection_age_s: float | None = None
    labels: Mapping[str, Any] = attrs.field(factory=dict)
    """More of the run's load parameters for runs.jsonl (real.py: the boundary's arm)."""

    @property
    def autoscaler(self) -> str:
        """hpa, croft or fixed (`--replicas N` without an autoscaler)."""
        if self.replicas is not None:
            return "fixed"
        return AUTOSCALERS[self.scaler]


def run_name(prefix: str, now: dt.datetime) -> str:
    """`<prefix>-<UTC stamp>` (no extra dash after a prefix that ends in one): unique per second,
    and `compare --prefix <prefix>` finds it."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}{stamp}" if prefix.endswith(("-", "_", ".")) else f"{prefix}-{stamp}"


def croft_executable(name: str) -> str:
    found = shutil.which(name) or (str(Path(sys.executable).parent / name) if name == "croft" else None)
    if not found or not Path(found).exists():
        raise WebError(f"{name} not found: install croft in this environment or pass --croft PATH")
    return found


def say(line: str) -> None:
    print(f"web: {line}", file=sys.stderr, flush=True)


def web(options: WebOptions) -> Path:
    """Run it; returns the run directory. The caller holds the experiment lock."""
    app = options.app
    if options.max_connection_age_s is not None:
        app = apps.with_connection_age(app, options.max_connection_age_s)
    data = options.data_dir / "web"
    run = run_name(options.prefix, dt.datetime.now(dt.UTC))
    run_dir = data / run
    if run_dir.exists():
        raise WebError(f"{run_dir} exists already; wait a second or pick another --prefix")
    k = kube.Kubectl(options.kubectl, options.kubeconfig)
    autoscaler = options.autoscaler
    croft = croft_executable(options.croft) if autoscaler == "croft" else None
    if options.users is not None:
        locust_mode.check(options.users, options.spawn_rate, int(options.profile.duration_s))
    replicas = options.replicas or 1
    say(
        f"{run}: deploying {app.namespace}/{app.deployment} at {replicas} replica(s), autoscaler {autoscaler}"
    )
    kube.prepare(k, app, autoscaler, replicas, options.probes, options.ready_timeout_s)
    host = options.host or app.host
    try:
        waited = loadgen.wait_answering(loadgen.Target(host, app.paths), options.ready_timeout_s)
    except loadgen.NotAnswering as exc:
        raise WebError(str(exc)) from None
    if waited >= 1.0:
        say(f"{host} answered {waited:.1f} s after its pods were Ready")
    watcher = kube.Watcher(k, app, autoscaler)
    watcher.start()
    node = nodecpu.Recorder()
    node.start()
    scaler: kube.CroftScaler | None = None
    run_dir.mkdir(parents=True)
    try:
        with kube.kubectl_proxy(k) if croft is not None else contextlib.nullcontext("") as api:
            if croft is not None:
                scaler = kube.CroftScaler(croft, app, api or "", run_dir / "scaler.log", options.croft_args)
                scaler.start()
            start_ms = int(time.time() * 1000)
            if options.users is not None:
                code = locust_mode.run_locust(
                    run_dir,
                    host,
                    app.paths,
                    options.users,
                    options.spawn_rate,
                    int(options.profile.duration_s),
                )
                end_ms = int(time.time() * 1000)
                say(f"locust exited with {code}: {locust_mode.summary(run_dir)}")
            else:
                target = loadgen.Target(host, app.paths, options.timeout_s, options.keepalive)
                result = loadgen.run_open_loop(options.profile, target, run_dir / "workload.csv")
                start_ms, end_ms = int(result.start_unix_s * 1000), int(result.end_unix_s * 1000)
                say(loadgen.summary(result.rows))
            if scaler is not None:
                stopped = scaler.stop()
                scaler = None
                say(f"croft scale stopped ({stopped})")
    finally:
        if scaler is not None:
            scaler.stop()
        watcher.stop()
        samples = node.stop()
    if samples:
        nodecpu.write(run_dir / nodecpu.FILE, samples)
    window_events = kube.events(k, app, start_ms - 60_000, end_ms + 5_000)
    timeline = watcher.timeline(start_ms, end_ms, window_events)
    write_timeline(run_dir / "timeline.json", timeline)
    if options.prometheus:
        try:
            write_prometheus(
                run_dir / "prometheus.csv", prom.export(options.prometheus, app, start_ms, end_ms)
            )
        except prom.PrometheusError as exc:
            say(f"no prometheus.csv: {exc}")
    else:
        say("no prometheus.csv: pass --prometheus URL to export the series")
    burst = options.profile.burst_s
    load: dict[str, object] = {"mode": "open-loop", "keepalive": options.keepalive, **options.profile.meta()}
    if app.pod is not None:
        load["max_connection_age_s"] = app.pod.max_connection_age_s
    load.update(options.labels)
    if options.users is not None:
        # Closed-loop users follow no profile but its length: no burst to score (compare skips it).
        burst = None
        load = {
            "mode": "locust",
            "users": options.users,
            "spawn_rate": options.spawn_rate,
            "duration_s": int(options.profile.duration_s),
        }
    record = RunRecord(
        run=run,
        app=app.name,
        namespace=app.namespace,
        deployment=app.deployment,
        autoscaler=autoscaler,
        window_start_ms=start_ms,
        window_end_ms=end_ms,
        load=load,
        burst_onset_ms=None if burst is None else start_ms + int(burst[0] * 1000),
        burst_end_ms=None if burst is None else start_ms + int(burst[1] * 1000),
        containers=tuple((p.name, cid) for p in timeline.pods for cid in p.container_ids),
    )
    append_record(data, record)
    say(
        f"{run}: {len(timeline.rescales)} rescales, {len(timeline.pods)} pods; "
        f"cooling down {options.cooldown_s:.0f} s"
    )
    time.sleep(options.cooldown_s)
    return run_dir
