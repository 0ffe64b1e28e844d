"""The answer as a boundary: each arm over burst shapes from a step to slow ramps, beside the oracle,
the best any reactive scaler can do; real runs (the node) and simulated ones (croft.sim).

- A **shape** is the seconds a burst takes to reach its peak: a run's `load.ramp_s` (0, a step, for a
  burst run that does not say).
- An **arm** is `hpa` (the Kubernetes HPA), `croft-sendto` (croft scale on `sendto`, the replies),
  `croft-offered` (croft scale on the offered load) or `oracle` (croft.sim's oracle arm: the replicas
  the peak needs, asked for at the onset; simulated only). A run says its arm in `load.arm`; runs
  recorded before that are given theirs by prefix (`arms_by_prefix`).
- A **source** is `real` or `sim`; a **bound** is the server's bound on a keep-alive connection's life
  (`load.max_connection_age_s`, 0: none), which decides whether new pods take load at all.

`cells` groups scored runs by (bound, shape, arm, source); `rows` are boundary.csv's, one per shape,
arm and source of one bound, with exactly the columns `COLUMNS`; `goals` checks each shape against
the issue's goals and says why where one is not met.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import answer
import apps
import nodecpu
import scoring
from croft.runs.rundir import BadRunDir, RunRecord, read_records, read_timeline, read_workload
from croft.sim import SimOptions, simulate, write_run

ARMS = ("hpa", "croft-sendto", "croft-offered", "oracle")
ARM_LABELS = {
    "hpa": "Kubernetes HPA",
    "croft-sendto": "croft scale, sendto",
    "croft-offered": "croft scale, offered load",
    "oracle": "oracle (the peak's replicas at the onset)",
}
SOURCES = ("real", "sim")
COLUMNS = ("shape", "arm", "source", "n", "seconds_above_mean", "failures_mean", "replica_seconds_mean")
ARM_OPTIONS = {
    "hpa": SimOptions(arm="hpa"),
    "croft-sendto": SimOptions(arm="croft", signal="sendto"),
    "croft-offered": SimOptions(arm="croft", signal="offered"),
    "oracle": SimOptions(arm="oracle"),
}
# The goals of croft on the offered load against the HPA (where the oracle keeps p95 under the
# objective), and against the oracle on every shape.
AGAINST_HPA = (("slo_seconds", 0.25), ("failures", 0.25), ("replica_seconds", 1.1))
WITHIN_ORACLE = 0.20
ORACLE_UNDER_S = 1.0
"""The oracle 'keeps p95 under the objective' on a shape when its mean seconds above it are at most
this: a stray second of a run is noise, not a shape no scaler can hold."""


@attrs.frozen
class Scored:
    """One scored burst run and what the boundary needs beside its scores: its shape, arm and bound,
    the first second (from the onset) whose p95 exceeded the objective, and its node's busiest
    second and its seconds saturated during the burst (None where the run did not record the node's
    CPU)."""

    score: scoring.Score
    record: RunRecord
    directory: Path
    shape_s: float
    arm: str
    source: str
    bound_s: float
    first_above_s: float | None
    node_peak_cores: float | None
    node_cores: int | None
    node_saturated_s: int | None
    downs_in_burst: tuple[tuple[float, int, int], ...] = ()
    """Each scale-down inside the burst: (seconds from the onset, from, to replicas)."""


@attrs.frozen
class Cell:
    """The runs of one (bound, shape, arm, source)."""

    bound_s: float
    shape_s: float
    arm: str
    source: str
    runs: tuple[Scored, ...]

    @property
    def n(self) -> int:
        return len(self.runs)

    def summary(self, key: str) -> scoring.Summary:
        return scoring.summarize([r.score for r in self.runs], key)

    def mean(self, key: str) -> float | None:
        return self.summary(key).mean

    def row(self) -> dict[str, str]:
        """boundary.csv's row: `COLUMNS`, means to 3 decimals."""
        out = {"shape": f"{self.shape_s:g}", "arm": self.arm, "source": self.source, "n": str(self.n)}
        for column, key in (
            ("seconds_above_mean", "slo_seconds"),
            ("failures_mean", "failures"),
            ("replica_seconds_mean", "replica_seconds"),
        ):
            value = self.mean(key)
            out[column] = "" if value is None else f"{value:.3f}"
        return out


def shape_of(record: RunRecord) -> float:
    return float(record.load.get("ramp_s", 0.0))


def bound_of(record: RunRecord) -> float:
    return float(record.load.get("max_connection_age_s", 0.0))


def arm_of(record: RunRecord, arms_by_prefix: Mapping[str, str]) -> str | None:
    """The run's arm: its `load.arm`, else that of the longest prefix of `arms_by_prefix` its name
    starts with; None for neither."""
    arm = record.load.get("arm")
    if isinstance(arm, str):
        return arm
    matching = [p for p in arms_by_prefix if record.run.startswith(p)]
    return arms_by_prefix[max(matching, key=len)] if matching else None


def first_above_s(record: RunRecord, rows: Iterable[Any], slo_ms: float) -> float | None:
    """Seconds from the onset of the first second at or after it whose p95 exceeds `slo_ms`."""
    onset = (record.burst_onset_ms or record.window_start_ms) / 1000
    for row in rows:
        if row.unix_s >= onset and row.p95_ms is not None and row.p95_ms > slo_ms:
            return float(row.unix_s - onset)
    return None


def scored_runs(
    data_dir: Path,
    source: str,
    arms_by_prefix: Mapping[str, str] | None = None,
    slo_ms: float = scoring.SLO_P95_MS,
) -> list[Scored]:
    """Every burst run of `data_dir` with an arm (`arm_of`), scored as `compare` scores it."""
    try:
        records = read_records(data_dir)
    except BadRunDir as exc:
        raise scoring.CompareError(str(exc)) from None
    out = []
    for record in records:
        arm = arm_of(record, arms_by_prefix or {})
        if arm is None or record.burst_onset_ms is None:
            continue
        run_dir = data_dir / record.run
        try:
            timeline = read_timeline(run_dir / "timeline.json")
            rows = read_workload(run_dir / "workload.csv")
        except (OSError, BadRunDir) as exc:
            raise scoring.CompareError(f"run {record.run} cannot be scored: {exc}") from None
        node = nodecpu.read(run_dir / nodecpu.FILE)
        burst = (record.burst_onset_ms / 1000, (record.burst_end_ms or record.window_end_ms) / 1000)
        downs = tuple(
            ((r.at_ms - record.burst_onset_ms) / 1000, r.from_replicas, r.to_replicas)
            for r in timeline.rescales
            if r.to_replicas < r.from_replicas and burst[0] * 1000 <= r.at_ms <= burst[1] * 1000
        )
        out.append(
            Scored(
                scoring.score(record, timeline, rows, arm, slo_ms),
                record,
                run_dir,
                shape_of(record),
                arm,
                source,
                bound_of(record),
                first_above_s(record, rows, slo_ms),
                nodecpu.peak_cores(node, *burst) if node else None,
                node[0].cores if node else None,
                nodecpu.saturated_seconds(node, *burst) if node else None,
                downs,
            )
        )
    return out


def cells(runs: Iterable[Scored]) -> list[Cell]:
    """`runs` grouped by (bound, shape, arm, source), in that order (arms and sources as `ARMS` and
    `SOURCES` list them)."""
    groups: dict[tuple[float, float, str, str], list[Scored]] = {}
    for run in runs:
        groups.setdefault((run.bound_s, run.shape_s, run.arm, run.source), []).append(run)

    def order(key: tuple[float, float, str, str]) -> tuple[float, float, int, int]:
        bound, shape, arm, source = key
        return (-bound, shape, ARMS.index(arm) if arm in ARMS else len(ARMS), SOURCES.index(source))

    return [Cell(*key, tuple(groups[key])) for key in sorted(groups, key=order)]


def sim_run_name(bound_s: float, arm: str, shape_s: float, seed: int) -> str:
    return f"sim-age{bound_s:g}-{arm}-ramp{shape_s:g}-{seed}"


def simulate_grid(
    app: apps.App,
    plan: apps.BurstPlan,
    data_dir: Path,
    seeds: Sequence[int],
    shapes: Sequence[float],
    bounds: Sequence[float],
    arms: Sequence[str] = ARMS,
    tuning: answer.Tuning | None = None,
) -> int:
    """Simulate every (bound, shape, arm, seed) of `plan`'s burst into `data_dir` as run
    directories whose runs.jsonl lines say their arm, shape and bound; returns how many."""
    tuning = tuning or answer.Tuning()
    made = 0
    for bound in bounds:
        sim_app = apps.with_connection_age(tuning.app(app), bound).sim_app()
        for shape in shapes:
            profile = plan.profile(shape)
            for arm in arms:
                options = tuning.options(ARM_OPTIONS[arm])
                load = {**profile.meta(), "arm": arm, "max_connection_age_s": bound}
                for seed in seeds:
                    name = sim_run_name(bound, arm, shape, seed)
                    result = simulate(
                        name, sim_app, profile, attrs.evolve(options, seed=seed), load, profile.burst_s
                    )
                    write_run(data_dir, result)
                    made += 1
    return made


def write_csv(path: Path, table: Sequence[Cell]) -> Path:
    """boundary.csv: one row per shape, arm and source of `table`, `COLUMNS` exactly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for cell in table:
            writer.writerow(cell.row())
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as src:
        return list(csv.DictReader(src))


def _node_text(cell: Cell) -> str:
    peaks = [r.node_peak_cores for r in cell.runs if r.node_peak_cores is not None]
    cores = next((r.node_cores for r in cell.runs if r.node_cores), None)
    saturated = sum(r.node_saturated_s or 0 for r in cell.runs)
    if not peaks:
        return "-"
    return f"{max(peaks):.2f} of {cores} cores, {saturated} s saturated"


def table_text(table: Sequence[Cell]) -> str:
    """One line per cell: mean ± sd [95 % CI] of seconds above the objective, failures and
    replica-seconds, and (real runs) the node's busiest second during the burst, of all its runs,
    and the seconds it was saturated in them (nodecpu.SATURATED_SHARE)."""
    heads = (
        f"{'shape':>6} {'arm':14} {'source':6} {'n':>3}  {'s with p95 > 500 ms':>28}  "
        f"{'failed + timed out':>30}  {'replica-seconds':>30}  node CPU peak"
    )
    lines = [heads]
    for cell in table:
        lines.append(
            f"{cell.shape_s:>5g}s {cell.arm:14} {cell.source:6} {cell.n:>3}  "
            f"{cell.summary('slo_seconds').ci_text():>28}  {cell.summary('failures').ci_text():>30}  "
            f"{cell.summary('replica_seconds').ci_text():>30}  {_node_text(cell)}"
        )
    return "\n".join(lines)


def _cell(table: Sequence[Cell], shape: float, arm: str, source: str) -> Cell | None:
    return next((c for c in table if c.shape_s == shape and c.arm == arm and c.source == source), None)


def _facts(cell: Cell) -> str:
    """What an arm did on a shape, for the reasons: when it scaled, when its first pod was Ready,
    its peak, when p95 first went above the objective, and how long it stayed there (means)."""

    def mean(values: Sequence[float | None]) -> str:
        present = [v for v in values if v is not None]
        if not present:
            return "never"
        text = f"{statistics.fmean(present):.1f} s"
        return text if len(present) == len(values) else f"{text} ({len(values) - len(present)} never)"

    peak = cell.mean("peak_replicas")
    above = cell.mean("slo_seconds")
    return (
        f"{cell.arm}: first scale-up {mean([r.score.first_scale_up_s for r in cell.runs])}, first new pod "
        f"Ready {mean([r.score.first_ready_s for r in cell.runs])}, peak {peak or 0:.1f} replicas, p95 above "
        f"from {mean([r.first_above_s for r in cell.runs])} for {above or 0:.1f} s"
    )


def capacity_passed_s(plan: apps.BurstPlan, shape: float, capacity_rps: float) -> float | None:
    """Seconds from the onset at which the burst of `plan` at `shape` first asks for more than
    `capacity_rps` (None: never)."""
    profile = plan.profile(shape)
    assert profile.burst_s is not None
    onset, end = profile.burst_s
    for tenth in range(int((end - onset) * 10) + 1):
        if profile.rate_at(onset + tenth / 10) > capacity_rps:
            return tenth / 10
    return None


def why(arm: Cell, hpa: Cell | None, oracle: Cell | None, one_pod_passed_s: float | None) -> list[str]:
    """Reasons, from the runs, why `arm` missed a goal: what it, the HPA and the oracle did."""
    out = []
    oracle_ready = None if oracle is None else oracle.mean("first_ready_s")
    if oracle is not None and (oracle.mean("slo_seconds") or 0.0) > ORACLE_UNDER_S:
        when = (
            ""
            if one_pod_passed_s is None
            else f", and the load passes one pod's capacity {one_pod_passed_s:.1f} s after it"
        )
        oracle_text = "never" if oracle_ready is None else f"{oracle_ready:.1f} s"
        out.append(
            f"no reactive scaler keeps p95 under the objective on this shape: the oracle's first new pod is "
            f"Ready {oracle_text} after the onset{when}"
        )
    ready = arm.mean("first_ready_s")
    if oracle_ready is not None and (ready is None or ready > oracle_ready + 2.0):
        out.append(
            "its new pods came later than the oracle's "
            f"({'never' if ready is None else f'{ready:.1f} s'} against {oracle_ready:.1f} s after the onset)"
        )
    peak, needed = arm.mean("peak_replicas"), None if oracle is None else oracle.mean("peak_replicas")
    if peak is not None and needed is not None and peak < needed - 0.5:
        out.append(f"it asked for fewer replicas than the peak needs ({peak:.1f} against {needed:.1f})")
    if not out and oracle is not None and ready is not None and oracle_ready is not None:
        out.append(
            "its pods were Ready as early as the oracle's, yet p95 stayed above longer: the load stayed on "
            "the pods that were up at the onset"
        )
    downs = [(r.record.run, d) for r in arm.runs for d in r.downs_in_burst]
    if downs:
        runs = len({run for run, _ in downs})
        shown = ", ".join(f"{a}->{b} at {t:.0f} s" for _, (t, a, b) in downs[:3])
        out.append(
            f"it scaled down inside the burst in {runs} of {arm.n} runs ({shown}"
            + (", ..." if len(downs) > 3 else "")
            + "): the replicas asked for to drain the backlog at the onset, given back after the scale-down "
            "stabilization"
        )
    facts = [_facts(c) for c in (arm, hpa, oracle) if c is not None]
    return [*out, *facts]


def _ratio_text(key: str, a: float | None, b: float | None, most: float) -> tuple[str, bool | None]:
    if a is None or b is None or not math.isfinite(a):
        return f"{scoring.LABELS[key]} n/a", None
    if a == 0:
        met = b == 0
        return f"{scoring.LABELS[key]} {b:.1f} against the HPA's 0 ({'met' if met else 'not met'})", met
    ratio = b / a
    met = ratio <= most
    return f"{scoring.LABELS[key]} {ratio:.3g}x ({'met' if met else 'not met'}, <= {most:g}x)", met


def goals(
    table: Sequence[Cell], plan: apps.BurstPlan | None, one_pod_rps: float | None, arm: str = "croft-offered"
) -> str:
    """Per shape and source, `arm` against the HPA (the goals apply where the oracle keeps p95
    under the objective) and against the oracle (on every shape), met or not, and why not."""
    lines = []
    shapes = sorted({c.shape_s for c in table})
    for shape in shapes:
        oracle = _cell(table, shape, "oracle", "sim")
        held = oracle is not None and (oracle.mean("slo_seconds") or 0.0) <= ORACLE_UNDER_S
        for source in SOURCES:
            mine, hpa = _cell(table, shape, arm, source), _cell(table, shape, "hpa", source)
            if mine is None:
                continue
            head = f"shape {shape:g} s, {source}: {arm}"
            parts, missed = [], False
            if hpa is not None:
                for key, most in AGAINST_HPA:
                    text, met = _ratio_text(key, hpa.mean(key), mine.mean(key), most)
                    parts.append(text)
                    missed |= held and met is False
                downs = sum(r.score.scale_downs_in_burst for r in mine.runs)
                parts.append(
                    f"scale-downs inside the burst {downs} ({'met' if downs == 0 else 'not met'}, none)"
                )
                missed |= held and downs > 0
                scope = (
                    "the goals apply: the oracle keeps p95 under the objective"
                    if held
                    else ("the goals do not apply: the oracle does not keep p95 under the objective")
                )
                lines.append(f"{head} against the HPA ({scope}): " + "; ".join(parts))
            if oracle is not None:
                mine_s, oracle_s = mine.mean("slo_seconds") or 0.0, oracle.mean("slo_seconds") or 0.0
                met = mine_s <= oracle_s * (1 + WITHIN_ORACLE)
                missed |= not met
                lines.append(
                    f"{head} against the oracle: {mine_s:.1f} s above the objective against {oracle_s:.1f} s "
                    f"({'met' if met else 'not met'}, at most {1 + WITHIN_ORACLE:g}x the oracle's)"
                )
            if missed:
                passed = None
                if plan is not None and one_pod_rps is not None:
                    passed = capacity_passed_s(plan, shape, one_pod_rps)
                lines += [f"    why: {reason}" for reason in why(mine, hpa, oracle, passed)]
    return "\n".join(lines)
