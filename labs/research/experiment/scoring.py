"""`run.py compare`: the scores of each burst run, and mean ± sd per arm.

Per burst run (times in seconds from the burst's onset, from runs.jsonl):

| score | definition |
| --- | --- |
| first_scale_up_s | first rescale to more replicas at or after the onset (empty: never) |
| first_ready_s | first pod created at or after the onset that became Ready (empty: never) |
| peak_replicas | the most spec.replicas over the window (load start to load end) |
| scale_downs_in_burst | rescales to fewer replicas between the onset and the burst's end |
| slo_seconds | seconds of workload.csv whose p95 is above the objective (500 ms) |
| failures | requests that failed or timed out over the window |
| replica_seconds | the integral of spec.replicas over the window |

The same function scores real and simulated run directories (croft.runs.rundir's format).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import attrs

from croft.runs.load import SecondStats
from croft.runs.rundir import BadRunDir, RunRecord, Timeline, read_records, read_timeline, read_workload

SLO_P95_MS = 500.0
SCORES = (
    "first_scale_up_s",
    "first_ready_s",
    "peak_replicas",
    "scale_downs_in_burst",
    "slo_seconds",
    "failures",
    "replica_seconds",
)
LABELS = {
    "first_scale_up_s": "onset -> first scale-up, s",
    "first_ready_s": "onset -> first new pod Ready, s",
    "peak_replicas": "peak replicas",
    "scale_downs_in_burst": "scale-downs inside the burst",
    "slo_seconds": "seconds with p95 > 500 ms",
    "failures": "failed + timed-out requests",
    "replica_seconds": "replica-seconds",
}


class CompareError(ValueError):
    """Nothing to compare, or a run directory that cannot be scored; the message says which."""


@attrs.frozen
class Score:
    run: str
    arm: str
    app: str
    autoscaler: str
    first_scale_up_s: float | None
    first_ready_s: float | None
    peak_replicas: int
    scale_downs_in_burst: int
    slo_seconds: int
    failures: int
    replica_seconds: float


def replicas_over(timeline: Timeline, start_ms: int, end_ms: int) -> list[tuple[int, int]]:
    """(at_ms, replicas) steps of spec.replicas over [start_ms, end_ms], the first at `start_ms`."""
    replicas = timeline.initial_replicas
    steps: list[tuple[int, int]] = []
    for rescale in sorted(timeline.rescales, key=lambda r: r.at_ms):
        if rescale.at_ms <= start_ms:
            replicas = rescale.to_replicas
        elif rescale.at_ms <= end_ms:
            steps.append((rescale.at_ms, rescale.to_replicas))
    return [(start_ms, replicas), *steps]


def score(
    record: RunRecord, timeline: Timeline, rows: Sequence[SecondStats], arm: str, slo_ms: float = SLO_P95_MS
) -> Score:
    """The scores of one burst run; a run without a burst raises `CompareError`."""
    onset, end = record.burst_onset_ms, record.burst_end_ms
    if onset is None or end is None:
        raise CompareError(f"run {record.run} is not a burst run (runs.jsonl has no load.burst)")
    start, stop = record.window_start_ms, record.window_end_ms
    ups = [r.at_ms for r in timeline.rescales if r.to_replicas > r.from_replicas and r.at_ms >= onset]
    ready = [p.ready_ms for p in timeline.pods if p.created_ms >= onset and p.ready_ms is not None]
    steps = replicas_over(timeline, start, stop)
    seconds = 0.0
    for (at, replicas), (next_at, _) in zip(steps, [*steps[1:], (stop, 0)], strict=True):
        seconds += replicas * (next_at - at) / 1000
    downs = sum(1 for r in timeline.rescales if r.to_replicas < r.from_replicas and onset <= r.at_ms <= end)
    return Score(
        run=record.run,
        arm=arm,
        app=record.app,
        autoscaler=record.autoscaler,
        first_scale_up_s=(min(ups) - onset) / 1000 if ups else None,
        first_ready_s=(min(ready) - onset) / 1000 if ready else None,
        peak_replicas=max(r for _, r in steps),
        scale_downs_in_burst=downs,
        slo_seconds=sum(1 for row in rows if row.p95_ms is not None and row.p95_ms > slo_ms),
        failures=sum(row.failures + row.timeouts for row in rows),
        replica_seconds=round(seconds, 3),
    )


def score_prefixes(data_dir: Path, prefixes: Sequence[str], slo_ms: float = SLO_P95_MS) -> list[Score]:
    """Every burst run of `data_dir/runs.jsonl` whose name starts with one of `prefixes` (the arm
    is the longest prefix it matches), in file order."""
    try:
        records = read_records(data_dir)
    except BadRunDir as exc:
        raise CompareError(str(exc)) from None
    scores = []
    for record in records:
        matching = [p for p in prefixes if record.run.startswith(p)]
        if not matching or record.burst_onset_ms is None:
            continue
        run_dir = data_dir / record.run
        try:
            timeline = read_timeline(run_dir / "timeline.json")
            rows = read_workload(run_dir / "workload.csv")
        except (OSError, BadRunDir) as exc:
            raise CompareError(f"run {record.run} cannot be scored: {exc}") from None
        scores.append(score(record, timeline, rows, max(matching, key=len), slo_ms))
    if not scores:
        raise CompareError(
            f"no burst run in {data_dir / 'runs.jsonl'} starts with {' or '.join(prefixes)}; "
            "check --prefix and --data"
        )
    return scores


def write_csv(path: Path, scores: Sequence[Score]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [f.name for f in attrs.fields(Score)]
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for item in scores:
            writer.writerow(["" if (v := getattr(item, c)) is None else v for c in columns])


# Student's t, two-sided 95 % (the 0.975 quantile) by degrees of freedom 1-30; beyond 30, the value
# at the nearest tabled degrees of freedom below (a slightly wider interval, never a narrower one).
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
T_975_BEYOND = ((40, 2.021), (60, 2.000), (120, 1.980))


def t_975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` >= 1 degrees of freedom (95 % two-sided)."""
    if df < 1:
        raise ValueError("a t quantile needs at least 1 degree of freedom")
    if df <= len(T_975):
        return T_975[df - 1]
    value = T_975[-1]
    for at, quantile in T_975_BEYOND:
        if df >= at:
            value = quantile
    return value


@attrs.frozen
class Summary:
    """mean and sd (sample; 0 for one run) of one score over an arm's runs that have it; `never`
    counts the runs where it did not happen (first_* only)."""

    mean: float | None
    sd: float | None
    n: int
    never: int

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The 95 % confidence interval of the mean (Student's t, n - 1 degrees of freedom); None
        below two runs."""
        if self.mean is None or self.sd is None or self.n < 2:
            return None
        half = t_975(self.n - 1) * self.sd / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def text(self) -> str:
        if self.mean is None or self.sd is None:
            return "never" if self.never else "-"
        out = f"{self.mean:.1f} ± {self.sd:.1f}"
        return f"{out} ({self.never} never)" if self.never else out

    def ci_text(self) -> str:
        """mean ± sd [95 % CI low, high] (no interval below two runs; every score is 0 or more, so
        the interval shown starts at 0 at the lowest)."""
        ci = self.ci95
        return self.text() if ci is None else f"{self.text()} [{max(ci[0], 0.0):.1f}, {ci[1]:.1f}]"


def summarize(scores: Sequence[Score], key: str) -> Summary:
    return summary_of([getattr(s, key) for s in scores])


def summary_of(values: Sequence[float | None]) -> Summary:
    """mean and sd of the values present; `never` counts the missing ones."""
    present = [float(v) for v in values if v is not None]
    never = len(values) - len(present)
    if not present:
        return Summary(None, None, 0, never)
    sd = statistics.stdev(present) if len(present) > 1 else 0.0
    return Summary(statistics.fmean(present), sd, len(present), never)


def table(scores: Sequence[Score], arms: Sequence[str], names: Sequence[str] | None = None) -> str:
    """mean ± sd per arm, one line per score, with the ratio of the second arm to the first;
    `names` label the arms' columns (default: the arms' prefixes)."""
    by_arm = {arm: [s for s in scores if s.arm == arm] for arm in arms}
    heads = [f"{name} (n={len(by_arm[arm])})" for arm, name in zip(arms, names or arms, strict=True)]
    width = max(24, *(len(h) + 2 for h in heads))
    lines = [
        f"{'score':34}" + "".join(f"{h:>{width}}" for h in heads) + ("   ratio" if len(arms) == 2 else "")
    ]
    for key in SCORES:
        sums = [summarize(by_arm[arm], key) for arm in arms]
        line = f"{LABELS[key]:34}" + "".join(f"{s.text():>{width}}" for s in sums)
        if len(arms) == 2:
            a, b = sums[0].mean, sums[1].mean
            ratio = f"{b / a:.2f}" if a and b is not None and math.isfinite(a) and a != 0 else "n/a"
            line += f"{ratio:>8}"
        lines.append(line)
    return "\n".join(lines)
