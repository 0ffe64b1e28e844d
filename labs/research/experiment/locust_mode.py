"""Locust mode: closed-loop users (each waits for its answer before the next request). Runs Locust
headless as a subprocess; its CSV files land as <run>/locust_stats.csv, locust_stats_history.csv,
locust_failures.csv and locust_exceptions.csv. Use open-loop load for bursts: once the app
saturates, more users mean longer queues, not more requests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCUSTFILE = HERE / "locustfile.py"


class LocustMissing(RuntimeError):
    """Locust is not installed in this environment."""


def locust_argv(
    run_dir: Path, host: str, users: int, spawn_rate: float, duration_s: int, locust: str = "locust"
) -> list[str]:
    """The Locust command line of a run: headless, CSV history into `run_dir/locust_*.csv`."""
    return [
        locust,
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


def run_locust(
    run_dir: Path, host: str, paths: tuple[str, ...], users: int, spawn_rate: float, duration_s: int
) -> int:
    """Run Locust to the end; returns its exit code."""
    locust = shutil.which("locust") or str(Path(sys.executable).parent / "locust")
    if not Path(locust).exists():
        raise LocustMissing("locust is not installed here: `uv sync` in labs/research/experiment installs it")
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CROFT_LOCUST_PATHS": ",".join(paths)}
    argv = locust_argv(run_dir, host, users, spawn_rate, duration_s, locust)
    return subprocess.run(argv, env=env, check=False, timeout=duration_s + 120).returncode
