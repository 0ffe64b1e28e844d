"""The boundary's real runs on the single-node cluster of scripts/kube-node.sh, in one command.

    python real.py --out DIR                     # the whole grid of the app's burst: long (see --plan)
    python real.py --out DIR --plan              # what would run, and how long it takes, then stop
    python real.py --out DIR --shapes 0,120 --bounds 10 --repeats 5 --resume

Every (bound, shape, arm) of the grid runs `--repeats` times, interleaved (each repeat runs every
shape, bound and arm in turn, so that drift of the shared machine spreads over them). The grid is
apps.json's entry (`--app`, default webapp-node-200m: 200m pods, 10 ms requests, 12 -> 60 req/s):
its burst's shapes (a step, ramps to the peak in 15, 30, 60 and 120 s), the server's connection
bound and none (`--bounds`), and the arms hpa, croft-sendto and croft-offered. It prints the plan
and its time estimate first. With `--resume` the runs already in OUT (runs.jsonl's `load.arm`,
`ramp_s` and `max_connection_age_s`) count: a grid too long for one sitting is run in parts.

1. `run.py calibrate` for the app's size (root: croft run with eBPF, the webapp in a cgroup with
   the pod's CPU limit), unless `--no-calibrate` or OUT has its calibration already;
2. the node up (`kube-node.sh up`), the collector and webapp images built from this tree, the
   collector deployed (`croft deploy kubernetes`), a Prometheus scraping the kubelet's cAdvisor;
3. each run: `web.web` with the app's burst at the run's shape, its bound, its arm (croft scale gets
   the cluster's --interval and --stabilization-secs, the HPA's own, so that both are sized and
   stabilized alike; the offered-load arm reads `--signal-args`), then back to one pod;
4. the collector's dataset copied beside the runs, the node down (unless `--keep`).

Then `run.py answer --apps OUT/app/apps.json --real OUT/web` (RUNNING.md: the app as it ran, with
the calibration of step 1) fits the simulator on half the runs, checks it on
the other half, and prints and draws the boundary.

Why the node's sizing is what it is: apps.json's README lines (apps.py) and RUNNING.md. The probes
are relaxed (run.py web --probes relaxed; the cluster's `probes`): with the manifest's 1 s timeout a
saturated pod went unready and the HPA, which counts only ready pods, never scaled.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs

import apps
import calibrate
import kube
import web
from croft.runs.rundir import read_records

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SCRIPT = REPO / "scripts" / "kube-node.sh"
COLLECTOR_IMAGE = "localhost/croft-collector:real"
WEBAPP_IMAGE = "localhost/croft-webapp:real"
DATASET_DIR = Path("/var/lib/croft-node")  # the node's collector dataset (kube-node.sh removes it at down)
ARMS = ("hpa", "croft-sendto", "croft-offered")
OFFERED_ARGS = "--signal tcp_data_segments --calls-per-request 1"
RUN_OVERHEAD_S = 25.0
"""A run's time beyond its profile: the 15 s cool-down, deploying and waiting for Ready, the exports
and the settle back to one pod (the node's runs of 2026-12-03: 4 runs of a 270 s profile took
1435 s with the node's start, its images and the collector's deployment)."""
SETUP_S = 300.0
"""The node up, both images built and the collector deployed, with the node's binaries built
already (/var/cache/croft-k8s; a fresh machine adds about 8 minutes)."""
CALIBRATE_RATES = (2.0, 4.0, 8.0)
CALIBRATE_SECS = 40.0


def script(*args: str, timeout: float = 1800) -> str:
    out = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"kube-node.sh {' '.join(args)} failed: {out.stderr.strip()[-2000:]}")
    return out.stdout


@attrs.frozen
class Planned:
    """One run of the grid: its repeat (1..N), shape (s to the peak), bound (s; 0: none) and arm."""

    repeat: int
    shape_s: float
    bound_s: float
    arm: str

    @property
    def cell(self) -> tuple[float, float, str]:
        return (self.bound_s, self.shape_s, self.arm)


def grid(
    shapes: Sequence[float], bounds: Sequence[float], arms: Sequence[str], repeats: int
) -> list[Planned]:
    """Every run, interleaved: repeat by repeat, each shape, each bound, each arm."""
    return [
        Planned(repeat, shape, bound, arm)
        for repeat in range(1, repeats + 1)
        for shape in shapes
        for bound in bounds
        for arm in arms
    ]


def done(out: Path) -> collections.Counter[tuple[float, float, str]]:
    """How many runs of each (bound, shape, arm) OUT holds already (runs.jsonl; none without it)."""
    counts: collections.Counter[tuple[float, float, str]] = collections.Counter()
    if not (out / "web" / "runs.jsonl").exists():
        return counts
    for record in read_records(out / "web"):
        arm = record.load.get("arm")
        if isinstance(arm, str):
            shape = float(record.load.get("ramp_s", 0.0))
            counts[(float(record.load.get("max_connection_age_s", 0.0)), shape, arm)] += 1
    return counts


def remaining(
    planned: Sequence[Planned], have: collections.Counter[tuple[float, float, str]]
) -> list[Planned]:
    """The runs of `planned` still to run: a cell's first `have[cell]` repeats are done."""
    return [p for p in planned if p.repeat > have[p.cell]]


def run_seconds(plan: apps.BurstPlan, shape: float) -> float:
    """One run's expected wall time: its profile (warm-up included) and `RUN_OVERHEAD_S`."""
    return plan.profile(shape).duration_s + RUN_OVERHEAD_S


def estimate_s(todo: Sequence[Planned], plan: apps.BurstPlan, calibrating: bool) -> float:
    """The whole command's expected wall time: the runs, the node's setup and the calibration."""
    calibration = len(CALIBRATE_RATES) * (CALIBRATE_SECS + 5) + 20 if calibrating else 0.0
    runs = sum(run_seconds(plan, p.shape_s) for p in todo)
    return (SETUP_S if todo else 0.0) + calibration + runs


def plan_text(app: apps.App, todo: Sequence[Planned], planned: Sequence[Planned], calibrating: bool) -> str:
    """The plan, per cell group, and the time estimate, for the top of the output."""
    assert app.burst is not None
    plan = app.burst
    lines = [
        f"real.py: {app.name}, {plan.base_rps:g} -> {plan.peak_rps:g} req/s, {len(planned)} runs planned, "
        f"{len(todo)} to run ({len(planned) - len(todo)} in OUT already)"
    ]
    by_shape: dict[float, list[Planned]] = {}
    for p in todo:
        by_shape.setdefault(p.shape_s, []).append(p)
    for shape, runs in sorted(by_shape.items()):
        cells = sorted({(p.bound_s, p.arm) for p in runs})
        lines.append(
            f"  shape {shape:g} s: {len(runs)} runs of {run_seconds(plan, shape) / 60:.1f} min "
            f"({len(cells)} bound x arm cells), {len(runs) * run_seconds(plan, shape) / 3600:.2f} h"
        )
    total = estimate_s(todo, plan, calibrating)
    lines.append(
        f"  estimate: {total / 3600:.2f} h of node time ({total:.0f} s: setup {SETUP_S:.0f} s"
        + (", calibration" if calibrating else "")
        + f", each run its profile + {RUN_OVERHEAD_S:.0f} s)"
    )
    return "\n".join(lines)


def node_app(out: Path, source: apps.App, namespace: str, calibration: dict[str, object] | None) -> apps.App:
    """The run's app: apps.json's entry `source.name` in `namespace` with the local webapp image (and
    this machine's calibration), written as OUT/app/apps.json, so that the runs say what ran."""
    data = apps.load_all(apps.APPS_JSON)
    entry = apps.entry_of(data, source.name, apps.APPS_JSON)
    entry["namespace"] = namespace
    entry["host"] = entry["host"].replace("croft-exp", namespace)
    entry["manifests"] = [str(HERE / m) for m in entry["manifests"]]
    entry["hpa"] = str(HERE / entry["hpa"])
    entry["pod"] = {**entry["pod"], "image": WEBAPP_IMAGE}
    if calibration is not None:
        entry["calibration"] = calibration
    path = out / "app" / "apps.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({source.name: entry}, indent=2) + "\n")
    return apps.load(source.name, path)


@contextmanager
def cadvisor_prometheus(directory: Path, kubelet: str, token: str, port: int = 9390) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("no prometheus binary: `make test` installs Debian's as root")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: cadvisor\n"
        "    scheme: https\n"
        "    metrics_path: /metrics/cadvisor\n"
        f"    authorization: {{credentials: {token}}}\n"
        "    tls_config: {insecure_skip_verify: true}\n"
        f"    static_configs: [{{targets: ['{kubelet}']}}]\n"
    )
    with (directory / "prometheus.log").open("wb") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=directory,
        )  # fmt: skip
        try:
            time.sleep(3)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def wait_for(what: str, probe: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(1)


def settle(k: kube.Kubectl, app: apps.App) -> None:
    """Back to one pod, the others gone, before the next run: the next run's baseline must not see
    the last one's pods draining their backlog (the harness starts a run while they terminate)."""
    k.run("-n", app.namespace, "delete", "hpa", "--all", check=False)
    k.run("-n", app.namespace, "scale", f"deployment/{app.deployment}", "--replicas=1")

    def one_pod() -> bool:
        names = k.run("-n", app.namespace, "get", "pods", "-l", app.selector, "-o", "name", check=False)
        return len(names.split()) == 1

    wait_for("one webapp pod left", one_pod, 300)


def croft_args(app: apps.App, arm: str, offered_args: str) -> tuple[str, ...]:
    """croft scale's options for `arm`: the cluster's --interval and --stabilization-secs (the
    HPA's scale-down stabilization, so both arms give replicas back alike), and the offered-load
    signal for croft-offered."""
    cluster = app.cluster
    out: tuple[str, ...] = ("--interval", f"{cluster.scaler_interval_s or 2:g}")
    if cluster.scaler_stabilization_s is not None:
        out += ("--stabilization-secs", f"{cluster.scaler_stabilization_s:g}")
    if arm == "croft-offered":
        out += tuple(offered_args.split())
    return out


def _seconds(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 0:
        raise SystemExit(f"real.py: {option} {text!r} is not a comma-separated list of seconds, e.g. 0,120")
    return values


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    top.add_argument("--out", type=Path, required=True, help="run directories go to OUT/web")
    top.add_argument("--app", default="webapp-node-200m", help="an entry of apps.json with a burst")
    top.add_argument("--shapes", default=None, help="seconds to the peak, e.g. 0,120 (default the app's)")
    top.add_argument(
        "--bounds", default=None, help="connection age bounds, s, e.g. 10,0 (default the app's and 0)"
    )
    top.add_argument("--arms", default=",".join(ARMS), help="of " + ", ".join(ARMS))
    top.add_argument("--repeats", type=int, default=5, help="runs per (bound, shape, arm)")
    top.add_argument("--resume", action="store_true", help="count the runs OUT holds already")
    top.add_argument("--plan", action="store_true", help="print the plan and its estimate, run nothing")
    top.add_argument("--no-calibrate", action="store_true", help="keep apps.json's calibration")
    top.add_argument("--signal-args", default=OFFERED_ARGS, help="croft scale options of croft-offered")
    top.add_argument("--probes", default=None, choices=("default", "relaxed"), help="default: the app's")
    top.add_argument(
        "--no-keepalive",
        action="store_true",
        help="the load generator opens a connection per request (kube-proxy then balances requests, "
        "not connections)",
    )
    top.add_argument("--namespace", default="croft-exp")
    top.add_argument("--keep", action="store_true", help="leave the node running")
    return top


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    app = apps.load(args.app)
    if app.burst is None or app.pod is None:
        raise SystemExit(f"real.py: --app {args.app} has no burst or pod sizing in apps.json")
    arms = [a for a in args.arms.split(",") if a]
    if not arms or set(arms) - set(ARMS):
        raise SystemExit(f"real.py: --arms {args.arms!r}: choose among {', '.join(ARMS)}")
    shapes = _seconds(args.shapes, "--shapes") if args.shapes else app.burst.shapes
    bounds = (
        _seconds(args.bounds, "--bounds")
        if args.bounds
        else tuple(dict.fromkeys((app.pod.max_connection_age_s, 0.0)))
    )
    out: Path = args.out.resolve()
    planned = grid(shapes, bounds, arms, args.repeats)
    todo = remaining(planned, done(out) if args.resume else collections.Counter())
    calibration_file = out / "calibrate" / "calibration.json"
    calibrating = not args.no_calibrate and not calibration_file.exists()
    print(plan_text(app, todo, planned, calibrating), flush=True)
    if args.plan or not todo:
        return
    out.mkdir(parents=True, exist_ok=True)
    croft = str(Path(sys.executable).parent / "croft")
    started = time.time()
    if calibrating:
        calibrate.calibrate(
            app, CALIBRATE_RATES, CALIBRATE_SECS, out / "calibrate", croft, app.pod.cpu_ms, None
        )
    found = json.loads(calibration_file.read_text()) if calibration_file.exists() else None
    values = dict(line.split("=", 1) for line in script("up", timeout=900).splitlines() if "=" in line)
    try:
        script("image-build", COLLECTOR_IMAGE, str(REPO), str(REPO / "deploy" / "docker" / "Dockerfile"))
        context = HERE / "workloads" / "webapp"
        script("image-build", WEBAPP_IMAGE, str(context), str(context / "Dockerfile"))
        kubeconfig = values["KUBECONFIG"]
        kubectl = str(Path(values["CROFT_K8S_BIN"]) / "kubectl")
        k = kube.Kubectl(kubectl, kubeconfig)
        subprocess.run(
            [croft, "deploy", "kubernetes", "--image", COLLECTOR_IMAGE, "--kernel-5-11-or-later",
             "--dataset-dir", str(DATASET_DIR), "--kubeconfig", kubeconfig, "--timeout", "300"],
            check=True, timeout=400,
        )  # fmt: skip
        run_app = node_app(out, app, args.namespace, found)
        kube.apply(k, run_app, run_app.manifests)
        service = k.run(
            "-n", args.namespace, "get", "service", run_app.deployment, "-o", "jsonpath={.spec.clusterIP}"
        ).strip()
        kubelet = values["CROFT_NODE_KUBELET"].removeprefix("https://")
        with cadvisor_prometheus(out / "prometheus", kubelet, values["CROFT_K8S_TOKEN"]) as prometheus:
            for i, run in enumerate(todo, 1):
                assert run_app.burst is not None
                options = web.WebOptions(
                    app=run_app,
                    prefix=f"real-{run.arm}-age{run.bound_s:g}-ramp{run.shape_s:g}-r{run.repeat}-",
                    profile=run_app.burst.profile(run.shape_s),
                    data_dir=out,
                    scaler="none" if run.arm == "hpa" else "croft",
                    host=f"http://{service}:8080",
                    kubectl=kubectl,
                    kubeconfig=kubeconfig,
                    croft=croft,
                    croft_args=croft_args(run_app, run.arm, args.signal_args),
                    prometheus=prometheus,
                    ready_timeout_s=300,
                    probes=args.probes or run_app.cluster.probes,
                    keepalive=not args.no_keepalive,
                    max_connection_age_s=run.bound_s,
                    labels={"arm": run.arm},
                )
                left = estimate_s(todo[i - 1 :], run_app.burst, False) - SETUP_S
                print(
                    f"[{time.time() - started:6.0f} s] run {i} of {len(todo)}: {run.arm}, "
                    f"shape {run.shape_s:g} s, bound {run.bound_s:g} s, repeat {run.repeat} "
                    f"(about {left / 60:.0f} min left)",
                    flush=True,
                )
                run_dir = web.web(options)
                print(f"[{time.time() - started:6.0f} s] {run_dir}", flush=True)
                settle(k, run_app)
        dataset = out / "nodes" / values.get("CROFT_NODE_NAME", "node")
        dataset.mkdir(parents=True, exist_ok=True)
        for f in DATASET_DIR.glob("croft-dataset*"):
            shutil.copy2(f, dataset / f.name)
    finally:
        if not args.keep:
            script("down", timeout=300)
    print(
        f"done in {time.time() - started:.0f} s: {out}; then: "
        f"run.py answer --app {app.name} --apps {out / 'app' / 'apps.json'} --real {out / 'web'}"
    )


def stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(143)  # unwinds through main's finally: the node goes down, Prometheus stops


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
