"""End to end: `croft run` as root with eBPF, watching a test cgroup whose process makes a known
number of syscalls a second; the rows carry that rate."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import workload
from tests.helpers.cli import CROFT

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

RATE_PER_S = 2000
# getppid at argv[1] calls a second, in 200 paced chunks a second, on an absolute schedule.
PACED = (
    "import os, sys, time\n"
    "rate = int(sys.argv[1]); per_chunk = rate // 200; g = os.getppid\n"
    "start = time.monotonic(); chunk = 0\n"
    "while True:\n"
    "    for _ in range(per_chunk):\n        g()\n"
    "    chunk += 1\n"
    "    time.sleep(max(0.0, start + chunk / 200 - time.monotonic()))\n"
)


def rows_of(dataset: Path, tgid: int) -> list[dict[str, object]]:
    """The rows of `tgid` in the live file(s); a line still being written (no newline yet) is not
    read."""
    rows = []
    for path in sorted(dataset.parent.glob("*.jsonl")):
        for line in path.read_text().splitlines(keepends=True):
            if not line.endswith("\n"):
                break
            row = json.loads(line)
            if row["tgid"] == tgid:
                rows.append(row)
    return rows


def getppid_rate(row: dict[str, object]) -> float:
    syscalls = row.get("syscalls", [])
    assert isinstance(syscalls, list)
    return next((float(s["rate_per_sec"]) for s in syscalls if s["name"] == "getppid"), 0.0)


def test_croft_run_rows_carry_the_syscall_rate_of_a_watched_process(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    dataset = tmp_path / "data" / "croft-dataset.jsonl"
    name = f"croft-ebpf-e2e-{os.getpid()}"
    with workload.OwnCgroup(name) as cgroup:
        child = cgroup.spawn(PACED, str(RATE_PER_S))
        croft = subprocess.Popen(
            [CROFT, "run", "--dataset", str(dataset), "--watch", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # Seven polls of the child, however long BCC's compile at the start takes on a loaded
        # machine (a fixed 20 s gave 5 rows at load 8).
        deadline = time.monotonic() + 180
        try:
            while len(rows_of(dataset, child.pid)) < 7 and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            croft.send_signal(signal.SIGINT)
            log, _ = croft.communicate(timeout=60)
    assert croft.returncode == 0, log
    rows = rows_of(dataset, child.pid)
    rates = [getppid_rate(row) for row in rows]
    print(f"\ngetppid rates per poll: {rates}")
    assert len(rows) >= 6, f"{len(rows)} rows for the watched child; croft said:\n{log}"
    steady = [rate for rate in rates[1:-1] if rate > 0]  # the first poll has no rate yet
    assert len(steady) >= 5
    assert statistics.median(steady) == pytest.approx(RATE_PER_S, rel=0.02)
    for rate in steady:
        assert rate == pytest.approx(RATE_PER_S, rel=0.02)
