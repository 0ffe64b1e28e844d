"""run.py as a user runs it: `gpu --dry-run`, `simulate` then `compare` on its run directories, user
mistakes in one sentence, and a short real `calibrate` (root, eBPF)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import apps
from tests.helpers.cli import CROFT

RUN_PY = Path(apps.__file__).with_name("run.py")


def run_py(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RUN_PY), *args], capture_output=True, text=True, timeout=timeout
    )


def test_gpu_dry_run_prints_the_plan_of_jobs():
    out = run_py("gpu", "--dry-run")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "GPU suite: 6 Jobs in namespace croft-gpu, one at a time, 1 GPU each"
    labels = [line.split()[1] for line in lines[1:7]]
    assert labels == [
        "training",
        "batch-inference",
        "generation",
        "http-serving",
        "ollama-serving",
        "idle-gpu",
    ]
    assert lines[-1] == "total: about 30 min of GPU time, plus image pulls"


def test_gpu_dry_run_manifests_ask_for_one_gpu_each():
    out = run_py("gpu", "--dry-run", "--manifests", "--duration-secs", "60")
    assert out.returncode == 0, out.stderr
    # stdout is YAML only (kubectl apply -f - reads it), the plan goes to stderr
    assert out.stderr.startswith("GPU suite: 6 Jobs in namespace croft-gpu")
    namespace, *jobs = yaml.safe_load_all(out.stdout)
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "croft-gpu"}}
    assert len(jobs) == 6 and all(job["metadata"]["namespace"] == "croft-gpu" for job in jobs)
    for job in jobs:
        assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    training = jobs[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert training[:3] == ["env", "SECS=60", "python"] and "loss.backward()" in training[-1]


def test_simulate_writes_run_directories_that_compare_scores(tmp_path):
    for scaler in ("none", "croft"):
        out = run_py(
            "simulate",
            "--app",
            "webapp",
            "--profile",
            "burst",
            "--scale",
            "0.5",
            "--scaler",
            scaler,
            "--seeds",
            "2",
            "--data",
            str(tmp_path),
        )
        assert out.returncode == 0, out.stderr
    web = tmp_path / "web"
    assert sorted(p.name for p in web.iterdir() if p.is_dir()) == [
        "sim-webapp-croft-1",
        "sim-webapp-croft-2",
        "sim-webapp-hpa-1",
        "sim-webapp-hpa-2",
    ]
    for name in ("workload.csv", "timeline.json", "prometheus.csv", "scaler.log"):
        assert (web / "sim-webapp-croft-1" / name).exists()
    assert not (web / "sim-webapp-hpa-1" / "scaler.log").exists()
    records = [json.loads(line) for line in (web / "runs.jsonl").read_text().splitlines()]
    assert {r["autoscaler"] for r in records} == {"hpa", "croft"}
    assert all(r["load"]["burst"]["onset_ms"] - r["window"]["start_ms"] == 210_000 for r in records)
    assert all(r["containers"] and r["simulated"]["seed"] in (1, 2) for r in records)
    out = run_py("compare", "--prefix", "sim-webapp-hpa-", "sim-webapp-croft-", "--data", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "onset -> first scale-up, s" in out.stdout and "4 runs scored" in out.stdout
    assert (web / "compare.csv").read_text().count("\n") == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("simulate", "--app", "nope"), "run.py: --app 'nope' is not in "),
        (("simulate", "--steps", "2,x"), "run.py: --steps '2,x' is not a comma-separated list"),
        (("web", "--prefix", "x", "--scale", "0"), "run.py: --scale must be above 0"),
    ],
)
def test_mistakes_are_one_sentence_and_exit_2(tmp_path, args, message):
    out = run_py(*args, "--data", str(tmp_path))
    assert out.returncode == 2
    assert out.stderr.startswith(message) and "Traceback" not in out.stderr


@pytest.mark.root
@pytest.mark.bpf
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_calibrate_measures_the_webapp_s_known_costs_from_croft_s_dataset(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("calibrate needs root (croft run loads eBPF)")
    apps_json = tmp_path / "apps.json"
    apps_json.write_text(apps.APPS_JSON.read_text())
    croft = CROFT
    out = run_py(
        "calibrate",
        "--apps",
        str(apps_json),
        "--rates",
        "4,10",
        "--secs-per-rate",
        "12",
        "--cpu-ms",
        "20",
        "--croft",
        croft,
        "--data",
        str(tmp_path),
        timeout=170,
    )
    assert out.returncode == 0, out.stderr
    calibration = json.loads(apps_json.read_text())["webapp"]["calibration"]
    # The webapp sends every reply in exactly 2 sendto calls and burns 20 ms of CPU per request.
    assert calibration["syscall"] == "sendto"
    assert 1.8 <= calibration["calls_per_request"] <= 2.2, calibration
    assert 18 <= calibration["cpu_per_request_ms"] <= 26, calibration
    assert calibration["source"].startswith("run.py calibrate on ")
    assert not any(Path("/sys/fs/cgroup").glob("*/croft-calibrate"))  # its cgroups are gone


def test_every_option_says_what_it_is_and_its_default():
    for command in ("answer", "compare", "simulate", "gpu", "calibrate"):
        out = run_py(command, "--help")
        assert out.returncode == 0, out.stderr
        text = " ".join(out.stdout.split())
        for option in {
            "answer": ["--seeds", "--apps", "--drain-secs"],
            "compare": ["--slo-ms"],
            "simulate": ["--seeds", "--signal", "--drain-secs"],
        }.get(command, []):
            after = text.split(option, 2)[-1][:200]
            assert "(default: " in after, (command, option, after)
    assert "(default: 500.0)" in " ".join(run_py("compare", "--help").stdout.split())


def test_answer_draws_a_figure_for_print(tmp_path):
    """PNG, PDF and SVG; titles in words, a legend for the arms' mean ± sd and the burst, the
    client timeout labelled (the SVG keeps its text as text, so it can be read here). Its time
    axis runs on past the scored window until both arms have scaled down after the burst, with
    each arm's replica-seconds; the scored runs are the first 510 s of the drawn ones, to the request
    but for the last 10 s (the client's timeout), whose requests share their pods with later ones."""
    from answer import FIGURE_TAIL_S, scale_down
    from croft.runs.rundir import read_records, read_workload

    plot = tmp_path / "answer.png"
    out = run_py(
        "answer", "--spec-bursts", "--seeds", "2", "--data", str(tmp_path), "--plot", str(plot), timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("simulated: webapp, burst --scale 0.5 (5 -> 75 RPS), 2 seeds per arm")
    assert "croft scale, offered load, simulated against the HPA: seconds with p95 > 500 ms " in out.stdout
    assert plot.stat().st_size > 0 and plot.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    svg = plot.with_suffix(".svg").read_text()
    for text in (
        "Web app, burst at half scale",
        "Hotel reservation, burst at double scale",
        "Kubernetes HPA, mean ± sd",
        "croft scale, sendto, mean ± sd",
        "croft scale, offered load, mean ± sd",
        "burst",
        "10 s client timeout: the ceiling",
        "2 seeds per arm",
        "end of the scored window",
        "replica-seconds to 990 s",
    ):
        assert text in svg, text
    assert "--scale" not in svg
    assert svg.count(" replica-s</text>") == 6  # each arm's, in both cases' replicas panels
    scored = {r.run: r for r in read_records(tmp_path / "web")}
    drawn = read_records(tmp_path / "web-figure")
    assert sorted(r.run for r in drawn) == sorted(scored) and len(drawn) == 12
    for record in drawn:
        window = scored[record.run]
        assert record.window_end_ms - window.window_end_ms == FIGURE_TAIL_S * 1000
        assert record.burst_end_ms == window.burst_end_ms is not None
        down = scale_down(tmp_path / "web-figure", record)
        # the scale-down: back at the pre-burst replica count after the scored window ends, and
        # before the figure does
        assert down.back_s is not None, record.run
        assert (window.window_end_ms - window.window_start_ms) / 1000 < down.back_s < 990 - 30, record.run
        first = read_workload(tmp_path / "web" / record.run / "workload.csv")
        drawn_rows = read_workload(tmp_path / "web-figure" / record.run / "workload.csv")
        assert drawn_rows[: len(first) - 10] == first[:-10]
    report = out.stdout.split("after the burst", 1)[1]
    assert report.count("back at its pre-burst replicas at") == 6, out.stdout


def test_ramp_secs_runs_the_app_s_burst_at_that_shape(tmp_path):
    out = run_py(
        "simulate", "--app", "webapp-node-200m", "--ramp-secs", "30", "--scaler", "croft",
        "--signal", "offered", "--seeds", "1", "--data", str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "web" / "runs.jsonl").read_text().splitlines()]
    assert record["load"]["ramp_s"] == 30 and record["load"]["peak_rps"] == 60
    # 30 s warm-up and 60 s of base, then 30 s of ramp and 120 s held
    assert record["load"]["burst"]["onset_ms"] - record["window"]["start_ms"] == 90_000
    assert record["load"]["burst"]["end_ms"] - record["load"]["burst"]["onset_ms"] == 150_000
    assert record["simulated"]["app"]["max_connection_age_s"] == 10
    bad = run_py("simulate", "--app", "webapp", "--ramp-secs", "30", "--data", str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.startswith("run.py: --ramp-secs needs an app with a burst")
