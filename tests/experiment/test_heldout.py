"""heldout.py: the simulator fitted on one half of the real runs and checked on the other. The
"real" runs here are the simulator's own with a known accept_cpu_ms, written as real run directories:
the fit must find that value on its half, and the other half is checked against the fitted model."""

from __future__ import annotations

import math
import shutil
import statistics
from pathlib import Path

import attrs
import pytest

import answer
import apps
import boundary
import heldout
import scoring
from croft.runs.rundir import append_record, read_records
from croft.sim import simulate, write_run

PLAN = apps.BurstPlan(base_rps=2.5, peak_rps=37.5, before_s=30, hold_s=60, after_s=30)


def _known_real_runs(root: Path, accept_cpu_ms: float) -> list[boundary.Scored]:
    """4 runs of the HPA and 4 of croft on sendto at the node's old sizing (saturating 250m pods,
    where the acceptor decides what pods answer), simulated with `accept_cpu_ms`, as real runs."""
    app = apps.load("webapp-node-250m")
    tuning = answer.Tuning(connections="keep-alive", record_poll_s=1, accept_cpu_ms=accept_cpu_ms)
    tuning = tuning.over(answer.Tuning.of_cluster(app.cluster))
    raw, real = root / "raw", root / "real"
    profile = PLAN.profile(0.0)
    for arm in ("hpa", "croft-sendto"):
        options = tuning.options(boundary.ARM_OPTIONS[arm])
        load = {**profile.meta(), "arm": arm, "max_connection_age_s": 0.0}
        for seed in range(101, 105):
            options = attrs.evolve(options, seed=seed)
            result = simulate(
                f"real-{arm}-{seed}", tuning.app(app).sim_app(), profile, options, load, profile.burst_s
            )
            write_run(raw, result)
    shutil.copytree(raw, real, ignore=shutil.ignore_patterns("runs.jsonl"))
    for record in read_records(raw):
        append_record(real, attrs.evolve(record, simulated=None))
    return boundary.scored_runs(real, "real")


@pytest.mark.parametrize("accept_cpu_ms", [0.0, 5.0])
def test_the_fit_finds_the_parameter_the_runs_were_made_with_and_checks_the_other_half(
    tmp_path: Path, accept_cpu_ms: float
) -> None:
    runs = _known_real_runs(tmp_path, accept_cpu_ms)
    app = apps.load("webapp-node-250m")
    tuning = answer.Tuning(connections="keep-alive", record_poll_s=1).over(
        answer.Tuning.of_cluster(app.cluster)
    )
    fitted, text = heldout.fit_and_check(runs, app, tuning, 2, tmp_path / "work")
    assert fitted is not None and fitted.accept_cpu_ms == accept_cpu_ms, text
    assert [v for v, _ in fitted.tried] == list(heldout.GRID_MS)
    assert text.startswith("the simulator fitted on 4 real runs and checked on 4 others")
    checked = [line for line in text.splitlines() if line.startswith("    0s     0s ")]
    assert len(checked) == 8  # 2 arms x 4 scores
    assert any("of the held-out real runs on " in line for line in text.splitlines())


def test_each_group_is_split_in_the_order_it_ran(tmp_path: Path) -> None:
    runs = _known_real_runs(tmp_path, 20.0)
    fit, held = heldout.split(runs)
    assert len(fit) == len(held) == 4
    for arm in ("hpa", "croft-sendto"):
        ordered = sorted((r for r in runs if r.arm == arm), key=lambda r: r.record.window_start_ms)
        assert [r.record.run for r in fit if r.arm == arm] == [r.record.run for r in ordered[0::2]]
    one, none = heldout.split(runs[:1])
    assert len(one) == 1 and none == []


def test_why_names_a_bias_and_the_real_runs_own_spread(tmp_path: Path) -> None:
    held = heldout.split(_known_real_runs(tmp_path, 20.0))[1]
    group = heldout.group_of(held[0])
    values = [r.score.slo_seconds for r in held if heldout.group_of(r) == group]
    assert len(values) == 2 and all(v is not None and v > 0 for v in values)
    mean = statistics.fmean(values)
    found = [
        heldout.Error(group, "slo_seconds", mean, mean * 0.5, -0.5),
        heldout.Error(group, "peak_replicas", 3.0, 3.3, 0.1),
        heldout.Error(group, "first_scale_up_s", 0.0, 2.0, None),
    ]
    lines = heldout.why_text(held, found).splitlines()
    assert len(lines) == 2  # peak replicas is within the goal: no why
    own = statistics.stdev(values) / math.sqrt(2) / mean
    label = scoring.LABELS["slo_seconds"]
    assert lines[1] == (
        f"  why, {label}: 1 of 1 cells off; simulated below the real in 1 of 1 (mean error -50%); "
        f"the held-out real mean's own standard error is 20% of it or more in {int(own >= 0.2)} of 1 "
        f"(range {own:.0%}-{own:.0%})"
    )
    assert lines[0].startswith(f"  why, {scoring.LABELS['first_scale_up_s']}: 1 of 1 cells off; ")
    assert lines[0].endswith("1 with a real mean of 0 or none (no relative error)")
    assert heldout.why_text(held, found[1:2]) == ""
