"""`run.py simulate` and `run.py answer`: croft.sim runs written as run directories, scored by the
same `compare` as real runs.

The answer to docs/experiments.md's question, without a cluster: for the webapp burst at --scale 0.5
and hotel-reservation at --scale 2, both arms (hpa: the Kubernetes HPA; croft: croft scale), N
seeds each, mean ± sd of every compare score, and a figure (PNG, PDF and SVG) of offered and answered
load, replicas and p95 over time per arm, mean ± sd over the seeds.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import apps
import profiles
import scoring
from croft.runs.rundir import read_records, read_timeline, read_workload
from croft.sim import SimOptions, simulate, write_run

ARM_OF_SCALER = {"none": "hpa", "croft": "croft", "fixed": "fixed"}
CASES = (("webapp", 0.5), ("hotel-reservation", 2.0))
COLORS = {"hpa": "tab:blue", "croft": "tab:orange", "fixed": "tab:gray"}


def simulate_runs(
    app: apps.App, profile: profiles.Profile, arm: str, seeds: Sequence[int], prefix: str, data_dir: Path
) -> list[str]:
    """Simulate one arm for every seed into `data_dir` (runs `<prefix><seed>`); returns the names."""
    names = []
    for seed in seeds:
        run = f"{prefix}{seed}"
        options = SimOptions(arm=arm, seed=seed)  # type: ignore[arg-type]
        result = simulate(run, app.sim_app(), profile, options, profile.meta(), profile.burst_s)
        write_run(data_dir, result)
        names.append(run)
    return names


def answer(seeds: int, data_root: Path, plot: Path | None, apps_path: Path = apps.APPS_JSON) -> str:
    """Simulate both cases and both arms; returns the printed report (tables per case)."""
    out = []
    data_dir = data_root / "web"
    shutil.rmtree(data_dir, ignore_errors=True)
    all_scores: list[scoring.Score] = []
    for app_name, scale in CASES:
        app = apps.load(app_name, apps_path)
        profile = profiles.with_warmup(profiles.burst(scale))
        prefixes = []
        for arm in ("hpa", "croft"):
            prefix = f"sim-{app_name}-{arm}-"
            simulate_runs(app, profile, arm, range(1, seeds + 1), prefix, data_dir)
            prefixes.append(prefix)
        scores = scoring.score_prefixes(data_dir, prefixes)
        all_scores += scores
        cal = app.calibration
        out.append(
            f"{app_name}, burst --scale {scale:g} ({profile.rate_at(0):g} -> "
            f"{profile.rate_at(profile.burst_s[0] if profile.burst_s else 0):g} RPS), {seeds} seeds per arm; "
            f"{cal.cpu_per_request_ms:g} ms CPU and {cal.calls_per_request:g} {cal.syscall} per request, "
            f"{app.cpu_limit_cores:g} CPU per pod"
        )
        out.append(scoring.table(scores, prefixes, names=("hpa", "croft")))
        out.append("")
    scoring.write_csv(data_dir / "compare.csv", all_scores)
    if plot is not None:
        draw(data_dir, plot)
        out.append(f"plot: {plot}")
    out.append(f"per-run scores: {data_dir / 'compare.csv'}")
    return "\n".join(out)


CASE_TITLES = {
    "webapp": "Web app, burst at half scale",
    "hotel-reservation": "Hotel reservation, burst at double scale",
}
ARM_NAMES = {"hpa": "Kubernetes HPA", "croft": "croft scale", "fixed": "fixed replicas"}
CLIENT_TIMEOUT_MS = 10_000.0  # the load generator's timeout: a p95 at it means requests timed out


def _step_at(steps: Sequence[tuple[float, int]], t: float) -> int:
    """The replicas of step function `steps` ((x s, replicas), sorted) at `t` s."""
    value = steps[0][1]
    for x, replicas in steps:
        if x > t:
            break
        value = replicas
    return value


def _mean_sd(series: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    """Per index, the mean and sample sd of the finite values across `series` (NaN where none)."""
    import math
    import statistics

    length = min(len(s) for s in series)
    means, sds = [], []
    for i in range(length):
        values = [s[i] for s in series if not math.isnan(s[i])]
        means.append(statistics.fmean(values) if values else float("nan"))
        sds.append(statistics.stdev(values) if len(values) > 1 else 0.0)
    return means, sds


def draw(data_dir: Path, path: Path) -> None:
    """Offered and answered load, replicas and p95 over time, one row per case: for each arm the
    mean over its seeds with a band of ± one sd. Written as `path` (PNG) and beside it as PDF and
    SVG, for print."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    plt.rcParams.update(
        {
            "font.size": 12,
            "axes.titlesize": 13,
            "axes.labelsize": 12,
            "legend.fontsize": 10,
            "svg.fonttype": "none",
        }
    )
    records = read_records(data_dir)
    fig, axes = plt.subplots(len(CASES), 3, figsize=(17, 5.0 * len(CASES)), squeeze=False)
    seeds_seen = 0
    for row, (app_name, _scale) in enumerate(CASES):
        ax_load, ax_rep, ax_p95 = axes[row]
        burst: tuple[float, float] | None = None
        for arm in ("hpa", "croft", "fixed"):
            runs = [r for r in records if r.app == app_name and r.autoscaler == arm]
            if not runs:
                continue
            seeds_seen = max(seeds_seen, len(runs))
            ok, p95, replicas, offered = [], [], [], []
            for record in runs:
                rows = read_workload(data_dir / record.run / "workload.csv")
                ok.append([float(r.ok) for r in rows])
                p95.append([r.p95_ms if r.p95_ms is not None else float("nan") for r in rows])
                offered = [float(r.target_rps) for r in rows]
                timeline = read_timeline(data_dir / record.run / "timeline.json")
                steps = [
                    ((at - record.window_start_ms) / 1000, n)
                    for at, n in scoring.replicas_over(timeline, record.window_start_ms, record.window_end_ms)
                ]
                span = int((record.window_end_ms - record.window_start_ms) / 1000)
                replicas.append([float(_step_at(steps, t)) for t in range(span + 1)])
                if record.burst_onset_ms is not None and record.burst_end_ms is not None:
                    burst = (
                        (record.burst_onset_ms - record.window_start_ms) / 1000,
                        (record.burst_end_ms - record.window_start_ms) / 1000,
                    )
            color = COLORS.get(arm, "black")
            label = f"{ARM_NAMES.get(arm, arm)}, mean ± sd"
            for ax, series, floor in ((ax_load, ok, 0.0), (ax_rep, replicas, 0.0), (ax_p95, p95, 5.0)):
                mean, sd = _mean_sd(series)
                t = list(range(len(mean)))
                ax.plot(t, mean, color=color, lw=1.8, label=label)
                ax.fill_between(
                    t,
                    [max(m - d, floor) for m, d in zip(mean, sd, strict=True)],
                    [m + d for m, d in zip(mean, sd, strict=True)],
                    color=color,
                    alpha=0.2,
                    lw=0,
                )
            if arm == "hpa":
                ax_load.plot(
                    range(len(offered)), offered, color="black", lw=1.2, ls="--", label="offered load"
                )
        if burst is not None:
            for ax in axes[row]:
                ax.axvspan(*burst, color="red", alpha=0.07)
        ax_p95.axhline(scoring.SLO_P95_MS, color="red", ls="--", lw=1, label="500 ms objective")
        ax_p95.axhline(CLIENT_TIMEOUT_MS, color="gray", ls=":", lw=1.2)
        ax_p95.annotate(
            "10 s client timeout: the ceiling",
            (0.99, CLIENT_TIMEOUT_MS),
            xycoords=("axes fraction", "data"),
            xytext=(0, 4),
            ha="right",
            textcoords="offset points",
            fontsize=10,
            color="dimgray",
        )
        ax_p95.set_yscale("log")
        ax_p95.set_ylim(bottom=5.0)
        title = CASE_TITLES.get(app_name, app_name)
        ax_load.set_title(f"{title}:\noffered and answered load")
        ax_rep.set_title(f"{title}:\nreplicas asked for")
        ax_p95.set_title(f"{title}:\n95th percentile latency, per second")
        ax_load.set_ylabel("requests per second")
        ax_rep.set_ylabel("replicas")
        ax_p95.set_ylabel("latency, ms (log scale)")
        for ax in axes[row]:
            ax.set_xlabel("seconds since the load started (warm-up included)")
            ax.grid(alpha=0.3)
            handles, labels = ax.get_legend_handles_labels()
            handles.append(Patch(color="red", alpha=0.15))
            labels.append("burst")
            ax.legend(handles, labels, loc="upper left", framealpha=0.9)
    seeds = f"{seeds_seen} seeds per arm" if seeds_seen else "no runs"
    fig.suptitle(
        f"Simulated burst: the Kubernetes HPA against croft scale ({seeds}; lines: mean, bands: ± one sd)"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    for vector in (".pdf", ".svg"):
        fig.savefig(path.with_suffix(vector))
    plt.close(fig)
