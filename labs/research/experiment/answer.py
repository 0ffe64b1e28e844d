"""`run.py simulate` and `run.py answer`: croft.sim runs written as run directories, scored by the
same `compare` as real runs.

The answer to docs/experiments.md's question, without a cluster: for the webapp burst at --scale 0.5
and hotel-reservation at --scale 2, three arms (hpa: the Kubernetes HPA; croft: croft scale reading
sendto, the replies; croft-offered: croft scale reading the offered load and the queued requests,
sized in one step), N seeds each, mean ± sd of every compare score, each labelled "simulated", the
ratios to the HPA with the goals for croft against the HPA, and a figure (PNG, PDF and SVG) of
offered and answered load, replicas and p95 over time per arm, mean ± sd over the seeds.
`run.py answer --real` (versus.py) sets real runs beside the simulator's runs of the same
configuration.

The scores are the spec's window (the burst profile ends 180 s after the burst). Both arms keep
their replicas for a 300 s scale-down window after the burst, so the scale-down comes after that
window ends. The figure's runs therefore go on `FIGURE_TAIL_S` longer at the base rate (the same
seeds: croft.sim is deterministic, so their first 500 s are the scored runs' to the request; in the
last 10 s, the client's timeout, a pod shares its CPU with the requests sent after 510 s), and
the replicas panel and the report give each arm's replica-seconds to the end of the figure and the
time it was back at its replicas before the burst.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import apps
import profiles
import scoring
from croft.runs.rundir import RunRecord, read_records, read_timeline, read_workload
from croft.sim import Connections, Service, SimApp, SimOptions, simulate, write_run

ARM_OF_SCALER = {"none": "hpa", "croft": "croft", "fixed": "fixed"}
CASES = (("webapp", 0.5), ("hotel-reservation", 2.0))
COLORS = {"hpa": "tab:blue", "croft": "tab:orange", "croft-offered": "tab:green", "fixed": "tab:gray"}


@attrs.frozen
class Tuning:
    """What run.py's options change in the simulator beyond apps.json, to match a real node: the pod
    delays (SimApp fields: (low, high) s), the share of its CPU limit a pod really gets (a loaded
    node gives less) and the pods' CPU request (the HPA divides by it), croft scale's --drain-secs
    and --interval, the HPA's sync period, metrics resolution and scale-down stabilization (s), and
    how requests reach pods (`SimOptions.connections`) and how a pod serves them (`SimApp.service`,
    `.accept_cpu_ms`), and how often the harness reads spec.replicas (`SimOptions.record_poll_s`).
    None: the default."""

    delays: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)
    cpu_share: float | None = None
    cpu_request_cores: float | None = None
    drain_s: float | None = None
    scaler_interval_s: float | None = None
    hpa_sync_s: float | None = None
    metric_resolution_s: float | None = None
    hpa_down_stabilization_s: float | None = None
    connections: Connections | None = None
    service: Service | None = None
    accept_cpu_ms: float | None = None
    record_poll_s: float | None = None
    scaler_stabilization_s: float | None = None
    max_connection_age_s: float | None = None

    @classmethod
    def of_cluster(cls, cluster: apps.ClusterSettings) -> Tuning:
        """The settings of the cluster an apps.json entry runs on (its `cluster`)."""
        return cls(
            scaler_interval_s=cluster.scaler_interval_s,
            scaler_stabilization_s=cluster.scaler_stabilization_s,
            hpa_sync_s=cluster.hpa_sync_s,
            hpa_down_stabilization_s=cluster.hpa_down_stabilization_s,
            metric_resolution_s=cluster.metric_resolution_s,
        )

    def over(self, base: Tuning) -> Tuning:
        """`base` with every setting this one gives (not None) taken from this one; delays merged."""
        given = {
            f.name: getattr(self, f.name)
            for f in attrs.fields(Tuning)
            if f.name != "delays" and getattr(self, f.name) is not None
        }
        return attrs.evolve(base, delays={**base.delays, **self.delays}, **given)

    def app(self, app: apps.App, measured: Mapping[str, tuple[float, ...]] | None = None) -> apps.App:
        """`app` with the measured delays (drawn from the values measured), then the given ones (a
        range, drawn uniformly), and the CPU share and request and how a pod serves."""
        measured = dict(measured or {})
        app = apps.with_delays(app, {**measured, **self.delays})
        if self.max_connection_age_s is not None:
            app = apps.with_connection_age(app, self.max_connection_age_s)
        sampled = sorted(set(measured) - set(self.delays))
        extra: dict[str, Any] = {
            "cpu_share": self.cpu_share,
            "cpu_request_cores": self.cpu_request_cores,
            "service": self.service,
            "accept_cpu_ms": self.accept_cpu_ms,
        }
        extra["sampled_delays"] = sampled or None
        return attrs.evolve(app, sim={**app.sim, **{k: v for k, v in extra.items() if v is not None}})

    def options(self, options: SimOptions) -> SimOptions:
        changes: dict[str, Any] = {}
        hpa: dict[str, Any] = {}
        if self.drain_s is not None:
            changes["drain_s"] = self.drain_s
        if self.scaler_interval_s is not None:
            changes["scaler_interval_s"] = self.scaler_interval_s
        if self.scaler_stabilization_s is not None:
            changes["stabilization_s"] = self.scaler_stabilization_s
        if self.metric_resolution_s is not None:
            changes["metric_resolution_s"] = self.metric_resolution_s
        if self.hpa_sync_s is not None:
            hpa["sync_period_s"] = self.hpa_sync_s
        if self.hpa_down_stabilization_s is not None:
            hpa["down_stabilization_s"] = self.hpa_down_stabilization_s
        if self.connections is not None:
            changes["connections"] = self.connections
        if self.record_poll_s is not None:
            changes["record_poll_s"] = self.record_poll_s
        if hpa:
            changes["hpa"] = attrs.evolve(options.hpa, **hpa)
        return attrs.evolve(options, **changes)

    def text(self) -> str:
        """The changed settings, for the report ('' when none)."""
        parts = [
            f"{name} {value:g}"
            for name, value in (
                ("share of the CPU limit a pod gets", self.cpu_share),
                ("CPU request cores", self.cpu_request_cores),
                ("croft scale --interval", self.scaler_interval_s),
                ("croft scale --stabilization-secs", self.scaler_stabilization_s),
                ("HPA sync s", self.hpa_sync_s),
                ("metrics resolution s", self.metric_resolution_s),
                ("HPA scale-down stabilization s", self.hpa_down_stabilization_s),
            )
            if value is not None
        ]
        if self.connections is not None:
            parts.append(f"connections {self.connections}")
        if self.record_poll_s:
            parts.append(f"rescales recorded at polls every {self.record_poll_s:g} s")
        if self.service is not None:
            parts.append(f"service {self.service}")
        if self.accept_cpu_ms is not None:
            parts.append(f"accept CPU ms {self.accept_cpu_ms:g}")
        if self.max_connection_age_s is not None:
            parts.append(f"connections closed at {self.max_connection_age_s:g} s of age (0: never)")
        return "; ".join(parts)


@attrs.frozen
class SimArm:
    """One simulated arm: `key` names its runs (`sim-<app>-<key>-<seed>`) and its colour, `options`
    everything but the seed."""

    key: str
    label: str
    options: SimOptions


def sim_arms(tuning: Tuning | None = None) -> tuple[SimArm, ...]:
    """The answer's arms: the HPA, croft scale on sendto (replies) and on the offered load."""
    tune = (tuning or Tuning()).options
    return (
        SimArm("hpa", "Kubernetes HPA", tune(SimOptions(arm="hpa"))),
        SimArm("croft", "croft scale, sendto", tune(SimOptions(arm="croft", signal="sendto"))),
        SimArm("croft-offered", "croft scale, offered load", tune(SimOptions(arm="croft", signal="offered"))),
    )


# The goals for croft against the HPA arm: (score, most allowed ratio).
GOALS = (("slo_seconds", 0.25), ("failures", 0.25), ("replica_seconds", 1.1))


def goals_text(scores: Sequence[scoring.Score], base: str, arm: str, label: str) -> str:
    """One line: `arm`'s ratio to `base` for each goal, met or not, and its scale-downs in the burst."""
    parts = []
    for key, most in GOALS:
        a = scoring.summarize([s for s in scores if s.arm == base], key).mean
        b = scoring.summarize([s for s in scores if s.arm == arm], key).mean
        if a is None or b is None or not math.isfinite(a) or a == 0:
            parts.append(f"{scoring.LABELS[key]} n/a")
            continue
        ratio = b / a
        parts.append(
            f"{scoring.LABELS[key]} {ratio:.3g}x ({'met' if ratio <= most else 'not met'}, <= {most:g}x)"
        )
    downs = sum(s.scale_downs_in_burst for s in scores if s.arm == arm)
    parts.append(f"scale-downs inside the burst {downs} ({'met' if downs == 0 else 'not met'}, none)")
    return f"{label} against the HPA: " + "; ".join(parts)


def simulate_runs(
    app: apps.App,
    profile: Any,
    arm: str,
    seeds: Sequence[int],
    prefix: str,
    data_dir: Path,
    template: SimOptions | None = None,
    initial_replicas: int | None = None,
) -> list[str]:
    """Simulate one arm for every seed into `data_dir` (runs `<prefix><seed>`); returns the names.
    `template` gives every option but the seed (default: `arm` with the simulator's defaults);
    `profile` is a profiles.Profile or anything with duration_s, rate_at(t_s), burst_s and meta()."""
    names = []
    base = template if template is not None else SimOptions(arm=arm)  # type: ignore[arg-type]
    if initial_replicas is not None:
        base = attrs.evolve(base, initial_replicas=initial_replicas)
    for seed in seeds:
        run = f"{prefix}{seed}"
        options = attrs.evolve(base, seed=seed)
        result = simulate(run, app.sim_app(), profile, options, profile.meta(), profile.burst_s)
        write_run(data_dir, result)
        names.append(run)
    return names


FIGURE_TAIL_S = 480.0
"""Seconds the figure's runs go on past the scored window, at the base rate: long enough for both
arms' scale-down after their 300 s windows (seed 1: HPA back at 1 replica at about 932 s of 990,
croft at about 708 s; the pods drain the connections abandoned in their listen queues for minutes
after the burst, which keeps the HPA at 2 replicas)."""


def figure_profile(scale: float) -> profiles.Profile:
    """The answer's burst profile (warm-up included), its base after the burst `FIGURE_TAIL_S` longer."""
    return profiles.with_warmup(profiles.burst(scale, after_s=profiles.BURST_AFTER_S + FIGURE_TAIL_S))


def answer(
    seeds: int,
    data_root: Path,
    plot: Path | None,
    apps_path: Path = apps.APPS_JSON,
    tuning: Tuning | None = None,
) -> str:
    """Simulate both cases and every arm; returns the printed report (tables per case). `tuning`
    changes apps.json's and the simulator's settings for every app."""
    tuning = tuning or Tuning()
    out = []
    data_dir = data_root / "web"
    shutil.rmtree(data_dir, ignore_errors=True)
    all_scores: list[scoring.Score] = []
    arms = sim_arms(tuning)
    for app_name, scale in CASES:
        app = tuning.app(apps.load(app_name, apps_path))
        profile = profiles.with_warmup(profiles.burst(scale))
        prefixes = []
        for arm in arms:
            prefix = f"sim-{app_name}-{arm.key}-"
            simulate_runs(app, profile, arm.options.arm, range(1, seeds + 1), prefix, data_dir, arm.options)
            prefixes.append(prefix)
        scores = scoring.score_prefixes(data_dir, prefixes)
        all_scores += scores
        cal = app.calibration
        sim = app.sim_app()
        out.append(
            f"simulated: {app_name}, burst --scale {scale:g} ({profile.rate_at(0):g} -> "
            f"{profile.rate_at(profile.burst_s[0] if profile.burst_s else 0):g} RPS), {seeds} seeds per arm; "
            f"{cal.cpu_per_request_ms:g} ms CPU and {cal.calls_per_request:g} {cal.syscall} per request, "
            f"{app.cpu_limit_cores:g} CPU per pod; pod start {_range(sim.pod_start_s)} s, "
            f"Ready {_range(sim.readiness_s)} s after start, created {_range(sim.controller_delay_s)} s "
            f"after the scale-up; {_serving(sim)}; --drain-secs {arms[2].options.drain_s:g}"
            + (f"; {tuning.text()}" if tuning.text() else "")
        )
        out.append(scoring.table(scores, prefixes, names=[f"{arm.label}, simulated" for arm in arms]))
        for arm, prefix in zip(arms[1:], prefixes[1:], strict=True):
            out.append(goals_text(scores, prefixes[0], prefix, f"{arm.label}, simulated"))
        out.append("")
    scoring.write_csv(data_dir / "compare.csv", all_scores)
    if plot is not None:
        figure_dir = data_root / "web-figure"
        shutil.rmtree(figure_dir, ignore_errors=True)
        for app_name, scale in CASES:
            app = tuning.app(apps.load(app_name, apps_path))
            for arm in arms:
                prefix = f"sim-{app_name}-{arm.key}-"
                simulate_runs(
                    app,
                    figure_profile(scale),
                    arm.options.arm,
                    range(1, seeds + 1),
                    prefix,
                    figure_dir,
                    arm.options,
                )
        scored_end_s = profiles.with_warmup(profiles.burst(1.0)).duration_s
        draw(figure_dir, plot, scored_end_s, arms)
        out.append(scale_down_report(figure_dir, scored_end_s, arms))
        out.append(f"plot: {plot} (its runs: {figure_dir})")
    out.append(f"per-run scores: {data_dir / 'compare.csv'}")
    return "\n".join(out)


CASE_TITLES = {
    "webapp": "Web app, burst at half scale",
    "hotel-reservation": "Hotel reservation, burst at double scale",
}


def _serving(sim: SimApp) -> str:
    """How the app's pods serve, for the report."""
    if sim.service == "shared":
        return f"a thread per connection, {sim.accept_cpu_ms:g} ms of the pod to accept one"
    return "one request at a time"


def _range(values: tuple[float, ...]) -> str:
    low, high = min(values), max(values)
    return f"{low:g}" if low == high else f"{low:g}-{high:g}"


def _arm_of(run: str, app_name: str) -> str:
    """The arm key of simulated run `sim-<app>-<key>-<seed>`."""
    return run.removeprefix(f"sim-{app_name}-").rsplit("-", 1)[0]


CLIENT_TIMEOUT_MS = 10_000.0  # the load generator's timeout: a p95 at it means requests timed out


def _step_at(steps: Sequence[tuple[float, int]], t: float) -> int:
    """The replicas of step function `steps` ((x s, replicas), sorted) at `t` s."""
    value = steps[0][1]
    for x, replicas in steps:
        if x > t:
            break
        value = replicas
    return value


def replica_series(data_dir: Path, record: RunRecord) -> list[float]:
    """spec.replicas of one run at each whole second of its window, from 0."""
    timeline = read_timeline(data_dir / record.run / "timeline.json")
    steps = [
        ((at - record.window_start_ms) / 1000, n)
        for at, n in scoring.replicas_over(timeline, record.window_start_ms, record.window_end_ms)
    ]
    span = int((record.window_end_ms - record.window_start_ms) / 1000)
    return [float(_step_at(steps, t)) for t in range(span + 1)]


@attrs.frozen
class ScaleDown:
    """One run's replicas after its burst: `replica_seconds` over the whole run, and `back_s`, the
    second from which it holds the replicas it had at the burst's onset to the end (None: never)."""

    replica_seconds: float
    back_s: float | None


def replica_seconds(data_dir: Path, record: RunRecord) -> float:
    """The integral of spec.replicas over the run's window, as `compare` scores it."""
    timeline = read_timeline(data_dir / record.run / "timeline.json")
    start, stop = record.window_start_ms, record.window_end_ms
    steps = scoring.replicas_over(timeline, start, stop)
    ends = [at for at, _ in steps[1:]] + [stop]
    return sum(n * (end - at) / 1000 for (at, n), end in zip(steps, ends, strict=True))


def scale_down(data_dir: Path, record: RunRecord) -> ScaleDown:
    """The replica-seconds of `record`'s run and when it was back at its replicas before the burst."""
    replicas = replica_series(data_dir, record)
    onset_s = ((record.burst_onset_ms or record.window_start_ms) - record.window_start_ms) // 1000
    before = replicas[min(onset_s, len(replicas) - 1)]
    back = len(replicas)
    while back > 0 and replicas[back - 1] == before:
        back -= 1
    return ScaleDown(replica_seconds(data_dir, record), float(back) if back < len(replicas) else None)


def scale_down_report(data_dir: Path, scored_end_s: float, arms: Sequence[SimArm] | None = None) -> str:
    """Per case and arm: replica-seconds to the end of the figure's runs and when the arm was back
    at its pre-burst replicas, mean ± sd over the seeds."""
    import statistics

    records = read_records(data_dir)
    lines = [
        f"after the burst (the figure's runs: the base rate goes on {FIGURE_TAIL_S:g} s past the scored "
        f"window's {scored_end_s:g} s):"
    ]
    for app_name, _scale in CASES:
        parts = []
        for arm in arms or sim_arms():
            found = [
                scale_down(data_dir, r)
                for r in records
                if r.app == app_name and _arm_of(r.run, app_name) == arm.key
            ]
            if not found:
                continue
            cost = [f.replica_seconds for f in found]
            back = [f.back_s for f in found if f.back_s is not None]
            sd = statistics.stdev(cost) if len(cost) > 1 else 0.0
            back_sd = statistics.stdev(back) if len(back) > 1 else 0.0
            when = (
                f"back at its pre-burst replicas at {statistics.fmean(back):.0f} ± {back_sd:.0f} s"
                if len(back) == len(found)
                else f"not back at its pre-burst replicas in {len(found) - len(back)} of {len(found)} runs"
            )
            parts.append(f"{arm.label} {statistics.fmean(cost):.0f} ± {sd:.0f} replica-s, {when}")
        lines.append(f"  {CASE_TITLES.get(app_name, app_name)}: " + "; ".join(parts))
    return "\n".join(lines)


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


def draw(
    data_dir: Path, path: Path, scored_end_s: float | None = None, arms: Sequence[SimArm] | None = None
) -> None:
    """Offered and answered load, replicas and p95 over time, one row per case: for each arm the
    mean over its seeds with a band of ± one sd, and its replica-seconds over the runs in the
    replicas panel's legend; a line at `scored_end_s`, where the scored window ends, when the runs
    go on past it. Written as `path` (PNG) and beside it as PDF and SVG, for print."""
    import statistics

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
    span_s = 0.0
    for row, (app_name, _scale) in enumerate(CASES):
        ax_load, ax_rep, ax_p95 = axes[row]
        burst: tuple[float, float] | None = None
        for arm_key, arm_label in [(a.key, a.label) for a in arms or sim_arms()]:
            runs = [r for r in records if r.app == app_name and _arm_of(r.run, app_name) == arm_key]
            if not runs:
                continue
            seeds_seen = max(seeds_seen, len(runs))
            ok, p95, replicas, offered = [], [], [], []
            for record in runs:
                rows = read_workload(data_dir / record.run / "workload.csv")
                ok.append([float(r.ok) for r in rows])
                p95.append([r.p95_ms if r.p95_ms is not None else float("nan") for r in rows])
                offered = [float(r.target_rps) for r in rows]
                replicas.append(replica_series(data_dir, record))
                if record.burst_onset_ms is not None and record.burst_end_ms is not None:
                    burst = (
                        (record.burst_onset_ms - record.window_start_ms) / 1000,
                        (record.burst_end_ms - record.window_start_ms) / 1000,
                    )
            color = COLORS.get(arm_key, "black")
            label = f"{arm_label}, mean ± sd"
            cost = [replica_seconds(data_dir, record) for record in runs]
            cost_sd = statistics.stdev(cost) if len(cost) > 1 else 0.0
            span_s = (runs[0].window_end_ms - runs[0].window_start_ms) / 1000
            cost_label = f"{label}: {statistics.fmean(cost):.0f} ± {cost_sd:.0f} replica-s"
            for ax, series, floor in ((ax_load, ok, 0.0), (ax_rep, replicas, 0.0), (ax_p95, p95, 5.0)):
                mean, sd = _mean_sd(series)
                t = list(range(len(mean)))
                ax.plot(t, mean, color=color, lw=1.8, label=cost_label if ax is ax_rep else label)
                ax.fill_between(
                    t,
                    [max(m - d, floor) for m, d in zip(mean, sd, strict=True)],
                    [m + d for m, d in zip(mean, sd, strict=True)],
                    color=color,
                    alpha=0.2,
                    lw=0,
                )
            if arm_key == "hpa":
                ax_load.plot(
                    range(len(offered)), offered, color="black", lw=1.2, ls="--", label="offered load"
                )
        if burst is not None:
            for ax in axes[row]:
                ax.axvspan(*burst, color="red", alpha=0.07)
        if scored_end_s is not None:
            for ax in axes[row]:
                ax.axvline(scored_end_s, color="black", ls="-.", lw=1, label="end of the scored window")
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
        ax_p95.set_ylim(5.0, 2e6)  # room above the 10 s ceiling for the legend
        title = CASE_TITLES.get(app_name, app_name)
        ax_load.set_title(f"{title}:\noffered and answered load")
        ax_rep.set_title(f"{title}:\nreplicas asked for; replica-seconds to {span_s:g} s")
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
        for ax in (ax_load, ax_rep):  # room above the lines for the legend
            ax.set_ylim(0, ax.get_ylim()[1] * 1.55)
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
