"""capacity.py: the real pods' capacity from croft's rows beside real runs. A scripted run gives the
exact figures (which polls count as saturated, which requests reach a pod, one figure a poll per
container); the committed real runs of 2026-12-06 give what the answer says of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import boundary_answer
import burst_series
import capacity
from croft.runs.load import SecondStats
from croft.runs.rundir import RunRecord

ONSET_MS = 1_800_000_000_000
EXPERIMENT = Path(capacity.__file__).parent


def _row(unix_ms: int, cid: str | None, tgid: int = 1, **cgroup: float) -> dict[str, Any]:
    return {"unix_ms": unix_ms, "tgid": tgid, "process": {"container_id": cid}, "cgroup_usage": cgroup}


def _second(at_s: float, ok: int, timeouts: int = 0, failures: int = 0) -> SecondStats:
    sent = ok + timeouts + failures
    return SecondStats(0, ONSET_MS / 1000 + at_s, sent, sent, ok, 10.0, 20.0, 30.0, failures, timeouts)


def _run(rows: list[dict[str, Any]], workload: list[SecondStats], burst_s: float = 10.0) -> burst_series.Run:
    record = RunRecord(
        "r", "webapp", "ns", "webapp", "hpa", ONSET_MS - 20_000, ONSET_MS + 30_000, {"arm": "hpa"},
        ONSET_MS, ONSET_MS + int(burst_s * 1000),
    )  # fmt: skip
    return burst_series.Run(record, Path("r"), tuple(workload), None, (), (), tuple(rows))


def test_a_scripted_run_gives_its_exact_figures() -> None:
    at = ONSET_MS
    rows = [
        _row(at - 2000, "a", cpu_cores=0.5, cpu_throttled_fraction=0.95),  # before the burst: left out
        _row(at, "a", cpu_cores=0.1, cpu_throttled_fraction=0.1),
        _row(at + 2000, "a", cpu_cores=0.19, cpu_throttled_fraction=0.9),
        _row(at + 2000, "a", tgid=2, cpu_cores=0.19, cpu_throttled_fraction=0.9),  # same poll, same cgroup
        _row(at + 4000, "a", cpu_cores=0.2, cpu_throttled_fraction=0.8),
        _row(at + 4000, "b", cpu_cores=0.05, cpu_throttled_fraction=0.0),
        _row(at + 6000, "b", cpu_cores=0.15),  # no throttling figure: not judged saturated, its CPU counts
        _row(at + 6000, None, cpu_cores=1.0, cpu_throttled_fraction=1.0),  # a host process: not a pod
        _row(at + 6000, "a", cpu_throttled_fraction=0.9),  # no CPU read: absent, not 0
        _row(at + 14_000, "a", cpu_cores=0.2, cpu_throttled_fraction=1.0),  # after the burst: left out
    ]
    workload = [
        _second(-1.0, 50),
        _second(1.0, 40, timeouts=5, failures=30),
        _second(9.0, 5),
        _second(11.0, 99),
    ]
    run = _run(rows, workload)
    assert capacity.saturated_polls(run) == [0.19, 0.2]
    # a: 0.19 x 2 s + 0.2 x 2 s; b: 0.15 x 2 s (its poll at the onset + 4 s has no earlier one to span)
    cpu_s = 0.19 * 2 + 0.2 * 2 + 0.15 * 2
    assert capacity.ms_per_request(run) == pytest.approx(cpu_s * 1000 / 50)  # 40 + 5 timed out + 5
    found = capacity.measure([run, _run(rows, workload)], limit_cores=0.2, calibrated_ms=20.0)
    assert found.saturated_cores.n == 4 and found.ms_per_request.n == 2
    assert found.share == pytest.approx((0.195 / 0.2) * (20.0 / (cpu_s * 1000 / 50)))
    assert "(4 polls)" in found.text() and "(2 runs; calibrated 20 ms)" in found.text()


def test_without_rows_or_burst_nothing_is_measured() -> None:
    empty = capacity.measure([_run([], [_second(1.0, 10)])], 0.2, 10.0)
    assert empty.share is None and "not measured" in empty.text()
    no_requests = _run([_row(ONSET_MS, "a", cpu_cores=0.1), _row(ONSET_MS + 2000, "a", cpu_cores=0.1)], [])
    assert capacity.ms_per_request(no_requests) is None


def test_the_committed_real_runs_had_the_capacity_the_simulator_gives_their_pods() -> None:
    runs, _ = boundary_answer.real_with_rows([EXPERIMENT / "results" / "real-20261206" / "web"])
    found = capacity.measure(runs, limit_cores=0.2, calibrated_ms=10.47)
    assert found.ms_per_request.n == 15 and found.saturated_cores.n > 1000
    assert found.saturated_cores.mean is not None and 0.18 < found.saturated_cores.mean <= 0.21
    assert found.ms_per_request.mean is not None and 9.5 < found.ms_per_request.mean < 11.5
    assert found.share is not None and 0.9 < found.share < 1.05
