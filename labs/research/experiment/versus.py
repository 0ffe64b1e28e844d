"""`run.py answer --real`: real burst runs on the node beside the simulator's runs of the same
configuration, each labelled, and the simulator's error against reality.

    uv run run.py answer --real data/web --prefix hpa- croft-sendto- croft-offered- \\
        --sim-signal croft-offered-=offered

- The real runs: every burst run of the given run directories (or data directories holding
  runs.jsonl) whose name starts with one of `--prefix`; an arm is a prefix, as in `compare`.
- The simulated runs: N seeds per arm, each replaying the offered load of one of the arm's real runs
  (its workload.csv, second by second, in turn), from the same initial replicas, with apps.json's
  costs; the HPA arm for real runs autoscaled by the HPA, croft scale for croft runs (on `sendto`
  unless `--sim-signal PREFIX=offered`). The pod delays are those measured on the real runs'
  timelines (`croft.sim.delays`) unless given.
- The report: per arm and score, "real (node)" and "simulated" mean ± sd and the simulation's
  relative error (simulated - real) / real, with a goal of 20 % on first scale-up, first
  Ready, peak replicas and seconds above the objective; then each arm against the first (the HPA)
  for real and simulated runs, with the goals of croft against the HPA.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import answer
import apps
import scoring
from croft.runs.rundir import BadRunDir, RunRecord, Timeline, read_records, read_timeline, read_workload
from croft.sim import SIGNALS, SimOptions
from croft.sim.delays import PodDelays, measure

CHECKED = ("first_scale_up_s", "first_ready_s", "peak_replicas", "slo_seconds")
GOAL_ERROR = 0.20


@attrs.frozen
class RealRun:
    data_dir: Path
    record: RunRecord
    timeline: Timeline
    score: scoring.Score
    target_rps: tuple[float, ...]


@attrs.frozen
class Replayed:
    """The offered load of a real run: its workload.csv's target RPS, second by second."""

    rates: tuple[float, ...]
    burst_s: tuple[float, float]
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def duration_s(self) -> float:
        return float(len(self.rates))

    def rate_at(self, t_s: float) -> float:
        i = int(t_s)
        return self.rates[i] if 0 <= i < len(self.rates) else 0.0

    def meta(self) -> dict[str, Any]:
        return {"profile": "replayed", **dict(self.params), "duration_s": self.duration_s}


def _data_dirs(paths: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """(data directory, the one run wanted or None for all) of each path given to --real."""
    out: list[tuple[Path, str | None]] = []
    for path in paths:
        if (path / "runs.jsonl").is_file():
            out.append((path, None))
        elif (path / "timeline.json").is_file() and (path.parent / "runs.jsonl").is_file():
            out.append((path.parent, path.name))
        else:
            raise scoring.CompareError(
                f"--real {path} is neither a run directory (timeline.json, and runs.jsonl beside it) "
                "nor a data directory holding runs.jsonl"
            )
    return out


def real_runs(
    paths: Sequence[Path], prefixes: Sequence[str], slo_ms: float = scoring.SLO_P95_MS
) -> list[RealRun]:
    """The scored burst runs of `paths` whose names start with one of `prefixes` (the longest
    matching prefix is the arm), in the order given; simulated runs are refused."""
    runs: list[RealRun] = []
    seen: set[tuple[Path, str]] = set()
    for data_dir, only in _data_dirs(paths):
        try:
            records = read_records(data_dir)
        except BadRunDir as exc:
            raise scoring.CompareError(str(exc)) from None
        for record in records:
            matching = [p for p in prefixes if record.run.startswith(p)]
            if (only is not None and record.run != only) or not matching or record.burst_onset_ms is None:
                continue
            if (data_dir, record.run) in seen:
                continue
            seen.add((data_dir, record.run))
            if record.simulated is not None:
                raise scoring.CompareError(f"run {record.run} in {data_dir} is simulated, not a real run")
            run_dir = data_dir / record.run
            try:
                timeline = read_timeline(run_dir / "timeline.json")
                rows = read_workload(run_dir / "workload.csv")
            except (OSError, BadRunDir) as exc:
                raise scoring.CompareError(f"run {record.run} cannot be scored: {exc}") from None
            score = scoring.score(record, timeline, rows, max(matching, key=len), slo_ms)
            runs.append(RealRun(data_dir, record, timeline, score, tuple(float(r.target_rps) for r in rows)))
    if not runs:
        raise scoring.CompareError(
            f"no real burst run in {', '.join(map(str, paths))} starts with {' or '.join(prefixes)}; "
            "check --real and --prefix"
        )
    return runs


def parse_signals(items: Sequence[str]) -> dict[str, str]:
    """`--sim-signal PREFIX=SIGNAL` pairs; a bad one is a `CompareError`."""
    out: dict[str, str] = {}
    for item in items:
        prefix, _, signal = item.partition("=")
        if not prefix or signal not in SIGNALS:
            raise scoring.CompareError(
                f"--sim-signal {item!r} is not PREFIX=SIGNAL with SIGNAL one of {', '.join(SIGNALS)}"
            )
        out[prefix] = signal
    return out


def _sim_options(autoscaler: str, signal: str) -> SimOptions:
    arm = answer.ARM_OF_SCALER.get(autoscaler, autoscaler)
    if arm not in ("hpa", "croft", "fixed"):
        raise scoring.CompareError(f"runs autoscaled by {autoscaler!r} have no simulated arm")
    return SimOptions(arm=arm, signal=signal)  # type: ignore[arg-type]


def relative_error(simulated: float | None, real: float | None) -> float | None:
    """(simulated - real) / real; None when either is missing or real is 0."""
    if simulated is None or real is None or real == 0 or not math.isfinite(real):
        return None
    return (simulated - real) / real


def versus(
    paths: Sequence[Path],
    prefixes: Sequence[str],
    seeds: int,
    sim_root: Path,
    apps_path: Path = apps.APPS_JSON,
    signals: Mapping[str, str] | None = None,
    tuning: answer.Tuning | None = None,
    slo_ms: float = scoring.SLO_P95_MS,
) -> str:
    """Simulate every arm of the real runs and report both; `tuning`'s delays win over the measured
    ones."""
    tuning = tuning or answer.Tuning()
    runs = real_runs(paths, prefixes, slo_ms)
    signals = signals or {}
    measured = measure(r.timeline for r in runs)
    sim_dir = sim_root / "web"
    shutil.rmtree(sim_dir, ignore_errors=True)
    arms = [p for p in prefixes if any(r.score.arm == p for r in runs)]
    real_scores = [r.score for r in runs]
    sim_prefixes = {arm: f"sim-{arm}" for arm in arms}
    out = [_delays_text(measured, tuning.delays)]
    if tuning.text():
        out.append(f"simulated with {tuning.text()}")
    for arm in arms:
        arm_runs = [r for r in runs if r.score.arm == arm]
        autoscalers = {r.record.autoscaler for r in arm_runs}
        app_names = {r.record.app for r in arm_runs}
        if len(autoscalers) != 1 or len(app_names) != 1:
            raise scoring.CompareError(
                f"the runs of --prefix {arm} mix autoscalers {sorted(autoscalers)} "
                f"or apps {sorted(app_names)}"
            )
        app = apps.load(app_names.pop(), apps_path)
        app = tuning.app(app, measured.sim_overrides())
        options = tuning.options(_sim_options(autoscalers.pop(), signals.get(arm, "sendto")))
        for seed in range(1, seeds + 1):
            real = arm_runs[(seed - 1) % len(arm_runs)]
            onset = (real.record.burst_onset_ms or 0) - real.record.window_start_ms
            end = (real.record.burst_end_ms or 0) - real.record.window_start_ms
            replayed = Replayed(real.target_rps, (onset / 1000, end / 1000), (("real_run", real.record.run),))
            answer.simulate_runs(
                app,
                replayed,
                options.arm,
                [seed],
                sim_prefixes[arm],
                sim_dir,
                options,
                real.timeline.initial_replicas,
            )
        out.append(_arm_table(arm, options, real_scores, sim_dir, sim_prefixes[arm], slo_ms))
    sim_scores = scoring.score_prefixes(sim_dir, list(sim_prefixes.values()), slo_ms)
    if len(arms) > 1:
        out.append(_against_first(arms, real_scores, sim_scores, sim_prefixes))
    scoring.write_csv(sim_dir / "compare.csv", sim_scores)
    out.append(f"simulated runs and their scores: {sim_dir}, {sim_dir / 'compare.csv'}")
    return "\n".join(out)


def _delays_text(measured: PodDelays, given: Mapping[str, tuple[float, float]]) -> str:
    lines = ["pod delays measured on the real runs (the simulator draws from the values measured):"]
    for field, name, spread in (
        ("controller_delay_s", "scale-up -> pod created", measured.controller),
        ("pod_start_s", "pod created -> containers running (start delay)", measured.pod_start),
        ("readiness_s", "running -> Ready (Ready delay)", measured.readiness),
    ):
        note = (
            f"; simulated with {given[field][0]:g}-{given[field][1]:g} s as given" if field in given else ""
        )
        if field not in given and spread.bounds is None:
            note = "; simulated with apps.json's range"
        lines.append(f"  {name}: {spread.text()}{note}")
    return "\n".join(lines)


def _cell(summary: scoring.Summary) -> str:
    return summary.text()


def _arm_table(
    arm: str,
    options: SimOptions,
    real_scores: Sequence[scoring.Score],
    sim_dir: Path,
    sim_prefix: str,
    slo_ms: float,
) -> str:
    real = [s for s in real_scores if s.arm == arm]
    sim = scoring.score_prefixes(sim_dir, [sim_prefix], slo_ms)
    what = options.arm if options.arm != "croft" else f"croft scale on {options.signal}"
    heads = (f"real (node), n={len(real)}", f"simulated, n={len(sim)}", "sim error")
    lines = [
        "",
        f"arm {arm} ({what})",
        f"{'score':34}{heads[0]:>24}{heads[1]:>24}{heads[2]:>22}",
    ]
    for key in scoring.SCORES:
        r, s = scoring.summarize(real, key), scoring.summarize(sim, key)
        error = relative_error(s.mean, r.mean)
        if error is None:
            verdict = "n/a"
        else:
            verdict = f"{error:+.0%}"
            if key in CHECKED:
                verdict += " ok" if abs(error) <= GOAL_ERROR else " off"
        lines.append(f"{scoring.LABELS[key]:34}{_cell(r):>24}{_cell(s):>24}{verdict:>22}")
    checked = [
        relative_error(scoring.summarize(sim, k).mean, scoring.summarize(real, k).mean) for k in CHECKED
    ]
    off = [k for k, e in zip(CHECKED, checked, strict=True) if e is None or abs(e) > GOAL_ERROR]
    lines.append(
        f"within {GOAL_ERROR:.0%} on first scale-up, first Ready, peak replicas and seconds above "
        "the objective: " + ("yes" if not off else f"no ({', '.join(scoring.LABELS[k] for k in off)})")
    )
    return "\n".join(lines)


def _against_first(
    arms: Sequence[str],
    real_scores: Sequence[scoring.Score],
    sim_scores: Sequence[scoring.Score],
    sim_prefixes: Mapping[str, str],
) -> str:
    base = arms[0]
    lines = ["", f"against the first arm ({base}), mean ratios:"]
    for arm in arms[1:]:
        lines.append("  " + answer.goals_text(real_scores, base, arm, f"{arm} real (node)"))
        lines.append(
            "  " + answer.goals_text(sim_scores, sim_prefixes[base], sim_prefixes[arm], f"{arm} simulated")
        )
    return "\n".join(lines)
