"""real.py's plan, without the node: the grid interleaved, the runs a resumed grid still needs (from
what OUT's runs.jsonl holds), the time estimate printed first, and croft scale's options per arm."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest

import apps
import real
from croft.runs.rundir import RunRecord, append_record

REAL_PY = Path(real.__file__)


def test_the_grid_runs_every_cell_once_a_repeat_interleaved() -> None:
    planned = real.grid((0.0, 120.0), (10.0, 0.0), ("hpa", "croft-offered"), 2)
    assert len(planned) == 16
    first = planned[:8]
    assert [p.repeat for p in first] == [1] * 8 and [p.repeat for p in planned[8:]] == [2] * 8
    assert [(p.shape_s, p.bound_s, p.arm) for p in first[:4]] == [
        (0.0, 10.0, "hpa"), (0.0, 10.0, "croft-offered"), (0.0, 0.0, "hpa"), (0.0, 0.0, "croft-offered"),
    ]  # fmt: skip


def test_a_resumed_grid_runs_only_what_each_cell_lacks(tmp_path: Path) -> None:
    web = tmp_path / "web"
    for arm, shape, bound in [("hpa", 0.0, 10.0), ("hpa", 0.0, 10.0), ("croft-offered", 120.0, 0.0)]:
        load = {"arm": arm, "ramp_s": shape, "max_connection_age_s": bound}
        append_record(web, RunRecord(f"r-{arm}", "a", "n", "d", "hpa", 0, 1, load))
    append_record(web, RunRecord("unlabelled", "a", "n", "d", "hpa", 0, 1, {}))
    have = real.done(tmp_path)
    assert have == collections.Counter({(10.0, 0.0, "hpa"): 2, (0.0, 120.0, "croft-offered"): 1})
    planned = real.grid((0.0, 120.0), (10.0, 0.0), ("hpa", "croft-offered"), 3)
    todo = real.remaining(planned, have)
    assert len(todo) == len(planned) - 3
    assert [p.repeat for p in todo if p.cell == (10.0, 0.0, "hpa")] == [3]
    assert [p.repeat for p in todo if p.cell == (0.0, 120.0, "croft-offered")] == [2, 3]
    assert real.done(tmp_path / "nothing") == collections.Counter()


def test_the_estimate_is_each_run_s_profile_and_overhead_and_the_setup() -> None:
    plan = apps.load("webapp-node-200m").burst
    assert plan is not None
    # 30 s warm-up + 60 before + ramp + 120 held + 60 after
    assert real.run_seconds(plan, 0.0) == 270 + real.RUN_OVERHEAD_S
    assert real.run_seconds(plan, 120.0) == 390 + real.RUN_OVERHEAD_S
    todo = real.grid((0.0, 120.0), (10.0,), real.ARMS, 5)
    assert real.estimate_s(todo, plan, False) == real.SETUP_S + 15 * (295 + 415)
    assert real.estimate_s([], plan, True) > 0 and real.estimate_s([], plan, False) == 0


def test_plan_prints_the_plan_and_its_estimate_and_runs_nothing(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(REAL_PY), "--out", str(tmp_path / "out"), "--plan", "--shapes", "0,120",
         "--bounds", "10"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert (
        lines[0] == "real.py: webapp-node-200m, 12 -> 60 req/s, 30 runs planned, 30 to run (0 in OUT already)"
    )
    assert lines[1] == "  shape 0 s: 15 runs of 4.9 min (3 bound x arm cells), 1.23 h"
    assert lines[-1].startswith("  estimate: 3.08 h of node time (11105 s: setup 300 s, calibration")
    assert not (tmp_path / "out").exists()


def test_the_whole_default_grid_is_what_the_report_says() -> None:
    out = subprocess.run(
        [sys.executable, str(REAL_PY), "--out", "/nonexistent/out", "--plan"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("real.py: webapp-node-200m, 12 -> 60 req/s, 150 runs planned")
    assert "estimate: 14.29 h of node time" in out.stdout


@pytest.mark.parametrize(
    ("arm", "wanted"),
    [
        ("hpa", ("--interval", "2", "--stabilization-secs", "30")),
        ("croft-sendto", ("--interval", "2", "--stabilization-secs", "30")),
        ("croft-offered", ("--interval", "2", "--stabilization-secs", "30", "--signal", "tcp_data_segments",
                           "--calls-per-request", "1")),
    ],
)  # fmt: skip
def test_croft_scale_gets_the_cluster_s_interval_and_the_hpa_s_stabilization(arm: str, wanted: tuple) -> None:
    assert real.croft_args(apps.load("webapp-node-200m"), arm, real.OFFERED_ARGS) == wanted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--arms", "hpa,nope"), "real.py: --arms 'hpa,nope': choose among"),
        (("--shapes", "x"), "real.py: --shapes 'x' is not a comma-separated list"),
        (("--app", "webapp"), "real.py: --app webapp has no burst or pod sizing"),
    ],
)
def test_mistakes_are_one_sentence(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = subprocess.run(
        [sys.executable, str(REAL_PY), "--out", str(tmp_path), "--plan", *args],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and out.stderr.strip().startswith(message) and "Traceback" not in out.stderr
