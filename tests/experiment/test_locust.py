"""The harness's Locust mode for real: headless Locust users (a subprocess of this interpreter)
against the real webapp on loopback, its locust_*.csv files in the run directory, checked against
Locust's own summary and against the CPU the webapp burned for them.

The recording of a Locust run (runs.jsonl, timeline.json, no burst) by `run.py web --users N` is in
tests/k8s/test_experiment_k8s.py, which has the API server `web` needs.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import apps
import locust_mode
from tests.helpers.webapp import running_webapp

RUN_PY = Path(apps.__file__).with_name("run.py")
CPU_MS = 5.0
USERS = 3
DURATION_S = 8
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

STATS_COLUMNS = [
    "Type",
    "Name",
    "Request Count",
    "Failure Count",
    "Median Response Time",
    "Average Response Time",
    "Min Response Time",
    "Max Response Time",
    "Average Content Size",
    "Requests/s",
    "Failures/s",
    "50%",
    "66%",
    "75%",
    "80%",
    "90%",
    "95%",
    "98%",
    "99%",
    "99.9%",
    "99.99%",
    "100%",
]
HISTORY_COLUMNS = [
    "Timestamp",
    "User Count",
    "Type",
    "Name",
    "Requests/s",
    "Failures/s",
    *STATS_COLUMNS[11:],
    "Total Request Count",
    "Total Failure Count",
    "Total Median Response Time",
    "Total Average Response Time",
    "Total Min Response Time",
    "Total Max Response Time",
    "Total Average Content Size",
]


def _children() -> set[int]:
    """The live child processes of this test process (from /proc)."""
    out: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            out |= {int(pid) for pid in (task / "children").read_text().split()}
        except OSError:
            continue
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@attrs.frozen
class Webapp:
    url: str
    pid: int


@pytest.fixture(scope="module")
def webapp() -> Iterator[Webapp]:
    with running_webapp(cpu_ms=CPU_MS) as (url, process):
        yield Webapp(url, process.pid)


@attrs.frozen
class LocustRun:
    run_dir: Path
    code: int
    wall_s: float
    server_cpu_s: float
    children_before: frozenset[int]
    children_after: frozenset[int]


@pytest.fixture(scope="module")
def locust_run(webapp: Webapp, tmp_path_factory: pytest.TempPathFactory) -> LocustRun:
    run_dir = tmp_path_factory.mktemp("locust") / "run"
    before = frozenset(_children())
    cpu_before = _cpu_s(webapp.pid)
    started = time.monotonic()
    code = locust_mode.run_locust(run_dir, webapp.url, ("/work",), USERS, float(USERS), DURATION_S)
    wall = time.monotonic() - started
    return LocustRun(run_dir, code, wall, _cpu_s(webapp.pid) - cpu_before, before, frozenset(_children()))


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as lines:
        reader = csv.DictReader(lines)
        rows = list(reader)
        return list(reader.fieldnames or ()), rows


def test_the_csv_files_land_in_the_run_directory_with_locust_s_columns(locust_run: LocustRun) -> None:
    assert locust_run.code == 0, (locust_run.run_dir / "locust.log").read_text()
    names = sorted(p.name for p in locust_run.run_dir.iterdir())
    assert names == [
        "locust.log",
        "locust_exceptions.csv",
        "locust_failures.csv",
        "locust_stats.csv",
        "locust_stats_history.csv",
    ]
    header, rows = _rows(locust_run.run_dir / "locust_stats.csv")
    assert header == STATS_COLUMNS
    assert [(r["Type"], r["Name"]) for r in rows] == [("GET", "/work"), ("", "Aggregated")]
    header, _ = _rows(locust_run.run_dir / "locust_stats_history.csv")
    assert header == HISTORY_COLUMNS
    assert _rows(locust_run.run_dir / "locust_failures.csv") == (
        ["Method", "Name", "Error", "Occurrences", "First Seen", "Last Seen"],
        [],
    )
    assert _rows(locust_run.run_dir / "locust_exceptions.csv") == (
        ["Count", "Message", "Traceback", "Nodes"],
        [],
    )


def test_the_counts_are_the_final_ones_and_the_webapp_did_that_work(locust_run: LocustRun) -> None:
    row = locust_mode.aggregated(locust_run.run_dir)
    requests = int(row["Request Count"])
    assert requests > 0 and int(row["Failure Count"]) == 0
    # locust_stats.csv holds the final numbers, the ones Locust prints in its summary at the end
    # (without the last snapshot it lags by up to a second of requests).
    log = (locust_run.run_dir / "locust.log").read_text()
    printed = re.search(r"^\s+Aggregated\s+(\d+)\s+(\d+)\(", log, re.MULTILINE)
    assert printed is not None, log
    assert (int(printed[1]), int(printed[2])) == (requests, 0)
    _, history = _rows(locust_run.run_dir / "locust_stats_history.csv")
    totals = [r for r in history if r["Name"] == "Aggregated"]
    assert int(totals[-1]["Total Request Count"]) == requests
    counts = [int(r["Total Request Count"]) for r in totals]
    assert counts == sorted(counts)  # cumulative
    assert max(int(r["User Count"]) for r in totals) == USERS
    # One row per second of the run (a second either side for start-up and the last snapshot).
    seconds = int(totals[-1]["Timestamp"]) - int(totals[0]["Timestamp"])
    assert DURATION_S - 1 <= seconds <= DURATION_S + 2, [r["Timestamp"] for r in totals]
    # Each /work request burned CPU_MS of the webapp's CPU: what Locust counted is what it served.
    assert locust_run.server_cpu_s >= requests * CPU_MS / 1000 * 0.97, (locust_run.server_cpu_s, requests)
    assert locust_run.server_cpu_s <= requests * CPU_MS / 1000 * 1.6 + 0.5, (
        locust_run.server_cpu_s,
        requests,
    )
    assert locust_mode.summary(locust_run.run_dir).startswith(f"{requests} requests, 0 failed, median ")


def _run_time_kept(log: str) -> float:
    """Seconds from Locust's "Run time limit set" to its "--run-time limit reached" (its own log)."""
    stamps = {
        what: time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000
        for stamp, ms, what in re.findall(
            r"^\[(\S+ \S+),(\d+)\] \S+: (Run time limit set|--run-time limit reached)", log, re.MULTILINE
        )
    }
    return stamps["--run-time limit reached"] - stamps["Run time limit set"]


def test_locust_stops_at_its_run_time_and_leaves_no_process(locust_run: LocustRun) -> None:
    assert DURATION_S <= locust_run.wall_s < DURATION_S + locust_mode.GRACE_S
    assert locust_run.children_after <= locust_run.children_before  # the webapp, nothing more
    # The users ran the whole run time, counted from when Locust armed it (not from a clock
    # the event loop read at its start: then it ended early by Locust's start-up).
    assert _run_time_kept((locust_run.run_dir / "locust.log").read_text()) >= DURATION_S - 0.25


def test_failed_requests_are_counted_and_make_a_non_zero_exit(webapp: Webapp, tmp_path: Path) -> None:
    code = locust_mode.run_locust(tmp_path, webapp.url, ("/missing",), 1, 1.0, 2)
    assert code == 1
    row = locust_mode.aggregated(tmp_path)
    assert int(row["Request Count"]) > 0 and row["Failure Count"] == row["Request Count"]
    _, failures = _rows(tmp_path / "locust_failures.csv")
    assert [(f["Name"], f["Error"].split(":")[0]) for f in failures] == [
        ("/missing", "HTTPError('404 Client Error")
    ]


@pytest.mark.parametrize(("users", "spawn_rate", "duration_s"), [(0, 1.0, 5), (2, 0.0, 5), (2, 1.0, 0)])
def test_options_that_make_no_run_are_one_sentence(
    tmp_path: Path, users: int, spawn_rate: float, duration_s: int
) -> None:
    with pytest.raises(locust_mode.LocustError, match=r"^Locust needs at least 1 user, 1 s and a spawn"):
        locust_mode.run_locust(tmp_path / "run", "http://127.0.0.1:9", ("/",), users, spawn_rate, duration_s)
    assert not (tmp_path / "run").exists()


def test_run_py_web_refuses_zero_users_before_touching_a_cluster(tmp_path: Path) -> None:
    argv = ["web", "--prefix", "l-", "--users", "0", "--kubectl", "/nonexistent/kubectl"]
    out = subprocess.run(
        [sys.executable, str(RUN_PY), *argv, "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("run.py: Locust needs at least 1 user") and "Traceback" not in out.stderr
    assert not (tmp_path / "web").exists()
