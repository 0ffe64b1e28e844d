"""`run.py answer --real`: real run directories (here written by hand in the run-directory format)
beside the simulator's runs of the same offered load, each labelled, with the simulation's error;
the pod delays measured on the real timelines become the simulator's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import apps
import scoring
import versus
from croft.runs.load import SecondStats
from croft.runs.rundir import (
    PodLife,
    Rescale,
    RunRecord,
    Timeline,
    append_record,
    write_timeline,
    write_workload,
)

RUN_PY = Path(apps.__file__).with_name("run.py")
START_MS = 1_800_000_000_000
ONSET_S, END_S, LENGTH_S = 20, 40, 60


def _real_run(data: Path, name: str, autoscaler: str, up_at_s: float, p95_high_s: int) -> None:
    """A 60 s burst run (5 -> 30 req/s from 20 s to 40 s): one scale-up 1 -> 3 at `up_at_s` after
    the onset, its two pods created 0.5 s later, running 2 s after that, Ready 1 s after running;
    p95 above 500 ms for `p95_high_s` seconds from the onset."""
    onset_ms = START_MS + ONSET_S * 1000
    up_ms = onset_ms + round(up_at_s * 1000)
    pods = [PodLife("web-0", START_MS - 60_000, START_MS - 58_000, START_MS - 57_000, None, ("a" * 64,))]
    for i in (1, 2):
        created = up_ms + 500
        pods.append(PodLife(f"web-{i}", created, created + 2000, created + 3000, None, (f"{i}" * 64,)))
    timeline = Timeline(
        "croft-exp",
        "webapp",
        START_MS,
        START_MS + LENGTH_S * 1000,
        1,
        (Rescale(up_ms, 1, 3, autoscaler),),
        (),
        tuple(pods),
    )
    rows = []
    for s in range(LENGTH_S):
        rate = 30 if ONSET_S <= s < END_S else 5
        high = ONSET_S <= s < ONSET_S + p95_high_s
        p95 = 900.0 if high else 60.0
        rows.append(SecondStats(s, START_MS / 1000 + s, rate, rate, rate, 55.0, p95, p95, 0, 0))
    run_dir = data / name
    run_dir.mkdir(parents=True)
    write_workload(run_dir / "workload.csv", rows)
    write_timeline(run_dir / "timeline.json", timeline)
    record = RunRecord(
        name, "webapp", "croft-exp", "webapp", autoscaler, START_MS, START_MS + LENGTH_S * 1000,
        {"mode": "open-loop", "profile": "burst"}, onset_ms, START_MS + END_S * 1000,
        tuple((p.name, p.container_ids[0]) for p in pods),
    )  # fmt: skip
    append_record(data, record)


@pytest.fixture
def real(tmp_path: Path) -> Path:
    data = tmp_path / "real" / "web"
    _real_run(data, "hpa-20261203T040000Z", "hpa", 20.0, 24)
    _real_run(data, "hpa-20261203T041000Z", "hpa", 16.0, 20)
    _real_run(data, "duo-20261203T042000Z", "croft", 4.0, 8)
    _real_run(data, "duo-20261203T043000Z", "croft", 6.0, 10)
    return data


def run_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN_PY), *args], capture_output=True, text=True, timeout=120)


def test_answer_real_reports_real_and_simulated_runs_each_labelled(real: Path, tmp_path: Path) -> None:
    sim = tmp_path / "sim"
    out = run_py(
        "answer", "--spec-bursts", "--real", str(real), "--prefix", "hpa-", "duo-",
        "--sim-signal", "duo-=offered",
        "--seeds", "2", "--data", str(sim),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "arm hpa- (hpa)" in text and "arm duo- (croft scale on offered)" in text
    assert text.count("real (node), n=2") == 2 and text.count("simulated, n=2") == 2
    # The real column is compare's score of the real runs: first scale-up 18.0 ± 2.8 s for the HPA.
    hpa_line = next(line for line in text.splitlines() if line.startswith("onset -> first scale-up, s"))
    assert "18.0 ± 2.8" in hpa_line
    assert "duo- real (node) against the HPA: seconds with p95 > 500 ms 0.409x (not met, <= 0.25x)" in text
    assert "duo- simulated against the HPA: " in text
    # Delays measured on the real timelines: 0.5 s to the pod, 2 s to running, 1 s to Ready.
    assert "scale-up -> pod created: 0.5 ± 0.0 s (range 0.5-0.5, n=8)" in text
    assert "pod created -> containers running (start delay): 2.0 ± 0.0 s" in text
    assert "running -> Ready (Ready delay): 1.0 ± 0.0 s" in text
    records = [json.loads(line) for line in (sim / "web" / "runs.jsonl").read_text().splitlines()]
    assert {r["run"] for r in records} == {"sim-hpa-1", "sim-hpa-2", "sim-duo-1", "sim-duo-2"}
    for record in records:
        simulated = record["simulated"]["app"]
        # drawn from the values measured (8 pods), not from a range
        assert simulated["pod_start_s"] == [2.0] * 8 and simulated["readiness_s"] == [1.0] * 8
        assert simulated["sampled_delays"] == ["controller_delay_s", "pod_start_s", "readiness_s"]
        assert record["load"]["real_run"].startswith(record["run"].removeprefix("sim-").rsplit("-", 1)[0])
    # Each simulated run replays its real run's offered load and burst.
    for record in records:
        assert record["load"]["burst"]["onset_ms"] - record["window"]["start_ms"] == ONSET_S * 1000
    scores = scoring.score_prefixes(sim / "web", ["sim-hpa-", "sim-duo-"])
    assert all(s.first_ready_s is not None for s in scores if s.arm == "sim-duo-")


def test_given_delays_win_over_the_measured_ones(real: Path, tmp_path: Path) -> None:
    out = run_py(
        "answer", "--spec-bursts", "--real", str(real / "duo-20261203T042000Z"), "--prefix", "duo-",
        "--seeds", "1",
        "--pod-start-secs", "4,6", "--data", str(tmp_path / "sim"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "n=2" in out.stdout  # one real run given: its two new pods
    assert "simulated with 4-6 s as given" in out.stdout
    record = json.loads((tmp_path / "sim" / "web" / "runs.jsonl").read_text())
    assert record["simulated"]["app"]["pod_start_s"] == [4.0, 6.0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--real", "REAL"), "run.py: --real needs --prefix: one prefix per arm, the HPA's first"),
        (("--real", "REAL", "--prefix", "nope-"), "run.py: no real burst run in "),
        (("--real", "NOWHERE", "--prefix", "hpa-"), "run.py: --real "),
        (
            ("--real", "REAL", "--prefix", "hpa-", "--sim-signal", "hpa-=x"),
            "run.py: --sim-signal 'hpa-=x' is not",
        ),
        (("--pod-start-secs", "3,1"), "run.py: --pod-start-secs '3,1' is not seconds"),
    ],
)
def test_mistakes_are_one_sentence(real: Path, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    argv = [a.replace("REAL", str(real)).replace("NOWHERE", str(tmp_path / "none")) for a in args]
    out = run_py("answer", "--spec-bursts", *argv, "--seeds", "1", "--data", str(tmp_path / "sim"))
    assert out.returncode == 2, out.stdout
    assert out.stderr.startswith(message) and "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_simulated_runs_are_not_taken_for_real_ones(tmp_path: Path) -> None:
    sim = tmp_path / "sim"
    assert run_py("simulate", "--seeds", "1", "--data", str(sim)).returncode == 0
    with pytest.raises(scoring.CompareError, match="is simulated, not a real run"):
        versus.real_runs([sim / "web"], ["sim-"])


def test_relative_error_is_against_the_real_mean() -> None:
    assert versus.relative_error(12.0, 10.0) == pytest.approx(0.2)
    assert versus.relative_error(8.0, 10.0) == pytest.approx(-0.2)
    assert versus.relative_error(1.0, 0.0) is None and versus.relative_error(None, 3.0) is None


def test_answer_real_reads_a_real_capture_and_takes_the_node_s_settings(tmp_path: Path) -> None:
    """fixtures/research-run: both arms on the real test node (a real HPA on the metrics stand-in,
    croft scale reading the collector pod). The real column is `compare`'s; the node's settings
    (a pod's share of its CPU, the request the HPA divides by, the controllers' periods) reach the
    simulated runs."""
    fixture = Path(apps.__file__).resolve().parents[3] / "fixtures" / "research-run" / "web"
    sim = tmp_path / "sim"
    out = run_py(
        "answer", "--spec-bursts", "--real", str(fixture), "--prefix", "hpa-", "duo-", "--seeds", "2",
        "--data", str(sim),
        "--cpu-share", "0.4", "--cpu-request-cores", "1", "--scaler-interval-secs", "1",
        "--hpa-sync-secs", "5", "--metric-resolution-secs", "10", "--hpa-downscale-stabilization-secs", "30",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    scores = scoring.score_prefixes(fixture, ["hpa-", "duo-"])
    lines = out.stdout.splitlines()
    for arm in ("hpa-", "duo-"):
        mine = [s for s in scores if s.arm == arm]
        assert len(mine) == 2
        block = lines[lines.index(f"arm {arm} ({'hpa' if arm == 'hpa-' else 'croft scale on sendto'})") :]
        first_up = next(line for line in block if line.startswith("onset -> first scale-up, s"))
        # the real column is compare's summary of the arm's runs (mean ± sd, or how many never scaled)
        assert first_up[34:58].strip() == scoring.summarize(mine, "first_scale_up_s").text(), first_up
    # croft scale added a pod in both of its runs; the HPA, sized alike (0.7 core a pod), in neither
    ups = {s.run: s.first_scale_up_s for s in scores}
    assert all(ups[r] is not None for r in ups if r.startswith("duo-")), ups
    assert "pod created -> containers running (start delay): 1.0 ± 0.0 s (range 1.0-1.0, n=2)" in out.stdout
    assert "simulated with share of the CPU limit a pod gets 0.4; CPU request cores 1; " in out.stdout
    records = [json.loads(line) for line in (sim / "web" / "runs.jsonl").read_text().splitlines()]
    assert {r["simulated"]["app"]["cpu_share"] for r in records} == {0.4}
    assert {r["simulated"]["app"]["cpu_request_cores"] for r in records} == {1.0}
