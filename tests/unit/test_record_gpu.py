"""The tools that record croft on a GPU machine (scripts/record_gpu.sh and its Python half): reading
nvidia-smi's logs, the agreement checks, record_nvml.py's format replayed by the fake NVML, and the
whole script's dry run on this machine (a stand-in nvidia-smi, a CPU workload).

The nvidia-smi texts here are written from the formats nvidia-smi's manual gives, not recorded: a
recording made by the script on a GPU replaces them as the reference when one is made."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import tarfile
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pynvml
import pytest

from croft.adapters.host.nvml import NvmlGpuHolders
from tests.helpers.nvml_fake import RecordedNvml

REPO = Path(__file__).resolve().parents[2]


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record_gpu = script("record_gpu")
T0 = 1_796_528_160_000  # 2026-12-06T03:36:00Z
PMON = """\
#Date       Time        gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   command
#YYYYMMDD   HH:MM:SS    Idx           #    C/G      %      %      %      %      %      %     MB   name
 20261206   03:36:00      0           -      -      -      -      -      -      -      -      -   -
 20261206   03:36:01      0        4242      C     97     40      -      -      -      -   2581   python3
#Date       Time        gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   command
#YYYYMMDD   HH:MM:SS    Idx           #    C/G      %      %      %      %      %      %     MB   name
 20261206   03:36:02      0        4242      C      -      -      -      -      -      -   2581   python3
"""
APPS = """\
2026/12/06 03:36:01.250, 4242, 2581, GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10
2026/12/06 03:36:02.251, 4242, [N/A], GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10
No running processes found
"""


def test_pmon_is_read_by_its_header_and_dashes_are_unknown() -> None:
    assert record_gpu.parse_pmon(PMON) == [
        {
            "unix_ms": T0 + 1000,
            "gpu": 0,
            "pid": 4242,
            "sm": 97.0,
            "mem": 40.0,
            "enc": None,
            "dec": None,
            "fb": 2581.0,
        },
        {
            "unix_ms": T0 + 2000,
            "gpu": 0,
            "pid": 4242,
            "sm": None,
            "mem": None,
            "enc": None,
            "dec": None,
            "fb": 2581.0,
        },
    ]
    older = (  # without -o DT: no time to align a sample with croft's polls
        "# gpu   pid  type    sm   mem   enc   dec   command\n"
        "# Idx     #   C/G     %     %     %     %   name\n"
    )
    assert (
        record_gpu.parse_pmon(older + "    0  4242     C    12     3     0     0   python3\n") == []
    )  # no time: -o DT


def test_compute_apps_lines() -> None:
    assert record_gpu.parse_compute_apps(APPS) == [
        {
            "unix_ms": T0 + 1250,
            "pid": 4242,
            "used_mib": 2581.0,
            "gpu_uuid": "GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10",
        },
        {
            "unix_ms": T0 + 2251,
            "pid": 4242,
            "used_mib": None,
            "gpu_uuid": "GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10",
        },
    ]


PHASES = {
    "pid": 4242,
    "phases": [
        {"name": "start", "start_ms": T0, "end_ms": T0 + 8000},
        {"name": "hold", "start_ms": T0 + 8000, "end_ms": T0 + 16000},
        {"name": "busy", "start_ms": T0 + 16000, "end_ms": T0 + 36000},
        {"name": "half", "start_ms": T0 + 36000, "end_ms": T0 + 56000},
        {"name": "idle", "start_ms": T0 + 56000, "end_ms": T0 + 64000},
    ],
}
SM = {"start": None, "hold": 0.0, "busy": 98.0, "half": 51.0, "idle": 0.0}
MIB = 1 << 20


def phase_at(unix_ms: int) -> str:
    return next(p["name"] for p in PHASES["phases"] if p["start_ms"] <= unix_ms <= p["end_ms"])


def recording(sm_shift: float = 0.0, memory_scale: float = 1.0, first: str = "gpu-onset") -> dict[str, Any]:
    """Rows every 2 s and nvidia-smi every second, as an agreeing run would give them."""
    rows, pmon, apps = [], [], []
    for at in range(T0 + 1000, T0 + 64000, 2000):
        phase = phase_at(at)
        row: dict[str, Any] = {"tgid": 4242, "unix_ms": at, "workload": "no-gpu"}
        if SM[phase] is not None:
            held = phase_at(at - 2000) != "start"
            row["workload"] = "gpu-held" if held else first
            row["gpus"] = [
                {
                    "index": 0,
                    "memory_bytes": int(2581 * MIB * memory_scale),
                    "sm_percent": SM[phase] + sm_shift,
                }
            ]
        rows.append(row)
    for at in range(T0, T0 + 64000, 1000):
        phase = phase_at(at)
        if SM[phase] is not None:
            pmon.append(
                {
                    "unix_ms": at,
                    "gpu": 0,
                    "pid": 4242,
                    "sm": SM[phase] or None,
                    "mem": None,
                    "enc": None,
                    "dec": None,
                    "fb": 2581.0,
                }
            )
            apps.append({"unix_ms": at + 250, "pid": 4242, "used_mib": 2581.0, "gpu_uuid": "GPU-0"})
    return {"rows": rows, "phases": PHASES, "pmon": pmon, "apps": apps}


def checks(summary: dict[str, Any]) -> dict[str, bool]:
    return {c["name"]: c["ok"] for c in summary["checks"]}


def test_an_agreeing_recording_passes_every_check() -> None:
    summary = record_gpu.compare(**recording())
    assert summary["agree"], summary
    assert list(checks(summary)) == [
        "rows with gpus",
        "gpu states",
        "memory within 5 %",
        "sm hold",
        "sm busy",
        "sm half",
        "sm idle",
    ]


@pytest.mark.parametrize(
    ("change", "failing"),
    [
        ({"memory_scale": 1.06}, ["memory within 5 %"]),
        ({"memory_scale": 0.96}, []),
        ({"sm_shift": 10.5}, ["sm hold", "sm busy", "sm half", "sm idle"]),
        ({"sm_shift": -9.5}, []),
        ({"first": "gpu-held"}, ["gpu states"]),
    ],
)
def test_each_tolerance_is_the_issues(change: dict[str, Any], failing: list[str]) -> None:
    """5 % on memory, 10 points on utilisation, gpu-onset at the CUDA context."""
    got = checks(record_gpu.compare(**recording(**change)))
    assert [name for name, ok in got.items() if not ok] == failing


def test_no_rows_of_the_workload_fails_rather_than_passes() -> None:
    summary = record_gpu.compare([], PHASES, [], [])
    assert not summary["agree"]
    assert not any(checks(summary).values())


def test_record_nvml_writes_what_the_fake_replays(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """record_nvml.py over a stand-in pynvml (the fake of a hand-made recording): what it writes,
    replayed by the fake, gives croft the same holders as the recording it read."""
    record_nvml = script("record_nvml")
    source = RecordedNvml.named("two_gpus")
    stand_in = SimpleNamespace(
        NVMLError=pynvml.NVMLError,
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlDeviceGetName=lambda handle: handle["name"],
        **{name: getattr(source, name) for name in dir(source) if name.startswith("nvml")},
    )
    monkeypatch.setattr(record_nvml, "pynvml", stand_in)
    monkeypatch.setattr(record_nvml.time, "sleep", lambda seconds: None)
    written = record_nvml.record(polls=2, interval_s=2.0)
    assert (
        written["devices"][0]["processes_utilization_info"][1]["since"] == 1_792_505_950_000_000 + 1_166_000
    )
    (tmp_path / "again.json").write_text(json.dumps(written))
    again = RecordedNvml(json.loads((tmp_path / "again.json").read_text()))
    original = NvmlGpuHolders(RecordedNvml.named("two_gpus"))
    replayed = NvmlGpuHolders(again)
    assert [replayed.read() for _ in range(2)] == [original.read() for _ in range(2)]


def _record_gpu(
    *step: str, env: dict[str, str] | None = None, timeout: int = 30
) -> subprocess.CompletedProcess[str]:
    """scripts/record_gpu.sh with `step`, its output captured."""
    script = ["bash", str(REPO / "scripts" / "record_gpu.sh"), *step]
    return subprocess.run(script, capture_output=True, text=True, env=env, timeout=timeout, check=False)


@pytest.mark.slow
def test_the_dry_run_takes_every_step_and_packs_what_it_made(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the collector reads every process's /proc files as root, as on the GPU machine")
    env = {**os.environ, "OUT": str(tmp_path / "out"), "RECORD_GPU_SCALE": "0.15"}
    done = _record_gpu("dry-run", env=env, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["replay_equal"] is True and summary["dry_run"] == 1 and summary["ebpf"] == 0
    assert not summary["agree"]  # no GPU: nothing to agree on
    by_name = {c["name"]: c for c in summary["checks"]}
    assert by_name["rows with gpus"]["rows"] > 0  # the workload's rows, through the watched cgroup
    assert by_name["sm busy"]["pmon_samples"] > 0  # the stand-in nvidia-smi's lines were read
    with tarfile.open(tmp_path / "out" / "record_gpu.tar.gz") as packed:
        names = set(packed.getnames())
    for name in (
        "pmon.txt",
        "apps.csv",
        "phases.json",
        "nvml.json",
        "summary.json",
        "dataset/croft-dataset.jsonl",
    ):
        assert f"./{name}" in names, names
    assert any(n.startswith("./trace/croft-trace-") for n in names)
    assert (tmp_path / "out" / "record_gpu.log").read_text().count("record_gpu: done") == 1


def test_record_refuses_without_out_or_a_gpu(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = _record_gpu("record", env=env)
    assert done.returncode != 0 and "OUT" in done.stderr
    env["OUT"] = str(tmp_path)
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi here
    done = _record_gpu("record", env=env)
    assert done.returncode == 1
    said = done.stdout + done.stderr  # after its start, the script logs both into its log
    assert "needs root" in said or "no nvidia-smi" in said
    nothing = _record_gpu()
    assert nothing.returncode == 1 and "give prepare, record or dry-run" in nothing.stderr
