"""croft.sim: a discrete-time model of a Deployment under open-loop load, scaled by the Kubernetes
HPA (a faithful model of its algorithm) or by croft scale (the real decision function of
`croft.domain.scaling.decision`), written in the run-directory format of real runs.

Notebook use::

    from croft.sim import SimApp, SimOptions, simulate, write_run
    app = SimApp("webapp", "croft-exp", "webapp", cpu_limit_cores=1.0, cpu_per_request_ms=50,
                 calls_per_request=2.0)
    result = simulate("sim-1", app, profile, SimOptions(arm="croft", seed=1))
    write_run(Path("data/sim/web"), result)

`profile` is anything with `duration_s` and `rate_at(t_s)` (labs/research/experiment/profiles.py).
"""

from __future__ import annotations

from pathlib import Path

from croft.runs import rundir
from croft.sim.cluster import CONNECTIONS, SERVICES, Connections, Service, SimApp
from croft.sim.engine import ARMS, SIGNALS, Arm, OfferedLoad, Signal, SimOptions, SimResult, simulate
from croft.sim.hpa import HpaConfig

__all__ = [
    "ARMS",
    "CONNECTIONS",
    "SERVICES",
    "SIGNALS",
    "Arm",
    "Connections",
    "HpaConfig",
    "OfferedLoad",
    "Service",
    "Signal",
    "SimApp",
    "SimOptions",
    "SimResult",
    "simulate",
    "write_run",
]


def write_run(data_dir: Path, result: SimResult) -> Path:
    """Write `result` as `<data_dir>/<run>/` plus its runs.jsonl line; returns the run directory."""
    run_dir = data_dir / result.record.run
    rundir.write_workload(run_dir / "workload.csv", result.rows)
    rundir.write_timeline(run_dir / "timeline.json", result.timeline)
    rundir.write_prometheus(run_dir / "prometheus.csv", result.prometheus)
    if result.scaler_log:
        rundir.write_lines(run_dir / "scaler.log", result.scaler_log)
    rundir.append_record(data_dir, result.record)
    return run_dir
