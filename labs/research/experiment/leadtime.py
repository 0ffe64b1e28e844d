"""Lead time of each candidate signal over the latency objective, per run (research/lead_time.ipynb).

THRESHOLD_RULE states the rule; `lead_times` applies it to every (signal, run), one `LeadTime`
each, so that a signal absent from a run or never crossing its threshold still has its row (with
`lead_s` None and a note saying why).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

import attrs

from burst_series import GROUPS, Run, Series, all_series, burst_summary

OBJECTIVE_MS = 500.0
SIGMAS = 3.0
MIN_RISE = 0.2
ABSOLUTE_FLOOR = 1e-6
MIN_BASELINE_SAMPLES = 2
# Signals whose rise is the autoscalers' answer rather than a warning of the burst.
NOT_SIGNALS = frozenset({"load", "replicas"})
NOT_SIGNAL_NAMES = frozenset({"prom replicas", "prom restarts", "prom memory_bytes"})
# syscalls slower than this during the burst (summed over the run's containers) are left out
MIN_SYSCALL_RATE = 5.0

THRESHOLD_RULE = (
    "Baseline: the signal's samples before the burst's onset (t < 0) whose interval lies wholly after "
    "the load's start (a sample at t covers the signal's sampling period before t, the median gap "
    f"between its samples), at least {MIN_BASELINE_SAMPLES}. "
    f"Threshold: baseline mean + max({SIGMAS:g} x baseline sd, {MIN_RISE:g} x |baseline mean|, "
    f"{ABSOLUTE_FLOOR:g}). Detected: the time stamp of the first sample at or after the onset "
    f"(t >= 0) above the threshold. The objective is crossed at the first second (of scheduled send "
    f"time, workload.csv) at or after the onset whose p95 latency exceeds {OBJECTIVE_MS:g} ms. "
    "Lead time = objective crossed - detected: positive when the signal warned before p95 degraded."
)


@attrs.frozen
class LeadTime:
    """One (signal, run): its threshold, when it was detected and when p95 crossed the objective
    (seconds from the burst's onset), and the lead time in seconds; None (with `note`) when one of
    them did not happen."""

    run: str
    autoscaler: str
    signal: str
    group: str
    unit: str
    baseline_mean: float | None
    baseline_sd: float | None
    threshold: float | None
    detected_s: float | None
    objective_crossed_s: float | None
    lead_s: float | None
    note: str = ""


def objective_crossed_s(run: Run, objective_ms: float = OBJECTIVE_MS) -> float | None:
    """Seconds from onset of the first second at or after the onset whose p95 exceeds the objective."""
    for row in run.workload:
        t = run.seconds(row.unix_s * 1000)
        if t >= 0 and row.p95_ms is not None and row.p95_ms > objective_ms:
            return t
    return None


def period_s(series: Series) -> float:
    """The series' sampling period: the median gap between its samples (0 with fewer than two)."""
    gaps = [b - a for a, b in zip(series.t_s, series.t_s[1:], strict=False) if b > a]
    return statistics.median(gaps) if gaps else 0.0


def threshold(series: Series, start_s: float) -> tuple[float, float, float] | None:
    """(baseline mean, baseline sd, threshold) by THRESHOLD_RULE: the baseline is the samples before
    the onset whose sampling period lies after the load's start (`start_s`, seconds from the onset;
    the first poll after the start counts only part of its interval's load); None with too few."""
    earliest = start_s + period_s(series)
    baseline = [v for t, v in zip(series.t_s, series.values, strict=True) if earliest <= t < 0]
    if len(baseline) < MIN_BASELINE_SAMPLES:
        return None
    mean = statistics.fmean(baseline)
    sd = statistics.stdev(baseline)
    return mean, sd, mean + max(SIGMAS * sd, MIN_RISE * abs(mean), ABSOLUTE_FLOOR)


def detected_s(series: Series, limit: float) -> float | None:
    """The time stamp of the first sample at or after the onset above `limit`."""
    return next((t for t, v in zip(series.t_s, series.values, strict=True) if t >= 0 and v > limit), None)


def candidates(run: Run, series: Iterable[Series]) -> list[Series]:
    """The series that are candidate signals (not the client's load, not the replica counts, and
    syscalls only when their mean rate during the burst is MIN_SYSCALL_RATE or more)."""
    out = []
    for s in series:
        if s.group in NOT_SIGNALS or s.name in NOT_SIGNAL_NAMES:
            continue
        if s.group == "syscalls" and (burst_summary(run, s).burst_mean or 0.0) < MIN_SYSCALL_RATE:
            continue
        out.append(s)
    return out


def lead_times(runs: Sequence[Run]) -> list[LeadTime]:
    """One LeadTime per candidate signal (of any run) per run, by signal then run."""
    per_run = {run.name: {s.name: s for s in candidates(run, all_series(run))} for run in runs}
    kinds: dict[str, tuple[str, str]] = {}
    for signals_of_run in per_run.values():
        for s in signals_of_run.values():
            kinds.setdefault(s.name, (s.group, s.unit))
    names = sorted(kinds, key=lambda n: (GROUPS.index(kinds[n][0]), n))
    out = []
    for name in names:
        group, unit = kinds[name]
        for run in runs:
            crossed = objective_crossed_s(run)
            base = LeadTime(
                run.name, run.record.autoscaler, name, group, unit, None, None, None, None, crossed, None
            )
            series = per_run[run.name].get(name)
            if series is None:
                out.append(attrs.evolve(base, note="no samples in this run"))
                continue
            limits = threshold(series, run.start_s)
            if limits is None:
                out.append(
                    attrs.evolve(base, note=f"fewer than {MIN_BASELINE_SAMPLES} samples before the onset")
                )
                continue
            mean, sd, limit = limits
            found = detected_s(series, limit)
            lead = None if found is None or crossed is None else crossed - found
            note = (
                "never crossed its threshold"
                if found is None
                else f"p95 never exceeded {OBJECTIVE_MS:g} ms"
                if crossed is None
                else ""
            )
            out.append(
                attrs.evolve(
                    base,
                    baseline_mean=mean,
                    baseline_sd=sd,
                    threshold=limit,
                    detected_s=found,
                    lead_s=lead,
                    note=note,
                )
            )
    return out


@attrs.frozen
class Distribution:
    """A signal's lead times across runs: how many runs, how many gave a lead time, mean and sd
    (sd None below two), min and max (s)."""

    signal: str
    group: str
    runs: int
    detected: int
    mean_s: float | None
    sd_s: float | None
    min_s: float | None
    max_s: float | None


def distributions(rows: Sequence[LeadTime]) -> list[Distribution]:
    """Per signal (in the rows' order), the distribution of its lead times across runs."""
    out = []
    for name in dict.fromkeys(r.signal for r in rows):
        mine = [r for r in rows if r.signal == name]
        out.append(Distribution(name, mine[0].group, *_spread(mine)))
    return out


def _spread(
    mine: Sequence[LeadTime],
) -> tuple[int, int, float | None, float | None, float | None, float | None]:
    """Runs, runs with a lead time, and the lead times' mean, sd, min and max (None where too few)."""
    leads = [r.lead_s for r in mine if r.lead_s is not None]
    return (
        len(mine),
        len(leads),
        statistics.fmean(leads) if leads else None,
        statistics.stdev(leads) if len(leads) > 1 else None,
        min(leads, default=None),
        max(leads, default=None),
    )


@attrs.frozen
class ShapeDistribution:
    """A signal's lead times across the runs of one arm at one burst shape (`shape_s`: the seconds
    the burst took to reach its peak, the run's `load.ramp_s`; 0 for a step) and connection bound
    (`bound_s`: the server's bound on a connection's life, `load.max_connection_age_s`; 0: none)."""

    signal: str
    arm: str
    bound_s: float
    shape_s: float
    runs: int
    detected: int
    mean_s: float | None
    sd_s: float | None
    min_s: float | None
    max_s: float | None


def per_shape(rows: Sequence[LeadTime], runs: Sequence[Run]) -> list[ShapeDistribution]:
    """The lead times of `rows` per signal, arm (the run's `load.arm`, else its autoscaler), bound
    and shape, by signal, then arm, then bound (longest first), then shape."""
    of_run = {
        r.name: (
            str(r.record.load.get("arm", r.record.autoscaler)),
            float(r.record.load.get("max_connection_age_s", 0.0)),
            float(r.record.load.get("ramp_s", 0.0)),
        )
        for r in runs
    }
    groups: dict[tuple[str, str, float, float], list[LeadTime]] = {}
    for row in rows:
        groups.setdefault((row.signal, *of_run[row.run]), []).append(row)
    out = []
    signals = list(dict.fromkeys(r.signal for r in rows))
    for key in sorted(groups, key=lambda k: (signals.index(k[0]), k[1], -k[2], k[3])):
        signal, arm, bound, shape = key
        out.append(ShapeDistribution(signal, arm, bound, shape, *_spread(groups[key])))
    return out


def per_shape_text(found: Sequence[ShapeDistribution]) -> str:
    """One line per signal, arm and bound: the mean ± sd lead time (s) at each shape, with how many
    runs gave one ('-' where none did: the signal never crossed, or p95 never exceeded the objective)."""
    shapes = sorted({d.shape_s for d in found})
    names = ["step" if s == 0 else f"{s:g} s ramp" for s in shapes]
    wide = max([24, *(len(d.signal) for d in found)])
    lines = [f"{'signal':{wide}} {'arm':14} {'bound':>6}" + "".join(f"{name:>22}" for name in names)]
    for signal, arm, bound in dict.fromkeys((d.signal, d.arm, d.bound_s) for d in found):
        cells = []
        for shape in shapes:
            key = (signal, arm, bound, shape)
            d = next((x for x in found if (x.signal, x.arm, x.bound_s, x.shape_s) == key), None)
            if d is None or d.mean_s is None:
                cells.append("-" if d is None else f"- (0/{d.runs})")
            else:
                cells.append(f"{d.mean_s:+.1f} ± {d.sd_s or 0.0:.1f} ({d.detected}/{d.runs})")
        bound_text = f"{bound:g} s" if bound else "none"
        lines.append(f"{signal:{wide}} {arm:14} {bound_text:>6}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def leading_text(found: Sequence[ShapeDistribution], arm: str = "hpa", top: int = 6) -> str:
    """Per bound and shape, the signals of `arm`'s runs that crossed their threshold before p95
    crossed the objective in every run (and in at least two), earliest first (at most `top`), and
    how many others did not; '' when `arm` has no runs. The HPA's runs by default: no early scale-up
    hides the burst from its signals there."""
    lines = []
    for bound, shape in sorted(
        {(d.bound_s, d.shape_s) for d in found if d.arm == arm}, key=lambda k: (-k[0], k[1])
    ):
        mine = [d for d in found if (d.arm, d.bound_s, d.shape_s) == (arm, bound, shape)]
        ahead = sorted(
            (d for d in mine if d.runs >= 2 and d.detected == d.runs and (d.min_s or 0.0) > 0.0),
            key=lambda d: -(d.mean_s or 0.0),
        )
        name = "step" if shape == 0 else f"{shape:g} s ramp"
        bound_text = f"bound {bound:g} s" if bound else "no bound"
        cells = ", ".join(f"{d.signal} {d.mean_s:+.1f} ± {d.sd_s or 0.0:.1f}" for d in ahead[:top])
        lines.append(
            f"{name}, {bound_text}, {arm}: {len(ahead)} of {len(mine)} signals ahead of p95 in every run"
            + (f"; earliest: {cells}" if cells else "")
        )
    return "\n".join(lines)
