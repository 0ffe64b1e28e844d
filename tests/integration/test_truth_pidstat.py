"""croft's rows against Debian's pidstat (sysstat) for the same processes and window (root).

A workload in the test's own cgroup: one process burning a core, one holding 64 MiB, one writing
1 MiB/s in 50 paced writes a second. `croft run --watch <that cgroup>` and `pidstat -u -r -d -w`
run side by side for ~20 s. Tolerances: CPU within 5 % of a core, RSS within 2 %, write bytes/s
and voluntary context switches/s within 5 %.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import msgspec
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.workload import ALLOC, BURN, WRITE, OwnCgroup

pytestmark = [pytest.mark.root, pytest.mark.slow]
SAMPLES = 9  # pidstat intervals of 2 s


def pidstat_means(output: str, pids: list[int]) -> dict[int, dict[str, float]]:
    """Mean of every numeric pidstat column per pid, from `pidstat -h` output."""
    header: list[str] = []
    values: dict[int, dict[str, list[float]]] = {pid: {} for pid in pids}
    for line in output.splitlines():
        if line.startswith("#"):
            header = line[1:].split()
            continue
        fields = line.split()
        if not header or len(fields) < len(header) or not fields[2].isdigit():
            continue
        pid = int(fields[header.index("PID")])
        for name, value in zip(header, fields, strict=False):
            try:
                number = float(value)
            except ValueError:
                continue
            values.setdefault(pid, {}).setdefault(name, []).append(number)
    return {pid: {k: statistics.fmean(v) for k, v in cols.items()} for pid, cols in values.items()}


def test_croft_agrees_with_pidstat(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("pidstat") is None:
        pytest.skip("needs root and pidstat (scripts/system-deps.sh installs sysstat)")
    dataset = tmp_path / "croft-dataset.jsonl"
    with OwnCgroup(f"croft-truth-{os.getpid()}") as group:
        burn = group.spawn(BURN).pid
        alloc = group.spawn(ALLOC, "64").pid
        write = group.spawn(WRITE, str(tmp_path / "written"), "1048576").pid
        log = tmp_path / "croft.log"
        with log.open("wb") as log_file:
            croft = subprocess.Popen(
                [CROFT, "run", "--watch", group.name, "--dataset", str(dataset)],
                stderr=log_file,
            )
        try:
            deadline = time.monotonic() + 180
            while not (dataset.exists() and dataset.stat().st_size) and time.monotonic() < deadline:
                if croft.poll() is not None:
                    pytest.skip(f"croft run could not start here: {log.read_text()[-300:]}")
                time.sleep(0.2)
            start_ms = time.time_ns() // 1_000_000
            pidstat = subprocess.run(
                ["pidstat", "-h", "-u", "-r", "-d", "-w", "-p", f"{burn},{alloc},{write}", "2", str(SAMPLES)],
                capture_output=True,
                text=True,
                env={**os.environ, "LC_ALL": "C"},
                timeout=60,
                check=True,
            )
            end_ms = time.time_ns() // 1_000_000
        finally:
            croft.send_signal(signal.SIGTERM)
            assert croft.wait(timeout=30) == 0
    truth = pidstat_means(pidstat.stdout, [burn, alloc, write])
    rows = [msgspec.json.decode(line) for line in dataset.read_bytes().splitlines()]
    window = [r for r in rows if start_ms + 2000 <= r["unix_ms"] <= end_ms]

    def croft_mean(pid: int, field: str) -> float:
        values = [r["usage"][field] for r in window if r["tgid"] == pid]
        assert len(values) >= SAMPLES - 2, f"croft wrote {len(values)} rows for {pid} in the window"
        return statistics.fmean(values)

    report = []
    for pid, name in ((burn, "burn"), (alloc, "alloc"), (write, "write")):
        cpu_croft, cpu_truth = croft_mean(pid, "cpu_cores") * 100, truth[pid]["%CPU"]
        report.append(f"{name}: %CPU croft {cpu_croft:.2f} pidstat {cpu_truth:.2f}")
        assert abs(cpu_croft - cpu_truth) <= 5.0, report[-1]
    rss_croft, rss_truth = croft_mean(alloc, "rss_bytes") / 1024, truth[alloc]["RSS"]
    report.append(f"alloc: RSS kB croft {rss_croft:.0f} pidstat {rss_truth:.0f}")
    assert abs(rss_croft - rss_truth) <= 0.02 * rss_truth, report[-1]
    wr_croft, wr_truth = croft_mean(write, "write_bytes_s") / 1024, truth[write]["kB_wr/s"]
    report.append(f"write: kB_wr/s croft {wr_croft:.1f} pidstat {wr_truth:.1f}")
    assert abs(wr_croft - wr_truth) <= 0.05 * wr_truth, report[-1]
    cs_croft, cs_truth = croft_mean(write, "ctx_voluntary_s"), truth[write]["cswch/s"]
    report.append(f"write: cswch/s croft {cs_croft:.2f} pidstat {cs_truth:.2f}")
    assert abs(cs_croft - cs_truth) <= 0.05 * cs_truth, report[-1]
    print("\n".join(report))
