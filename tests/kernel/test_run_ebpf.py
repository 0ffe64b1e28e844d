"""End to end: `croft run` as root, watching a test cgroup whose process makes a known number of
syscalls a second, with `--ebpf auto` on three hosts made in a private mount namespace: without
kernel headers (/lib/modules hidden) it counts with the CO-RE programs, without BTF
(/sys/kernel/btf/vmlinux hidden) with BCC, without either it runs on procfs and cgroupfs alone. The
rows carry the rate (none without eBPF), the log says a step down once, and /metrics the mode."""

from __future__ import annotations

import json
import os
import shlex
import signal
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import workload
from tests.helpers.cli import CROFT
from tests.helpers.loaders import skip_unless_loadable
from tests.helpers.net import free_port

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


HEADERS, BTF = "/lib/modules", "/sys/kernel/btf/vmlinux"
# What each case hides from croft run, what `auto` then picks, and the step down it logs.
CASES = {
    "core": ((HEADERS,), None),
    "bcc": ((BTF,), "eBPF through BCC"),
    "off": ((HEADERS, BTF), "eBPF off, rows carry no syscalls"),
}


def hidden(paths: tuple[str, ...]) -> str:
    """Shell commands hiding `paths` in this mount namespace: a directory under an empty tmpfs, a
    file under /dev/null (no longer a regular file)."""
    return "; ".join(
        f"mount -t tmpfs none {p}" if Path(p).is_dir() else f"mount --bind /dev/null {p}" for p in paths
    )


@pytest.mark.parametrize("mode", list(CASES))
def test_croft_run_auto_counts_with_what_the_host_has(mode: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    if mode != "off":
        skip_unless_loadable(mode)
    hide, step_down = CASES[mode]
    dataset = tmp_path / "data" / "croft-dataset.jsonl"
    name = f"croft-ebpf-e2e-{os.getpid()}"
    port = free_port()
    run = [CROFT, "run", "--dataset", str(dataset), "--watch", name, "--metrics-addr", f"127.0.0.1:{port}"]
    with workload.OwnCgroup(name) as cgroup:
        child = cgroup.spawn(PACED, str(RATE_PER_S))
        croft = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"{hidden(hide)}; exec {shlex.join(run)}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # Seven polls of the child, however long BCC's compile at the start takes on a loaded
        # machine (a fixed 20 s gave 5 rows at load 8).
        deadline = time.monotonic() + 180
        metrics = ""
        try:
            while len(rows_of(dataset, child.pid)) < 7 and time.monotonic() < deadline:
                time.sleep(0.5)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
                metrics = page.read().decode()
        finally:
            croft.send_signal(signal.SIGINT)
            log, _ = croft.communicate(timeout=60)
    assert croft.returncode == 0, log
    assert f'croft_ebpf_mode{{mode="{mode}"}} 1.0' in metrics.splitlines()
    if step_down is None:
        assert "eBPF: CO-RE object" in log and "WARNING" not in log and "no BTF" not in log
    else:
        assert log.count(step_down) == 1, log
    rows = rows_of(dataset, child.pid)
    assert len(rows) >= 6, f"{len(rows)} rows for the watched child; croft said:\n{log}"
    rates = [getppid_rate(row) for row in rows]
    print(f"\ngetppid rates per poll: {rates}")
    if mode == "off":
        for row in rows:  # procfs and cgroupfs still give the rest, a namespace's ingress among it
            ingress = row.get("ingress", {})
            assert isinstance(ingress, dict)
            assert row["syscalls"] == [] and "tcp_data_segments_s" not in ingress, row
        assert all(float(row["usage"]["cpu_cores"]) >= 0 for row in rows)  # type: ignore[index]
        return
    steady = [rate for rate in rates[1:-1] if rate > 0]  # the first poll has no rate yet
    assert len(steady) >= 5
    assert statistics.median(steady) == pytest.approx(RATE_PER_S, rel=0.02)
    for rate in steady:
        assert rate == pytest.approx(RATE_PER_S, rel=0.02)
