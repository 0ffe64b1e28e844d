"""`run.py calibrate`: the numbers croft scale needs (`--calls-per-request`, `--cpu-per-request-ms`),
measured on this machine from croft's own dataset.

1. The webapp runs in its own cgroup, `croft-calibrate/webapp`, in every mounted hierarchy (cgroup
   v2, v1 or hybrid), with the app's CPU limit as the cgroup's quota, like its pod.
2. `croft run --watch croft-calibrate` records it (root: eBPF).
3. The load generator drives it at each rate of `--rates` for `--secs-per-rate` seconds.
4. For each rate, the polls inside its window (the first `SETTLE_S` left out) give the mean
   `syscall` calls/s of the cgroup's processes and the cgroup's CPU cores; a least-squares line
   through (achieved RPS, calls/s) and (achieved RPS, cores) gives calls per request and CPU per
   request as slopes (the intercepts are what the idle app costs).
5. The result goes into apps.json (`calibration`) and data/calibrate/<stamp>/ keeps the evidence.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

import apps
import loadgen
import profiles

HERE = Path(__file__).resolve().parent
WEBAPP = HERE / "workloads" / "webapp" / "webapp.py"
CGROUP = "croft-calibrate/webapp"
SETTLE_S = 4.0
CFS_PERIOD_US = 100_000


class CalibrateError(RuntimeError):
    """Calibration cannot run or measured nothing; the message says why."""


@attrs.frozen
class RatePoint:
    """One rate's window: offered and achieved RPS, mean calls/s and CPU cores over its polls."""

    target_rps: float
    achieved_rps: float
    calls_per_s: float
    cpu_cores: float
    polls: int


def cgroup_mounts(mounts: str) -> list[tuple[Path, bool]]:
    """(mount point, is_v2) of each cgroup hierarchy in /proc/mounts text, the named ones left out."""
    out = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            out.append((Path(fields[1]), True))
        elif fields[2] == "cgroup" and not any(o.startswith("name=") for o in fields[3].split(",")):
            out.append((Path(fields[1]), False))
    return out


@contextlib.contextmanager
def own_cgroup(cpu_limit_cores: float) -> Iterator[list[Path]]:
    """Create `CGROUP` in every hierarchy (with the CPU quota); remove them afterwards."""
    made: list[Path] = []
    for mount, v2 in cgroup_mounts(Path("/proc/mounts").read_text()):
        parent, path = mount / CGROUP.split("/")[0], mount / CGROUP
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        made.append(path)
        quota = int(cpu_limit_cores * CFS_PERIOD_US)
        with contextlib.suppress(OSError):
            if v2:
                (parent / "cgroup.subtree_control").write_text("+cpu")
                (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
            elif (path / "cpu.cfs_quota_us").exists():
                (path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota))
    if not made:
        raise CalibrateError(
            "no cgroup hierarchy could be written under /sys/fs/cgroup: run calibrate as root"
        )
    try:
        yield made
    finally:
        for path in made:
            for _ in range(50):
                try:
                    path.rmdir()
                    with contextlib.suppress(OSError):
                        path.parent.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)  # its processes are still exiting


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise CalibrateError(f"the webapp did not listen on port {port} within {timeout_s:.0f} s")


def _stop(process: subprocess.Popen[Any], sig: int = signal.SIGINT, timeout_s: float = 20) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def dataset_rows(dataset: Path, cgroup: str) -> list[dict[str, Any]]:
    """Every row of `dataset` (a file or a directory of live files and .zst segments) whose process
    cgroup starts with `/<cgroup>`."""
    files = sorted(dataset.glob("*.jsonl*")) if dataset.is_dir() else [dataset]
    rows = []
    for path in files:
        if path.suffix == ".zst":
            import zstandard

            with path.open("rb") as raw:
                text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw)).read()
        else:
            text = path.read_text()
        for line in text.splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                row = json.loads(line)
                if str(row.get("process", {}).get("cgroup", "")).startswith("/" + cgroup):
                    rows.append(row)
    return rows


def rate_point(
    rows: Sequence[dict[str, Any]], syscall: str, window_ms: tuple[int, int], target: float, achieved: float
) -> RatePoint:
    """The mean calls/s and cgroup CPU cores over the polls inside `window_ms`."""
    start, end = window_ms
    polls: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if start <= row["unix_ms"] <= end:
            polls.setdefault(row["unix_ms"], []).append(row)
    calls, cores = [], []
    for poll_rows in polls.values():
        measured = [r["cgroup_usage"]["cpu_cores"] for r in poll_rows if "cpu_cores" in r["cgroup_usage"]]
        if not measured:
            continue  # the cgroup's CPU was not read this poll: left out, not taken as 0
        calls.append(
            sum(s["rate_per_sec"] for r in poll_rows for s in r.get("syscalls", ()) if s["name"] == syscall)
        )
        cores.append(max(measured))
    if not cores:
        raise CalibrateError(
            f"croft wrote no poll of {CGROUP} with its cgroup CPU between {start} and {end} (unix ms)"
        )
    return RatePoint(
        target,
        round(achieved, 3),
        round(statistics.fmean(calls), 3),
        round(statistics.fmean(cores), 5),
        len(polls),
    )


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ys on xs; two distinct xs at least."""
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, intercept


def calibrate(
    app: apps.App,
    rates: Sequence[float],
    secs_per_rate: float,
    out_dir: Path,
    croft: str,
    cpu_ms: float | None = None,
    write_apps: Path | None = apps.APPS_JSON,
) -> dict[str, Any]:
    """Run the calibration (root); returns the calibration written into apps.json."""
    if os.geteuid() != 0:
        raise CalibrateError("calibrate runs croft run, which needs root (eBPF): run it with sudo")
    if len(set(rates)) < 2:
        raise CalibrateError("--rates needs two different rates at least, e.g. 2,4,8")
    syscall = app.calibration.syscall
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = out_dir / "dataset"
    port = _free_port()
    windows: list[tuple[float, tuple[int, int], float]] = []
    with own_cgroup(app.cpu_limit_cores) as cgroups:
        enter = "; ".join(f"echo $$ > {c / 'cgroup.procs'}" for c in cgroups)
        webapp_argv = [sys.executable, str(WEBAPP), "--host", "127.0.0.1", "--port", str(port)]
        if cpu_ms is not None:
            webapp_argv += ["--cpu-ms", str(cpu_ms)]
        webapp = subprocess.Popen(
            ["sh", "-c", f'{enter}; exec "$@"', "sh", *webapp_argv],
            stdout=(out_dir / "webapp.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        collector = None
        try:
            _wait_port(port)
            collector = subprocess.Popen(
                [croft, "run", "--watch", CGROUP.split("/")[0], "--dataset", str(dataset)],
                stdout=(out_dir / "croft-run.log").open("w"),
                stderr=subprocess.STDOUT,
            )
            time.sleep(6)  # two polls: the webapp's process has a rate from the second on
            if collector.poll() is not None:
                raise CalibrateError(
                    f"croft run exited with {collector.returncode}: see {out_dir / 'croft-run.log'}"
                )
            target = loadgen.Target(
                f"http://127.0.0.1:{port}", app.paths[:1] if app.name == "webapp" else ("/work",)
            )
            for rate in rates:
                profile = profiles.constant(duration_s=secs_per_rate, rps=rate)
                csv_path = out_dir / f"workload-{rate:g}rps.csv"
                result = loadgen.run_open_loop(profile, target, csv_path, quiet=True)
                achieved = statistics.fmean(r.ok for r in result.rows[int(SETTLE_S) :])
                window = (int((result.start_unix_s + SETTLE_S) * 1000), int(result.end_unix_s * 1000))
                windows.append((rate, window, achieved))
                print(
                    f"calibrate: {rate:g} RPS for {secs_per_rate:.0f} s: {loadgen.summary(result.rows)}",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(2.5)  # the last window's final poll
        finally:
            if collector is not None:
                _stop(collector)
            _stop(webapp, signal.SIGTERM)
    rows = dataset_rows(dataset, CGROUP)
    points = [rate_point(rows, syscall, window, rate, achieved) for rate, window, achieved in windows]
    calls_slope, calls_idle = fit([p.achieved_rps for p in points], [p.calls_per_s for p in points])
    cpu_slope, cpu_idle = fit([p.achieved_rps for p in points], [p.cpu_cores for p in points])
    if not calls_slope > 0 or not cpu_slope > 0:
        raise CalibrateError(
            f"the fit is not increasing (calls {calls_slope:.3f}, cpu {cpu_slope:.5f}): see {out_dir}"
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    calibration = {
        "syscall": syscall,
        "calls_per_request": round(calls_slope, 3),
        "cpu_per_request_ms": round(cpu_slope * 1000, 2),
        "source": f"run.py calibrate on {socket.gethostname()} at {stamp}: croft run's dataset, "
        f"{len(points)} rates x {secs_per_rate:.0f} s, least-squares slopes",
        "idle": {"calls_per_s": round(calls_idle, 2), "cpu_cores": round(cpu_idle, 4)},
        "points": [attrs.asdict(p) for p in points],
    }
    if cpu_ms is not None:
        calibration["webapp_cpu_ms"] = cpu_ms
    (out_dir / "calibration.json").write_text(json.dumps(calibration, indent=2) + "\n")
    if write_apps is not None:
        apps.write_calibration(app.name, calibration, write_apps)
    shutil.rmtree(dataset, ignore_errors=True) if dataset.is_dir() and not any(dataset.iterdir()) else None
    return calibration
