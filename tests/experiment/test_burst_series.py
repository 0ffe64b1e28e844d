"""The research notebooks' logic (labs/research/experiment: burst_series, leadtime) on hand-made runs
whose answers are worked out by hand."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

import burst_series
import leadtime
from croft.runs.load import SecondStats
from croft.runs.rundir import RunRecord

ONSET_MS = 1_000_000_020_000  # the load starts 20 s before


def row(at_ms: int, cid: str, tgid: int, sendto: float, cpu: float, **extra: Any) -> dict[str, Any]:
    return {
        "unix_ms": at_ms,
        "tgid": tgid,
        "process": {
            "comm": "python",
            "exe": "/usr/bin/python3",
            "cgroup": "/kubepods/x",
            "container_id": cid,
        },
        "workload": "no-gpu",
        "usage": {"cpu_cores": cpu / 2, "network_rx_bytes_s": 0.0, "network_tx_bytes_s": 0.0},
        "cgroup_usage": {
            "cpu_cores": cpu,
            "cpu_throttled_fraction": 0.0,
            "cpu_pressure_avg10": 0.0,
            "memory_pressure_avg10": 0.0,
            "io_pressure_avg10": 0.0,
        },
        "syscalls": [{"name": "sendto", "rate_per_sec": sendto}],
        **extra,
    }


def second(at_s: int, p95_ms: float) -> SecondStats:
    return SecondStats(at_s, ONSET_MS / 1000 + at_s, 10, 10, 10, p95_ms, p95_ms, p95_ms, 0, 0)


def make_run(rows: list[dict[str, Any]], p95: dict[int, float]) -> burst_series.Run:
    record = RunRecord(
        run="r1", app="webapp", namespace="ns", deployment="webapp", autoscaler="hpa",
        window_start_ms=ONSET_MS - 20_000, window_end_ms=ONSET_MS + 20_000, load={},
        burst_onset_ms=ONSET_MS, burst_end_ms=ONSET_MS + 10_000, containers=(("p", "c1"),),
    )  # fmt: skip
    workload = tuple(second(s, p95.get(s, 80.0)) for s in range(-20, 20))
    return burst_series.Run(record, Path("r1"), workload, None, (), (), tuple(rows))


def test_two_processes_of_one_container_count_their_cgroup_once() -> None:
    run = make_run([row(ONSET_MS, "c1", 1, 4.0, 0.5), row(ONSET_MS, "c1", 2, 6.0, 0.5)], {})
    by_name = {s.name: s for s in burst_series.dataset_series(run)}
    assert by_name["sendto()"].values == (10.0,)
    assert by_name["cgroup cpu_cores"].values == (0.5,)
    assert by_name["process cpu_cores"].values == (0.5,)
    assert by_name["sendto()"].t_s == (0.0,)


def test_fields_the_spec_does_not_list_are_offered_load_signals() -> None:
    extra = {
        "offered": {"connections_s": 5.0, "note": "x"},
        "ingress": [{"name": "packets", "rate_per_sec": 7}],
    }
    assert burst_series.offered_fields(row(0, "c1", 1, 1.0, 0.1, **extra)) == {
        "offered.connections_s": 5.0,
        "ingress.packets": 7.0,
    }
    assert burst_series.offered_fields(row(0, "c1", 1, 1.0, 0.1)) == {}
    run = make_run([row(ONSET_MS, "c1", 1, 1.0, 0.1, **extra), row(ONSET_MS, "c1", 2, 1.0, 0.1, **extra)], {})
    offered = {s.name: s.values for s in burst_series.dataset_series(run) if s.group == "offered"}
    assert offered == {"offered.connections_s": (5.0,), "ingress.packets": (7.0,)}  # once per container
    assert burst_series.has_offered_fields([run])


def test_lead_time_is_when_p95_crossed_minus_when_the_signal_did() -> None:
    # baseline sendto 10/s, flat: threshold 10 + 0.2 x 10 = 12; it reaches 30 one second after the
    # onset; p95 first exceeds 500 ms 3 s after the onset: lead 2 s.
    polls = [
        row(ONSET_MS + dt, "c1", 1, 10.0 if dt < 1000 else 30.0, 0.2) for dt in range(-19_000, 20_000, 2000)
    ]
    run = make_run(polls, {3: 900.0, 4: 1200.0})
    assert leadtime.objective_crossed_s(run) == 3.0
    rows = {r.signal: r for r in leadtime.lead_times([run])}
    sendto = rows["sendto()"]
    assert (sendto.baseline_mean, sendto.threshold, sendto.detected_s, sendto.lead_s) == (
        10.0,
        12.0,
        1.0,
        2.0,
    )
    # the CPU did not move: it keeps its row, without a lead time
    assert rows["cgroup cpu_cores"].lead_s is None
    assert rows["cgroup cpu_cores"].note == "never crossed its threshold"


def test_a_run_whose_p95_stays_under_the_objective_has_no_lead_time() -> None:
    polls = [
        row(ONSET_MS + dt, "c1", 1, 10.0 if dt < 0 else 30.0, 0.2) for dt in range(-19_000, 20_000, 2000)
    ]
    found = {r.signal: r for r in leadtime.lead_times([make_run(polls, {})])}
    assert found["sendto()"].detected_s == 1.0
    assert found["sendto()"].lead_s is None
    assert found["sendto()"].note == "p95 never exceeded 500 ms"


def test_scaler_log_lines() -> None:
    line = (
        "ts=2026-12-02T22:44:09.445Z estimate_rps=23.79+ desired=2 replicas=2->2 decision=hold "
        'reason=incomplete detail="data is incomplete, so no scale-down"'
    )
    poll = burst_series.parse_scaler_line(line)
    assert poll == burst_series.ScalerPoll(1796251449445, 23.79, 2, "hold")
    assert burst_series.parse_scaler_line("croft scale: starting") is None


def test_the_ingress_object_is_plotted_once_per_pod_with_its_units() -> None:
    ingress = {"tcp_data_segments_s": 12.0, "rx_bytes_s": 900.0, "listen_backlog": 3, "unread_bytes": 40}
    rows = [
        row(ONSET_MS, "c1", 1, 1.0, 0.1, ingress=ingress),  # the collector puts it on one row per container
        row(ONSET_MS, "c1", 2, 1.0, 0.1),
        row(ONSET_MS, "c2", 3, 1.0, 0.1, ingress=ingress),
        row(ONSET_MS + 2000, "c1", 1, 1.0, 0.1),  # not measured this poll: no sample, not a 0
    ]
    offered = {s.name: s for s in burst_series.dataset_series(make_run(rows, {})) if s.group == "offered"}
    assert {n: (s.unit, s.values) for n, s in offered.items()} == {
        "ingress.tcp_data_segments_s": ("/s", (24.0,)),
        "ingress.rx_bytes_s": ("B/s", (1800.0,)),
        "ingress.listen_backlog": ("count", (6.0,)),
        "ingress.unread_bytes": ("bytes", (80.0,)),
    }


def test_the_baseline_leaves_out_the_poll_that_saw_only_part_of_the_load() -> None:
    # polls every 2 s; the load starts at -7 s: the poll at -6 s covered 1 s of it and reads low
    series = burst_series.Series("x", "offered", "/s", (-6.0, -4.0, -2.0, 0.0), (2.0, 5.0, 5.0, 7.0))
    assert leadtime.threshold(series, start_s=-7.0) == (5.0, 0.0, 6.0)
    assert leadtime.threshold(series, start_s=-3.0) is None  # one whole poll only


def test_scaler_log_lines_in_json_and_with_a_backlog() -> None:
    logfmt = (
        "ts=2026-12-02T22:44:09.445Z estimate_rps=23.79 backlog_requests=12.5 desired=3 replicas=1->3 "
        'decision=up reason=scale-up detail="2 polls in a row asked for more than 1"'
    )
    json_line = json.dumps(
        {
            "ts": "2026-12-02T22:44:09.445Z", "estimate_rps": 23.79, "lower_bound": False,
            "backlog_requests": 12.5, "desired": 3, "replicas_from": 1, "replicas_to": 3,
            "decision": "up", "reason": "scale-up", "detail": "",
        }
    )  # fmt: skip
    expected = burst_series.ScalerPoll(1796251449445, 23.79, 3, "up", 12.5)
    assert burst_series.parse_scaler_line(logfmt) == expected
    assert burst_series.parse_scaler_line(json_line) == expected
    assert burst_series.parse_scaler_line('{"ts": "not a time"}') is None


def _lead(run: str, signal: str, lead_s: float | None) -> leadtime.LeadTime:
    return leadtime.LeadTime(run, "croft", signal, "scaler", "req/s", 1.0, 0.1, 1.5, 2.0, None, lead_s)


def test_lead_times_per_signal_arm_bound_and_shape() -> None:
    def run(name: str, arm: str, ramp_s: float | None, bound: float = 10.0) -> burst_series.Run:
        load = {"arm": arm, "max_connection_age_s": bound} | ({} if ramp_s is None else {"ramp_s": ramp_s})
        record = RunRecord(name, "webapp", "croft-exp", "webapp", "croft", 0, 1, load)
        return burst_series.Run(record, Path(name), (), None, (), (), ())

    runs = [
        run("a", "croft-offered", 0),
        run("b", "croft-offered", 0),
        run("c", "croft-offered", 60),
        run("d", "hpa", None),
        run("e", "croft-offered", 0, bound=0.0),
    ]
    leads = {"a": 1.0, "b": 3.0, "c": None, "d": -2.0, "e": 7.0}
    found = leadtime.per_shape([_lead(name, "est", lead) for name, lead in leads.items()], runs)
    assert [(d.signal, d.arm, d.bound_s, d.shape_s, d.runs, d.detected, d.mean_s, d.sd_s) for d in found] == [
        ("est", "croft-offered", 10.0, 0.0, 2, 2, 2.0, pytest.approx(1.4142, abs=1e-4)),
        ("est", "croft-offered", 10.0, 60.0, 1, 0, None, None),
        ("est", "croft-offered", 0.0, 0.0, 1, 1, 7.0, None),  # another bound: its own row
        ("est", "hpa", 10.0, 0.0, 1, 1, -2.0, None),  # a run without ramp_s is a step
    ]
    text = leadtime.per_shape_text(found).splitlines()
    assert text[0].split() == ["signal", "arm", "bound", "step", "60", "s", "ramp"]
    assert text[1].split()[:7] == ["est", "croft-offered", "10", "s", "+2.0", "±", "1.4"]
    assert text[1].endswith("- (0/1)") and text[2].split()[2] == "none" and text[3].rstrip().endswith("-")


def test_the_notebooks_read_the_user_s_runs_or_on_a_fresh_clone_the_committed_recording(
    tmp_path: Path,
) -> None:
    fresh = burst_series.notebook_inputs({}, tmp_path)
    assert fresh.runs == burst_series.FIXTURE / "web" and fresh.dataset == burst_series.FIXTURE / "nodes"
    assert (fresh.runs / "runs.jsonl").exists() and (burst_series.FIXTURE / "nodes").is_dir()
    assert fresh.note.startswith(f"No runs of your own under {tmp_path / 'experiment/data/web'}")
    assert fresh.out == tmp_path / "experiment/data/figures"
    own = tmp_path / "experiment/data/web"
    own.mkdir(parents=True)
    (own / "runs.jsonl").write_text("")
    mine = burst_series.notebook_inputs({"CROFT_RESEARCH_PREFIX": "burst-"}, tmp_path)
    assert (mine.runs, mine.dataset, mine.prefix) == (own, tmp_path / "data/nodes", "burst-")
    assert mine.note.startswith(f"Reading the runs under {own}")
    named = burst_series.notebook_inputs({"CROFT_RESEARCH_RUNS": str(tmp_path / "elsewhere")}, tmp_path)
    assert named.runs == tmp_path / "elsewhere"  # named: never replaced by the recording


def test_the_signals_ahead_of_p95_in_every_hpa_run_earliest_first() -> None:
    def d(
        signal: str, arm: str, leads: list[float | None], shape: float = 60.0
    ) -> leadtime.ShapeDistribution:
        found = [x for x in leads if x is not None]
        sd = statistics.stdev(found) if len(found) > 1 else None
        return leadtime.ShapeDistribution(
            signal, arm, 10.0, shape, len(leads), len(found), statistics.fmean(found) if found else None, sd,
            min(found, default=None), max(found, default=None),
        )  # fmt: skip

    found = [
        d("sendto()", "hpa", [13.0, 14.0, 12.0]),
        d("cgroup cpu_cores", "hpa", [11.0, 12.0, 13.0]),
        d("futex()", "hpa", [1.0, -1.0, 2.0]),  # behind p95 once: not ahead in every run
        d("write()", "hpa", [5.0, None, 6.0]),  # missed a run
        d("prom cpu_cores", "hpa", [-25.0, -20.0, -30.0]),
        d("sendto()", "croft-offered", [30.0, 31.0, 29.0]),  # another arm
        d("sendto()", "hpa", [2.0, 3.0], shape=0.0),
    ]
    lines = leadtime.leading_text(found).splitlines()
    assert lines == [
        "step, bound 10 s, hpa: 1 of 1 signals ahead of p95 in every run; earliest: sendto() +2.5 ± 0.7",
        "60 s ramp, bound 10 s, hpa: 2 of 5 signals ahead of p95 in every run; "
        "earliest: sendto() +13.0 ± 1.0, cgroup cpu_cores +12.0 ± 1.0",
    ]
    assert leadtime.leading_text(found, arm="croft-sendto") == ""
