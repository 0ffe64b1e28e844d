"""nodecpu.py: the CPU of the machine a run's harness runs on, from /proc/stat (proc(5)) texts
written here, a real /proc/stat read twice, and the recorder's thread with a scripted clock."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import nodecpu

STAT = """cpu  {user} 10 {system} {idle} {iowait} 5 5 {steal} 0 0
cpu0 1 1 1 1 1 1 1 1 0 0
cpu1 1 1 1 1 1 1 1 1 0 0
intr 12345
ctxt 999
"""


def stat(user: int, system: int, idle: int, iowait: int = 0, steal: int = 0) -> str:
    return STAT.format(user=user, system=system, idle=idle, iowait=iowait, steal=steal)


def test_cpu_times_sum_busy_steal_and_iowait_and_count_the_cpus() -> None:
    times = nodecpu.CpuTimes.from_text(stat(100, 50, 1000, 7, 3))
    assert (times.busy, times.steal, times.iowait, times.cores) == (100 + 10 + 50 + 5 + 5, 3, 7, 2)
    assert times.total == times.busy + 3 + 7 + 1000


def test_an_interval_is_each_share_of_the_ticks_times_the_cores() -> None:
    before = nodecpu.CpuTimes.from_text(stat(100, 50, 1000))
    # 200 ticks pass: 120 user, 30 system, 20 steal, 10 iowait, 20 idle
    after = nodecpu.CpuTimes.from_text(stat(220, 80, 1020, 10, 20))
    sample = nodecpu.between(before, after, 1_800_000_000.5)
    assert sample is not None
    assert (sample.busy_cores, sample.steal_cores, sample.iowait_cores) == (1.5, 0.2, 0.1)
    assert sample.cores == 2 and not sample.saturated  # 1.7 of 2 cores: below 95 %
    assert nodecpu.Sample(0, 1.8, 0.1, 0, 2).saturated and not nodecpu.Sample(0, 1.7, 0.1, 0, 2).saturated


def test_no_interval_without_ticks_or_across_a_reboot() -> None:
    same = nodecpu.CpuTimes.from_text(stat(100, 50, 1000))
    assert nodecpu.between(same, same, 0) is None
    assert nodecpu.between(nodecpu.CpuTimes.from_text(stat(900, 50, 1000)), same, 0) is None


def test_a_text_without_the_aggregate_line_is_refused() -> None:
    with pytest.raises(ValueError, match="no aggregate cpu line"):
        nodecpu.CpuTimes.from_text("cpu0 1 1 1 1 1 1 1 1\n")


def test_the_csv_round_trips_and_the_burst_s_peak_and_saturated_seconds_are_found(tmp_path: Path) -> None:
    samples = [nodecpu.Sample(float(t), b, 0.0, 0.0, 2) for t, b in enumerate([0.2, 1.0, 1.95, 0.4, 1.99])]
    nodecpu.write(tmp_path / nodecpu.FILE, samples)
    back = nodecpu.read(tmp_path / nodecpu.FILE)
    assert back == samples
    assert nodecpu.peak_cores(back, 1, 3) == 1.95 and nodecpu.peak_cores(back, 10, 20) is None
    assert nodecpu.saturated_seconds(back, 0, 4) == 2 and nodecpu.saturated_seconds(back, 0, 3) == 1
    assert nodecpu.read(tmp_path / "none.csv") == []


def test_the_recorder_samples_until_stopped() -> None:
    texts = iter([stat(100, 50, 1000), stat(150, 50, 1050), stat(250, 50, 1050), *[stat(250, 50, 1250)] * 50])
    clock = iter(float(t) for t in range(100))
    recorder = nodecpu.Recorder(lambda: next(texts), every_s=0.01, clock=lambda: next(clock))
    recorder.start()
    time.sleep(0.3)
    samples = recorder.stop()
    assert [(s.unix_s, s.busy_cores) for s in samples[:3]] == [(0.0, 1.0), (1.0, 2.0), (2.0, 0.0)]


def test_the_real_proc_stat_gives_a_sample_within_the_machine() -> None:
    before = nodecpu.CpuTimes.from_text(Path("/proc/stat").read_text())
    sum(i * i for i in range(2_000_000))
    after = nodecpu.CpuTimes.from_text(Path("/proc/stat").read_text())
    sample = nodecpu.between(before, after, time.time())
    assert sample is not None and 0 < sample.busy_cores <= sample.cores
    assert sample.busy_cores + sample.steal_cores + sample.iowait_cores <= sample.cores + 1e-9
