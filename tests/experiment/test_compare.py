"""compare on recorded run directories whose scores were worked out by hand (numbers below).

The files are written here as text, in the run-directory format, not through croft.runs.rundir, so
that a change of the format breaks these tests rather than passing silently.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import scoring


def _run(
    data: Path,
    name: str,
    window: tuple[int, int],
    burst: tuple[int, int] | None,
    timeline: dict,
    p95: list,
    failures: list,
    timeouts: list,
) -> None:
    load = {"mode": "open-loop", "profile": "burst" if burst else "constant", "scale": 0.5}
    if burst:
        load["burst"] = {"onset_ms": burst[0], "end_ms": burst[1]}
    record = {
        "run": name,
        "app": "webapp",
        "namespace": "croft-exp",
        "deployment": "webapp",
        "load": load,
        "autoscaler": "croft" if name.startswith("duo") else "hpa",
        "window": {"start_ms": window[0], "end_ms": window[1]},
        "containers": [
            {"pod": p["name"], "container_id": c} for p in timeline["pods"] for c in p["container_ids"]
        ],
    }
    with (data / "runs.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")
    run_dir = data / name
    run_dir.mkdir(parents=True)
    (run_dir / "timeline.json").write_text(
        json.dumps(
            {
                "namespace": "croft-exp",
                "deployment": "webapp",
                "start_ms": window[0],
                "end_ms": window[1],
                **timeline,
            }
        )
    )
    lines = ["second,unix_s,target_rps,achieved_rps,ok,p50_ms,p95_ms,p99_ms,failures,timeouts"]
    for s, (p, f, t) in enumerate(zip(p95, failures, timeouts, strict=True)):
        cell = "" if p is None else str(p)
        lines.append(f"{s},{window[0] / 1000 + s},10,10,{10 - f - t},{cell},{cell},{cell},{f},{t}")
    (run_dir / "workload.csv").write_text("\n".join(lines) + "\n")


def _pod(name, created, ready):
    return {
        "name": name,
        "created_ms": created,
        "started_ms": None,
        "ready_ms": ready,
        "deleted_ms": None,
        "container_ids": [f"{abs(hash(name)):064x}"[:64]],
    }


def _rescale(at, a, b):
    return {"at_ms": at, "from": a, "to": b, "source": "hpa", "reason": ""}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    web = tmp_path / "web"
    web.mkdir()
    # hpa-1: window 1000-1100 s, burst 1030-1060 s.
    #   up 1->2 at 1010 and back at 1015 (before the onset: not the first scale-up), up 1->2 at 1045
    #   (first scale-up 15 s), 2->4 at 1050 (peak 4), 4->3 at 1058 (inside the burst: 1 scale-down),
    #   3->2 at 1090 (after it: not counted).
    #   replica-seconds: 10x1 + 5x2 + 30x1 + 5x2 + 8x4 + 32x3 + 10x2 = 208.
    #   pods created after the onset: p-a Ready at 1049 (first new pod Ready 19 s), p-b 1052.5,
    #   p-c never; p-pre (created before the onset) does not count.
    #   p95 100, 600, 500, 1200, - ms: 2 seconds above 500 (500 itself is not above).
    #   failures 0+1+0+2+0 and timeouts 0+0+3+0+1: 7.
    _run(
        web,
        "hpa-1",
        (1_000_000, 1_100_000),
        (1_030_000, 1_060_000),
        {
            "initial_replicas": 1,
            "rescales": [
                _rescale(1_010_000, 1, 2),
                _rescale(1_015_000, 2, 1),
                _rescale(1_045_000, 1, 2),
                _rescale(1_050_000, 2, 4),
                _rescale(1_058_000, 4, 3),
                _rescale(1_090_000, 3, 2),
            ],
            "pods": [
                _pod("p-old", 990_000, 992_000),
                _pod("p-pre", 1_010_500, 1_013_000),
                _pod("p-a", 1_045_400, 1_049_000),
                _pod("p-b", 1_050_300, 1_052_500),
                _pod("p-c", 1_050_300, None),
            ],
        },
        [100, 600, 500, 1200, None],
        [0, 1, 0, 2, 0],
        [0, 0, 3, 0, 1],
    )
    # hpa-2: never scaled: first_* never, peak 1, 100 replica-seconds; p95 700 x3: 3 s; 0 failures.
    _run(
        web,
        "hpa-2",
        (2_000_000, 2_100_000),
        (2_030_000, 2_060_000),
        {"initial_replicas": 1, "rescales": [], "pods": [_pod("q-old", 1_990_000, 1_991_000)]},
        [700, 700, 700],
        [0, 0, 0],
        [0, 0, 0],
    )
    # duo-1: 1->3 at 3034 (4 s); two pods Ready at 3037 (7 s); 34x1 + 66x3 = 232; no slow second.
    _run(
        web,
        "duo-1",
        (3_000_000, 3_100_000),
        (3_030_000, 3_060_000),
        {
            "initial_replicas": 1,
            "rescales": [_rescale(3_034_000, 1, 3)],
            "pods": [
                _pod("r-old", 2_990_000, 2_991_000),
                _pod("r-a", 3_034_200, 3_037_000),
                _pod("r-b", 3_034_200, 3_037_500),
            ],
        },
        [100, 200],
        [0, 0],
        [0, 0],
    )
    # Not scored: a constant run with a matching prefix, and a burst run of another prefix.
    _run(
        web,
        "hpa-const",
        (4_000_000, 4_100_000),
        None,
        {"initial_replicas": 1, "rescales": [], "pods": []},
        [900],
        [0],
        [0],
    )
    _run(
        web,
        "other-1",
        (5_000_000, 5_100_000),
        (5_030_000, 5_060_000),
        {"initial_replicas": 1, "rescales": [], "pods": []},
        [900],
        [0],
        [0],
    )
    return tmp_path


def test_every_score_matches_the_hand_worked_numbers(data):
    scores = {s.run: s for s in scoring.score_prefixes(data / "web", ["hpa-", "duo-"])}
    assert set(scores) == {"hpa-1", "hpa-2", "duo-1"}
    one, two, duo = scores["hpa-1"], scores["hpa-2"], scores["duo-1"]
    assert (
        one.first_scale_up_s,
        one.first_ready_s,
        one.peak_replicas,
        one.scale_downs_in_burst,
        one.slo_seconds,
        one.failures,
        one.replica_seconds,
    ) == (15.0, 19.0, 4, 1, 2, 7, 208.0)
    assert (
        two.first_scale_up_s,
        two.first_ready_s,
        two.peak_replicas,
        two.scale_downs_in_burst,
        two.slo_seconds,
        two.failures,
        two.replica_seconds,
    ) == (None, None, 1, 0, 3, 0, 100.0)
    assert (
        duo.first_scale_up_s,
        duo.first_ready_s,
        duo.peak_replicas,
        duo.scale_downs_in_burst,
        duo.slo_seconds,
        duo.failures,
        duo.replica_seconds,
    ) == (4.0, 7.0, 3, 0, 0, 0, 232.0)
    assert (one.arm, duo.arm) == ("hpa-", "duo-")


def test_mean_and_sd_per_arm(data):
    scores = scoring.score_prefixes(data / "web", ["hpa-", "duo-"])
    hpa = [s for s in scores if s.arm == "hpa-"]
    assert scoring.summarize(hpa, "first_scale_up_s").text() == "15.0 ± 0.0 (1 never)"
    assert scoring.summarize(hpa, "peak_replicas").text() == "2.5 ± 2.1"  # sd of 4 and 1 = 2.12
    assert scoring.summarize(hpa, "replica_seconds").text() == "154.0 ± 76.4"  # sd of 208, 100
    assert scoring.summarize(hpa, "slo_seconds").text() == "2.5 ± 0.7"
    assert scoring.summarize(hpa, "failures").text() == "3.5 ± 4.9"
    table = scoring.table(scores, ["hpa-", "duo-"])
    line = next(x for x in table.splitlines() if x.startswith("replica-seconds"))
    assert "154.0 ± 76.4" in line and "232.0 ± 0.0" in line and line.rstrip().endswith("1.51")  # 232 / 154


def test_run_py_compare_writes_the_rows_and_prints_the_table(data):
    run_py = Path(scoring.__file__).with_name("run.py")
    out = subprocess.run(
        [sys.executable, str(run_py), "compare", "--prefix", "hpa-", "duo-", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "hpa- (n=2)" in out.stdout and "duo- (n=1)" in out.stdout and "3 runs scored" in out.stdout
    rows = list(csv.DictReader((data / "web" / "compare.csv").read_text().splitlines()))
    assert [r["run"] for r in rows] == ["hpa-1", "hpa-2", "duo-1"]
    assert rows[1]["first_scale_up_s"] == "" and rows[0]["replica_seconds"] == "208.0"


def test_no_matching_burst_run_is_one_sentence(data):
    run_py = Path(scoring.__file__).with_name("run.py")
    out = subprocess.run(
        [sys.executable, str(run_py), "compare", "--prefix", "nope-", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("run.py: no burst run in ") and "Traceback" not in out.stderr


def test_a_damaged_run_directory_is_named(data):
    (data / "web" / "duo-1" / "workload.csv").write_text("second,unix_s\n0,x\n")
    with pytest.raises(scoring.CompareError, match=r"run duo-1 cannot be scored: .*workload.csv:2"):
        scoring.score_prefixes(data / "web", ["duo-"])
