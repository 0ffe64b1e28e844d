"""The simulator fitted on one set of real runs and checked on another.

The real runs of each (bound, shape, arm) are split in the order they ran: the 1st, 3rd, 5th ...
fit, the 2nd, 4th ... are held out. On the fit set:

- the pod delays are measured on its timelines (`croft.sim.delays`), and
- `accept_cpu_ms` (what a pod's acceptor takes per connection, the one parameter of the model fitted
  on runs rather than measured) is the value of `GRID_MS` whose simulation of the fit runs (each
  replaying its run's offered load, `seeds` seeds) is nearest the real ones: the least mean
  |relative error| of the `CHECKED` scores' means, over the fit set's (bound, shape, arm) groups.

The held-out runs are then simulated the same way with what the fit set gave, and each group's
`CHECKED` means compared with the real ones: the goal is 20 %. A group with one run has nothing
held out; one with none in the fit set is checked with the delays and value of the others.
"""

from __future__ import annotations

import math
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path

import attrs

import answer
import apps
import boundary
import scoring
import versus
from croft.runs.rundir import read_timeline, read_workload
from croft.sim import simulate, write_run
from croft.sim.delays import PodDelays, measure

CHECKED = versus.CHECKED
GOAL_ERROR = versus.GOAL_ERROR
GRID_MS = (0.0, 5.0, 10.0, 20.0, 30.0, 40.0)

Group = tuple[float, float, str]  # (bound, shape, arm)


def group_of(run: boundary.Scored) -> Group:
    return (run.bound_s, run.shape_s, run.arm)


def split(runs: Sequence[boundary.Scored]) -> tuple[list[boundary.Scored], list[boundary.Scored]]:
    """(fit, held out): in each group, by the time each run started, every other run held out."""
    fit: list[boundary.Scored] = []
    held: list[boundary.Scored] = []
    groups: dict[Group, list[boundary.Scored]] = {}
    for run in runs:
        groups.setdefault(group_of(run), []).append(run)
    for members in groups.values():
        ordered = sorted(members, key=lambda r: r.record.window_start_ms)
        fit += ordered[0::2]
        held += ordered[1::2]
    return fit, held


def replay(
    runs: Sequence[boundary.Scored],
    app: apps.App,
    tuning: answer.Tuning,
    delays: PodDelays,
    seeds: int,
    sim_dir: Path,
) -> list[boundary.Scored]:
    """Each run of `runs` simulated `seeds` times on its own offered load (workload.csv), from its
    initial replicas, with its arm, shape and bound, the measured `delays` and `tuning`; scored."""
    shutil.rmtree(sim_dir, ignore_errors=True)
    measured = delays.sim_overrides()
    for run in runs:
        record = run.record
        rows = read_workload(run.directory / "workload.csv")
        onset = ((record.burst_onset_ms or 0) - record.window_start_ms) / 1000
        end = ((record.burst_end_ms or 0) - record.window_start_ms) / 1000
        params = (
            ("real_run", record.run),
            ("ramp_s", run.shape_s),
            ("arm", run.arm),
            ("max_connection_age_s", run.bound_s),
        )
        offered = versus.Replayed(tuple(float(r.target_rps) for r in rows), (onset, end), params)
        sim_app = apps.with_connection_age(tuning.app(app, measured), run.bound_s).sim_app()
        options = tuning.options(boundary.ARM_OPTIONS[run.arm])
        initial = read_timeline(run.directory / "timeline.json").initial_replicas
        for seed in range(1, seeds + 1):
            name = f"sim-{record.run}-{seed}"
            result = simulate(
                name,
                sim_app,
                offered,
                attrs.evolve(options, seed=seed, initial_replicas=initial),
                offered.meta(),
                offered.burst_s,
            )
            write_run(sim_dir, result)
    return boundary.scored_runs(sim_dir, "sim")


@attrs.frozen
class Error:
    """One group's score: the real and simulated means and (simulated - real) / real."""

    group: Group
    key: str
    real: float | None
    simulated: float | None
    error: float | None

    @property
    def ok(self) -> bool:
        return self.error is not None and abs(self.error) <= GOAL_ERROR


def errors(real: Sequence[boundary.Scored], simulated: Sequence[boundary.Scored]) -> list[Error]:
    """For each group of `real` and each `CHECKED` score, the simulation's relative error."""
    out = []
    for group in dict.fromkeys(group_of(r) for r in real):
        mine = [r.score for r in real if group_of(r) == group]
        sims = [s.score for s in simulated if group_of(s) == group]
        for key in CHECKED:
            r, s = scoring.summarize(mine, key).mean, scoring.summarize(sims, key).mean
            out.append(Error(group, key, r, s, versus.relative_error(s, r)))
    return out


def mean_abs_error(found: Sequence[Error]) -> float:
    """The mean |relative error| of `found` (an error that cannot be computed counts as 100 %)."""
    values = [abs(e.error) if e.error is not None else 1.0 for e in found]
    return statistics.fmean(values) if values else math.inf


@attrs.frozen
class Fit:
    accept_cpu_ms: float
    delays: PodDelays
    tried: tuple[tuple[float, float], ...]  # (accept_cpu_ms, mean |relative error|)


def fit(
    runs: Sequence[boundary.Scored],
    app: apps.App,
    tuning: answer.Tuning,
    seeds: int,
    work_dir: Path,
    grid: Sequence[float] = GRID_MS,
) -> Fit:
    """The delays measured on `runs` and the `accept_cpu_ms` of `grid` nearest them."""
    delays = measure(read_timeline(r.directory / "timeline.json") for r in runs)
    tried = []
    for value in grid:
        simulated = replay(
            runs, app, attrs.evolve(tuning, accept_cpu_ms=value), delays, seeds, work_dir / f"fit-{value:g}"
        )
        tried.append((value, mean_abs_error(errors(runs, simulated))))
    best = min(tried, key=lambda t: (t[1], t[0]))[0]
    return Fit(best, delays, tuple(tried))


def check_text(found: Sequence[Error]) -> str:
    """One line per held-out group and score: real, simulated, error and the 20 % goal."""
    lines = [f"{'bound':>6} {'shape':>6} {'arm':14} {'score':34}{'real':>10}{'simulated':>11}{'error':>12}"]
    for e in found:
        bound, shape, arm = e.group

        def num(value: float | None) -> str:
            return "never" if value is None else f"{value:.1f}"

        verdict = "n/a" if e.error is None else f"{e.error:+.0%} {'ok' if e.ok else 'off'}"
        lines.append(
            f"{bound:>5g}s {shape:>5g}s {arm:14} {scoring.LABELS[e.key]:34}{num(e.real):>10}"
            f"{num(e.simulated):>11}{verdict:>12}"
        )
    within = sum(e.ok for e in found)
    lines.append(
        f"the simulator is within {GOAL_ERROR:.0%} of the held-out real runs on {within} of {len(found)} "
        "cells (first scale-up, first Ready, peak replicas, seconds above the objective)"
    )
    return "\n".join(lines)


def why_text(held: Sequence[boundary.Scored], found: Sequence[Error]) -> str:
    """Why the check misses where it does, per score with a cell off: whether the simulation errs
    one way (a bias of the model) and how large the held-out real means' own standard error is
    against their value (sd / sqrt(n) / mean: the real runs' spread, which no model removes);
    cells whose real mean is 0 have no relative error."""
    lines = []
    for key in CHECKED:
        mine = [e for e in found if e.key == key]
        missed = sum(not e.ok for e in mine)
        if not missed:
            continue
        errs = [e.error for e in mine if e.error is not None]
        parts = [f"{missed} of {len(mine)} cells off"]
        if errs:
            below, mean = sum(x < 0 for x in errs), statistics.fmean(errs)
            parts.append(f"simulated below the real in {below} of {len(errs)} (mean error {mean:+.0%})")
        noise = []
        for e in mine:
            real = scoring.summarize([r.score for r in held if group_of(r) == e.group], key)
            if real.mean and real.sd is not None and real.n > 1:
                noise.append(real.sd / math.sqrt(real.n) / real.mean)
        if noise:
            wide = sum(x >= GOAL_ERROR for x in noise)
            parts.append(
                f"the held-out real mean's own standard error is {GOAL_ERROR:.0%} of it or more in {wide} of "
                f"{len(noise)} (range {min(noise):.0%}-{max(noise):.0%})"
            )
        if len(errs) < len(mine):
            parts.append(f"{len(mine) - len(errs)} with a real mean of 0 or none (no relative error)")
        lines.append(f"  why, {scoring.LABELS[key]}: " + "; ".join(parts))
    return "\n".join(lines)


def fit_and_check(
    runs: Sequence[boundary.Scored], app: apps.App, tuning: answer.Tuning, seeds: int, work_dir: Path
) -> tuple[Fit | None, str]:
    """Fit on half of `runs`, check on the other half; (the fit, the report). No fit without runs."""
    fit_set, held = split(runs)
    if not fit_set:
        return None, "no real runs to fit the simulator on"
    found = fit(fit_set, app, tuning, min(seeds, 2), work_dir)
    lines = [
        f"the simulator fitted on {len(fit_set)} real runs and checked on {len(held)} others "
        "(each group's runs in turn, in the order they ran):",
        "  accept_cpu_ms, mean |relative error| on the fit runs: "
        + ", ".join(f"{v:g} ms {e:.0%}" for v, e in found.tried)
        + f" -> {found.accept_cpu_ms:g} ms",
        f"  pod delays of the fit runs: start {found.delays.pod_start.text()}; "
        f"Ready {found.delays.readiness.text()}",
    ]
    if not held:
        lines.append("  nothing held out: every group has one run; run at least two per arm and shape")
        return found, "\n".join(lines)
    fitted = attrs.evolve(tuning, accept_cpu_ms=found.accept_cpu_ms)
    simulated = replay(held, app, fitted, found.delays, seeds, work_dir / "check")
    checked = errors(held, simulated)
    lines.append(check_text(checked))
    why = why_text(held, checked)
    if why:
        lines.append(why)
    return found, "\n".join(lines)
