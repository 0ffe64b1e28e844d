"""`run.py simulate` and `run.py answer`: croft.sim runs written as run directories, scored by the
same `compare` as real runs.

The answer to docs/experiments.md's question, without a cluster: for the webapp burst at --scale 0.5
and hotel-reservation at --scale 2, both arms (hpa: the Kubernetes HPA; croft: croft scale), N
seeds each, mean ± sd of every compare score, and a PNG of offered load, replicas and p95 over time
per arm.
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


def draw(data_dir: Path, path: Path) -> None:
    """Offered load, replicas and p95 over time, one row per case, both arms, every seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_records(data_dir)
    fig, axes = plt.subplots(len(CASES), 3, figsize=(16, 4.2 * len(CASES)), squeeze=False)
    for row, (app_name, scale) in enumerate(CASES):
        ax_load, ax_rep, ax_p95 = axes[row]
        for record in (r for r in records if r.app == app_name):
            arm = record.autoscaler
            first = record.simulated is not None and record.simulated.get("seed") == 1
            style = {
                "color": COLORS.get(arm, "black"),
                "alpha": 0.9 if first else 0.25,
                "lw": 1.6 if first else 0.8,
            }
            label = arm if first else None
            rows = read_workload(data_dir / record.run / "workload.csv")
            t = [r.second for r in rows]
            if first and arm == "hpa":
                ax_load.plot(t, [r.target_rps for r in rows], color="black", lw=1.2, label="offered")
            ax_load.plot(t, [r.ok for r in rows], **style, label=f"answered OK, {label}" if label else None)
            timeline = read_timeline(data_dir / record.run / "timeline.json")
            steps = scoring.replicas_over(timeline, record.window_start_ms, record.window_end_ms)
            xs: list[float] = []
            ys: list[int] = []
            for at, replicas in steps:
                x = (at - record.window_start_ms) / 1000
                if ys:
                    xs.append(x)
                    ys.append(ys[-1])
                xs.append(x)
                ys.append(replicas)
            xs.append((record.window_end_ms - record.window_start_ms) / 1000)
            ys.append(ys[-1])
            ax_rep.plot(xs, ys, **style, label=label)
            ax_p95.plot(
                t, [r.p95_ms if r.p95_ms is not None else float("nan") for r in rows], **style, label=label
            )
            if (
                record.burst_onset_ms is not None
                and record.burst_end_ms is not None
                and first
                and arm == "hpa"
            ):
                onset = (record.burst_onset_ms - record.window_start_ms) / 1000
                end = (record.burst_end_ms - record.window_start_ms) / 1000
                for ax in axes[row]:
                    ax.axvspan(onset, end, color="red", alpha=0.06)
        ax_p95.axhline(scoring.SLO_P95_MS, color="red", ls="--", lw=1, label="500 ms objective")
        ax_p95.set_yscale("log")
        ax_load.set_title(f"{app_name} --scale {scale:g}: offered and answered load")
        ax_rep.set_title(f"{app_name}: replicas (spec)")
        ax_p95.set_title(f"{app_name}: p95 latency per second")
        ax_load.set_ylabel("requests/s")
        ax_rep.set_ylabel("replicas")
        ax_p95.set_ylabel("ms (log)")
        for ax in axes[row]:
            ax.set_xlabel("s since load start (warm-up included)")
            ax.grid(alpha=0.3)
            ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(
        "croft.sim: Kubernetes HPA vs croft scale on a burst (shaded), bold = seed 1, faint = other seeds"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
