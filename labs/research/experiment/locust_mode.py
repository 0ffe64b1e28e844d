"""Locust mode: closed-loop users (each waits for its answer before the next request). Runs Locust
headless as a subprocess of this very interpreter (`python -m locust`, so the environment that runs
the harness is the one that runs Locust); its CSV files land as <run>/locust_stats.csv,
locust_stats_history.csv, locust_failures.csv and locust_exceptions.csv, its log as <run>/locust.log.
Use open-loop load for bursts: once the app saturates, more users mean longer queues, not more
requests."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCUSTFILE = HERE / "locustfile.py"
CSV_FILES = ("stats", "stats_history", "failures", "exceptions")
# Locust stops on its own at --run-time; beyond that it gets this long to write its files and exit.
GRACE_S = 60


class LocustError(RuntimeError):
    """Locust could not run the users; the message says why."""


class LocustMissing(LocustError):
    """Locust is not installed in this environment."""


def locust_command() -> list[str]:
    """How to start Locust from this interpreter; `LocustMissing` when it cannot import locust."""
    if importlib.util.find_spec("locust") is None:
        raise LocustMissing(
            f"locust is not installed for {sys.executable}: `uv sync` in labs/research/experiment "
            "(or `pip install -e '.[dev]'` in croft's checkout) installs it"
        )
    return [sys.executable, "-m", "locust"]


def locust_argv(
    run_dir: Path,
    host: str,
    users: int,
    spawn_rate: float,
    duration_s: int,
    locust: Sequence[str] = ("locust",),
) -> list[str]:
    """The Locust command line of a run: headless, CSV history into `run_dir/locust_*.csv`."""
    return [
        *locust,
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--host",
        host,
        "--users",
        str(users),
        "--spawn-rate",
        str(spawn_rate),
        "--run-time",
        f"{duration_s}s",
        "--csv",
        str(run_dir / "locust"),
        "--csv-full-history",
        "--only-summary",
    ]


def check(users: int, spawn_rate: float, duration_s: int) -> list[str]:
    """Before anything is deployed: the options make a run and Locust is here; its command."""
    if users < 1 or duration_s < 1 or spawn_rate <= 0:
        raise LocustError(
            f"Locust needs at least 1 user, 1 s and a spawn rate above 0 (got {users} users, "
            f"{duration_s} s, {spawn_rate}/s)"
        )
    return locust_command()


def run_locust(
    run_dir: Path, host: str, paths: tuple[str, ...], users: int, spawn_rate: float, duration_s: int
) -> int:
    """Run `users` Locust users against `host` for `duration_s` seconds; returns Locust's exit code
    (1 when some request failed). Its output goes to `run_dir/locust.log`, so that the harness's own
    stdout stays the run directory alone."""
    argv = locust_argv(run_dir, host, users, spawn_rate, duration_s, check(users, spawn_rate, duration_s))
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CROFT_LOCUST_PATHS": ",".join(paths)}
    log_path = run_dir / "locust.log"
    with log_path.open("wb") as log:
        try:
            done = subprocess.run(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=duration_s + GRACE_S,
            )
        except subprocess.TimeoutExpired:
            raise LocustError(
                f"Locust did not stop {GRACE_S} s after its {duration_s} s run and was killed; see {log_path}"
            ) from None
    missing = [name for name in CSV_FILES if not (run_dir / f"locust_{name}.csv").is_file()]
    if missing:
        raise LocustError(
            f"Locust exited {done.returncode} without writing locust_{missing[0]}.csv; see {log_path}"
        )
    return done.returncode


def aggregated(run_dir: Path) -> dict[str, str]:
    """The Aggregated row of `run_dir/locust_stats.csv` (Locust's own column names)."""
    path = run_dir / "locust_stats.csv"
    with path.open(newline="", encoding="utf-8") as rows:
        for row in csv.DictReader(rows):
            if row.get("Name") == "Aggregated":
                return row
    raise LocustError(f"{path} has no Aggregated row")


def summary(run_dir: Path) -> str:
    """One line: requests, failures, median and p95 latency of the whole run."""
    row = aggregated(run_dir)
    return (
        f"{row['Request Count']} requests, {row['Failure Count']} failed, "
        f"median {row['Median Response Time']} ms, p95 {row['95%']} ms"
    )
