"""`run.py answer`: the boundary, simulated, and beside real runs with `--real`.

For an apps.json entry with a `burst` (today's: webapp-node-200m), every arm (the HPA, croft scale on
sendto, croft scale on the offered load, and the oracle) at every shape of the burst (a step, and
ramps to the peak in 15, 30, 60 and 120 s), with the server's connection bound and without it,
`seeds` seeds each, on the settings of the cluster the entry is sized for (`cluster`). With real runs
(`real.py`'s, or older ones whose arms `--prefix` names), the simulator is first fitted on half of
them and checked on the other half (heldout.py), and the simulated grid uses what the fit gave.

It prints, per bound, the boundary table (mean ± sd [95 % CI] per shape, arm and source), the goals
per shape and why any is missed, the lead time of the croft arms' signals per shape (simulated:
croft scale's estimate and the pods' CPU), and writes into `results_dir`:

- boundary.csv: the table of the entry's own bound (boundary.COLUMNS), and boundary-age<S>.csv for
  each other bound;
- boundary.png (and .pdf, .svg): seconds above the objective against the ramp, one line per arm;
- boundary.txt: this report, with the run directories it came from.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import answer
import apps
import boundary
import boundary_figure
import burst_series
import capacity
import heldout
import leadtime
import scoring

LEAD_TIME_SIGNALS = ("croft scale estimate", "prom cpu_cores")


def default_bounds(app: apps.App) -> tuple[float, ...]:
    """The entry's own connection bound first, then none (0), once each."""
    own = app.pod.max_connection_age_s if app.pod is not None else 0.0
    return tuple(dict.fromkeys((float(own), 0.0)))


def csv_name(bound_s: float, own_s: float) -> str:
    return "boundary.csv" if bound_s == own_s else f"boundary-age{bound_s:g}.csv"


def lead_time_text(data_dir: Path, arms: Sequence[str] = ("croft-sendto", "croft-offered")) -> str:
    """Per signal, arm and shape: when croft scale's estimate and the pods' CPU crossed their
    thresholds before p95 crossed the objective (leadtime.THRESHOLD_RULE), mean ± sd over the seeds."""
    runs = [
        r
        for r in burst_series.load_runs(data_dir, data_dir / "no-dataset")
        if r.record.load.get("arm") in arms
    ]
    if not runs:
        return ""
    rows = [r for r in leadtime.lead_times(runs) if r.signal in LEAD_TIME_SIGNALS]
    return leadtime.per_shape_text(leadtime.per_shape(rows, runs))


def dataset_beside(runs_dir: Path) -> Path | None:
    """croft's dataset that real.py (or keeprows.py) left beside a data directory's runs: the
    `nodes` directory next to its `web`; None when there is none."""
    found = runs_dir.parent / "nodes"
    return found if found.is_dir() and any(found.rglob("croft-dataset*")) else None


def real_with_rows(real: Sequence[Path]) -> tuple[list[burst_series.Run], list[str]]:
    """The real runs of `real` that name their arm, each joined to croft's dataset beside it
    (dataset_beside), and a line per directory saying what it held."""
    runs: list[burst_series.Run] = []
    said = []
    for path in real:
        beside = dataset_beside(path)
        mine = [
            r for r in burst_series.load_runs(path, beside or path / "no-dataset") if r.record.load.get("arm")
        ]
        runs += mine
        said.append(
            f"{path}: {len(mine)} runs, croft's dataset {beside}"
            if beside is not None
            else f"{path}: {len(mine)} runs, no croft dataset beside them (nodes/): Prometheus's and "
            "croft scale's signals only"
        )
    return runs, said


def real_lead_times(
    runs: Sequence[burst_series.Run], said: Sequence[str], results_dir: Path | None
) -> list[str]:
    """Per signal, arm, bound and shape, the real runs' lead times (leadtime.THRESHOLD_RULE): every
    signal of croft's dataset beside the runs, of Prometheus and of croft scale's log; report lines,
    and lead-time-real.csv in `results_dir`."""
    if not runs:
        return []
    found = leadtime.per_shape(leadtime.lead_times(runs), runs)
    out = [
        "",
        "lead time (s) of every signal in the real runs, per arm and shape (+: before p95 crossed; "
        "(detected/runs): runs where both the signal and p95 crossed):",
        *said,
        leadtime.per_shape_text(found),
    ]
    leading = leadtime.leading_text(found)
    if leading:
        out += [
            "signals that warned before p95 crossed in every HPA run (no early scale-up hides the burst):",
            leading,
        ]
    if results_dir is not None:
        out.append(f"lead times: {burst_series.write_csv(results_dir / 'lead-time-real.csv', found)}")
    return out


def answer_text(
    app_name: str,
    apps_path: Path,
    seeds: int,
    data_root: Path,
    results_dir: Path | None,
    shapes: Sequence[float] | None = None,
    bounds: Sequence[float] | None = None,
    real: Sequence[Path] = (),
    arms_by_prefix: Mapping[str, str] | None = None,
    tuning: answer.Tuning | None = None,
    slo_ms: float = scoring.SLO_P95_MS,
) -> str:
    """Simulate the boundary (and read the real runs), write the results, return the report."""
    app = apps.load(app_name, apps_path)
    if app.burst is None:
        raise apps.AppError(
            f"app {app_name} has no burst in {apps_path} (base_rps, peak_rps, shapes): pick one that has, "
            "e.g. --app webapp-node-200m"
        )
    plan = app.burst
    shapes = tuple(shapes or plan.shapes)
    bounds = tuple(bounds) if bounds else default_bounds(app)
    tuning = (tuning or answer.Tuning()).over(answer.Tuning.of_cluster(app.cluster))
    out = [
        f"the boundary: {app_name}, {plan.base_rps:g} -> {plan.peak_rps:g} req/s "
        f"({plan.peak_rps / plan.base_rps:g}x) reached in {', '.join(f'{s:g}' for s in shapes)} s and held "
        f"{plan.hold_s:g} s, after {plan.before_s:g} s of base; pods of {app.cpu_limit_cores:g} CPU, "
        f"{app.calibration.cpu_per_request_ms:g} ms of CPU a request, target {app.target:g}; "
        f"simulated with {tuning.text() or 'the defaults'}; {seeds} seeds per cell"
    ]
    real_runs: list[boundary.Scored] = []
    for path in real:
        real_runs += boundary.scored_runs(path, "real", arms_by_prefix, slo_ms)
    if real and not real_runs:
        raise scoring.CompareError(
            f"no real burst run with an arm in {', '.join(map(str, real))}: real.py's runs say theirs; "
            "name older runs' arms with --prefix (the HPA's, croft on sendto's, croft on the offered load's)"
        )
    measured: dict[str, tuple[float, ...]] = {}
    with_rows, said = real_with_rows(real)
    if real_runs:
        fitted, text = heldout.fit_and_check(real_runs, app, tuning, seeds, data_root / "heldout")
        pods = capacity.measure(with_rows, app.cpu_limit_cores, app.calibration.cpu_per_request_ms)
        out += ["", text, pods.text()]
        if fitted is not None:
            tuning = answer.Tuning(accept_cpu_ms=fitted.accept_cpu_ms).over(tuning)
            measured = fitted.delays.sim_overrides()
    sim_dir = data_root / "boundary" / "web"
    shutil.rmtree(sim_dir, ignore_errors=True)
    sim_app = app if not measured else answer.Tuning().app(app, measured)
    boundary.simulate_grid(sim_app, plan, sim_dir, range(1, seeds + 1), shapes, bounds, boundary.ARMS, tuning)
    table = boundary.cells([*real_runs, *boundary.scored_runs(sim_dir, "sim", slo_ms=slo_ms)])
    one_pod_rps = app.cpu_limit_cores / (app.calibration.cpu_per_request_ms / 1000)
    own = default_bounds(app)[0]
    for bound in bounds:
        mine = [c for c in table if c.bound_s == bound]
        out += [
            "",
            f"{boundary_figure.bound_title(bound)}: seconds with p95 > {slo_ms:g} ms, failed + timed-out "
            "requests and replica-seconds, mean ± sd [95 % CI]",
            boundary.table_text(mine),
            "",
            boundary.goals(mine, plan, one_pod_rps),
        ]
        if results_dir is not None:
            out.append(f"table: {boundary.write_csv(results_dir / csv_name(bound, own), mine)}")
    out += real_lead_times(with_rows, said, results_dir)
    leads = lead_time_text(sim_dir)
    if leads:
        out += [
            "",
            "lead time (s) of the simulated croft arms' signals, per shape (+: before p95 crossed):",
            leads,
        ]
    if results_dir is not None:
        title = f"{app_name}: seconds above the 500 ms p95 objective, by how fast the burst comes"
        out.append(f"figure: {boundary_figure.draw(table, results_dir / 'boundary.png', title)}")
    sources = [f"real runs: {', '.join(map(str, real))}"] if real else []
    out += [*sources, f"simulated runs: {sim_dir}"]
    text = "\n".join(out)
    if results_dir is not None:
        (results_dir / "boundary.txt").write_text(text + "\n")
    return text
