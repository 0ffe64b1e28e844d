"""croft run's exit summary on a disk that fills up mid-run: rows count as written only once they
are in the file, and the final line gives the dropped total."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import CROFT
from tests.helpers.dataset import LIVE, file_lines
from tests.helpers.filesystems import fill, small_filesystem

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "fixtures" / "traces" / "live"


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_the_exit_summary_counts_rows_on_disk_and_the_dropped_total(tmp_path: Path) -> None:
    whole = subprocess.run(
        [CROFT, "run", "--replay", str(TRACE), "--dataset", str(tmp_path / "whole" / LIVE)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    made = len(file_lines(tmp_path / "whole" / LIVE))
    assert f"in all: {made} rows written, 0 rows dropped" in whole.stderr
    with small_filesystem(tmp_path / "small", "1m") as disk:
        fill(disk / "filler")
        os.truncate(disk / "filler", (disk / "filler").stat().st_size - 8192)  # room for a few polls
        out = subprocess.run(
            [CROFT, "run", "--replay", str(TRACE), "--dataset", str(disk / LIVE)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        on_disk = len(file_lines(disk / LIVE))
    assert out.returncode == 0, out.stderr
    found = re.search(r"in all: (\d+) rows written, (\d+) rows dropped", out.stderr)
    assert found is not None, out.stderr
    written, dropped = int(found[1]), int(found[2])
    assert (written, dropped) == (on_disk, made - on_disk)
    assert 0 < on_disk < made


# The live loop in a process of its own: polls replayed from the recorded trace as if live, the
# rows written by croft's dataset writer; the source sends its own process `signal` during poll 3.
_LIVE_LOOP = """
import logging, os, signal, sys
from pathlib import Path
from croft.adapters.host.clock import SystemClock
from croft.adapters.host.trace import read_trace, recorded_watch, trace_files
from croft.app import bootstrap, collector

logging.basicConfig(level=logging.INFO, format="croft: %(message)s")
trace = trace_files(Path(sys.argv[2]))[0]
settings = bootstrap.Settings(dataset=Path(sys.argv[1]), watch=recorded_watch(trace))
pipeline = bootstrap.build_pipeline(settings)
polls = read_trace(trace)
fed = []

class Source:
    def poll(self, at):
        fed.append(at)
        if len(fed) == 3:
            os.kill(os.getpid(), getattr(signal, sys.argv[3]))
        return next(polls)

code = collector.run_live(pipeline, Source(), SystemClock(), interval_ns=50_000_000)
print(len(fed), pipeline.rows_on_disk)
sys.exit(code)
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_term_int_and_hup_each_end_the_collector_after_writing_its_last_poll(
    tmp_path: Path, name: str
) -> None:
    live = tmp_path / LIVE
    done = subprocess.run(
        [sys.executable, "-c", _LIVE_LOOP, str(live), str(TRACE), name],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"got {name}: writing the last poll and stopping" in done.stderr
    polls, rows = map(int, done.stdout.split())
    assert polls == 3  # the poll in progress was the last
    assert rows == len(file_lines(live)) > 0
