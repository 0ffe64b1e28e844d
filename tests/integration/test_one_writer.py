"""One writer per dataset, with real collectors (root): two `croft run` started together on one
path, and a live file deleted under a running one.

Before the lock, the second collector took the first one's live file for an earlier run's leftover
and closed it as a segment, the first wrote on into a file no name reached, and the two reported
more rows written than the dataset kept; a collector whose live file was deleted wrote on into the
unlinked file with /healthz saying ok.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.net import free_port
from tests.helpers.workload import BURN, OwnCgroup

from croft.domain.metrics import names
from croft.domain.metrics.exposition import parse_exposition

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _rows(path: Path) -> int:
    return sum(1 for line in path.read_bytes().splitlines() if line) if path.exists() else 0


def _all_rows(directory: Path) -> int:
    """Rows in every plain file of the dataset directory (the runs are too short to rotate)."""
    return sum(_rows(p) for p in directory.glob("*.jsonl"))


def _wait(what: str, check: object, timeout_s: float, croft: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if croft.poll() is not None:
            pytest.skip(f"croft run could not start here: {log.read_text()[-300:]}")
        assert time.monotonic() < deadline, f"no {what} in {timeout_s} s: {log.read_text()[-1000:]}"
        time.sleep(0.2)


@contextmanager
def _burner() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    with OwnCgroup(f"croft-one-writer-{os.getpid()}") as group:
        group.spawn(BURN)
        yield group.name


def test_two_collectors_started_together_on_one_path_one_refuses_and_no_row_is_lost(
    tmp_path: Path,
) -> None:
    dataset = tmp_path / "data" / "croft-dataset.jsonl"
    with _burner() as watch:
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        runs = []
        for log in logs:
            with log.open("wb") as log_file:
                command = [CROFT, "run", "--watch", watch, "--dataset", str(dataset)]
                runs.append(subprocess.Popen(command, stderr=log_file))
        try:
            deadline = time.monotonic() + 60
            while all(run.poll() is None for run in runs) and time.monotonic() < deadline:
                time.sleep(0.1)
            ended = [run for run in runs if run.poll() is not None]
            assert len(ended) == 1, [log.read_text()[-500:] for log in logs]
            (loser,) = ended
            (winner,) = [run for run in runs if run is not loser]
            loser_log = logs[runs.index(loser)].read_text()
            winner_log = logs[runs.index(winner)]
            assert loser.returncode == 1, loser_log
            assert loser_log.strip().splitlines() == [
                f"croft: another croft run (pid {winner.pid}) writes the dataset in {dataset.parent}: "
                "stop it, or give this one another --dataset (DATASET_PATH); two collectors on one "
                "directory would close each other's live file and lose rows"
            ]
            _wait("rows", lambda: _rows(dataset) > 0, 180, winner, winner_log)
            time.sleep(6)
        finally:
            for run in runs:
                if run.poll() is None:
                    run.send_signal(signal.SIGTERM)
            codes = [run.wait(timeout=30) for run in runs]
    assert codes[runs.index(winner)] == 0, winner_log.read_text()
    written = re.search(r"in all: (\d+) rows written", winner_log.read_text())
    assert written, winner_log.read_text()
    assert int(written.group(1)) == _all_rows(dataset.parent) > 0
    assert [p.name for p in dataset.parent.glob("*.jsonl")] == [dataset.name]  # nothing was closed


def test_a_live_file_deleted_under_a_running_collector_is_replaced_counted_and_unhealthy(
    tmp_path: Path,
) -> None:
    dataset = tmp_path / "croft-dataset.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "croft.log"
    with _burner() as watch, log.open("wb") as log_file:
        command = [CROFT, "run", "--watch", watch, "--dataset", str(dataset)]
        croft = subprocess.Popen([*command, "--metrics-addr", f"127.0.0.1:{port}"], stderr=log_file)
        try:
            _wait("rows", lambda: _rows(dataset) > 0, 180, croft, log)
            assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            dataset.unlink()
            _wait("new live file", lambda: _rows(dataset) > 0, 10, croft, log)
            health = httpx.get(f"{url}/healthz", timeout=5)
            body = httpx.get(f"{url}/metrics", timeout=5).text
        finally:
            croft.send_signal(signal.SIGTERM)
            code = croft.wait(timeout=30)
    assert code == 0, log.read_text()
    assert health.status_code == 503, health.text
    assert health.text.startswith("the live file was renamed or deleted under the collector"), health.text
    (lost,) = [s for s in parse_exposition(body) if s.name == names.LIVE_FILES_LOST_TOTAL]
    assert lost.value == 1.0
    assert f"the live file {dataset} was renamed or deleted under this collector" in log.read_text()
