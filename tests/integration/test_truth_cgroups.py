"""croft's cgroup numbers on a hybrid host against the kernel's own files of the cgroup each row
names (root; hybrid hosts only).

Two CPU burners share the v1 cpu,cpuacct,memory cgroup `croft-split-v1-<pid>` (limited to 0.3
core, so it is throttled) with a process holding 32 MiB; burner A alone also sits in the v2 cgroup
`croft-split-<pid>` (under /sys/fs/cgroup/unified), burner B stays at the v2 root. So A's v1 and
v2 paths differ, and the v1 cgroup burns about twice what A's v2 cgroup burns.

Per README ("Container ids and the row's cgroup"), A's row names its v2 cgroup: CPU from that
cgroup's cpu.stat, and no memory or throttling (the v2 tree of a hybrid host has no memory or cpu
controller), never the v1 cgroup's. B's row names the v1 cgroup: CPU from its cpuacct.usage,
throttling from its cpu.stat, memory from its memory.usage_in_bytes. The test samples the kernel
files every 0.2 s while `croft run` polls, interpolates counters at the first and last row's
instant and compares each row's means with its own cgroup's over the same interval: CPU and memory
within 5 %, the throttled fraction within 0.05.

What a row's cgroup does not offer is left out, never written 0 (the null test): A's rows carry
no memory, OOM kills or throttling, B's no PSI; /metrics serves no such series for their groups,
`croft profile` reports A's memory as not measured, and the collector says once at start which
figures the hybrid layout cannot give.
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import socket
import statistics
import subprocess
import time
from pathlib import Path

import httpx
import msgspec
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.net import free_port
from tests.helpers.workload import ALLOC, BURN, SplitCgroups

from croft.domain.metrics import names
from croft.domain.metrics.exposition import parse_exposition

pytestmark = [pytest.mark.root, pytest.mark.slow]
WINDOW_S = 20.0


def _at(samples: list[tuple[int, int]], unix_ms: int) -> float:
    """A cumulative counter interpolated at `unix_ms` from (unix_ms, value) samples."""
    times = [t for t, _ in samples]
    i = bisect.bisect_left(times, unix_ms)
    if i == 0 or i == len(samples):
        raise AssertionError(f"no kernel samples around {unix_ms}")
    (t0, v0), (t1, v1) = samples[i - 1], samples[i]
    return v0 + (v1 - v0) * (unix_ms - t0) / (t1 - t0)


def test_cgroup_cpu_is_the_named_cgroups_own_on_both_hierarchies(tmp_path: Path) -> None:
    hybrid = Path("/sys/fs/cgroup/unified/cgroup.controllers").exists()
    v1 = all(Path(f"/sys/fs/cgroup/{c}/cgroup.procs").exists() for c in ("cpu", "cpuacct", "memory"))
    if os.geteuid() != 0 or not hybrid or not v1:
        pytest.skip("needs root on a hybrid host (v1 cpu, cpuacct, memory and v2 at /sys/fs/cgroup/unified)")
    v2_name, v1_name = f"croft-split-{os.getpid()}", f"croft-split-v1-{os.getpid()}"
    dataset = tmp_path / "croft-dataset.jsonl"
    metrics = f"127.0.0.1:{free_port()}"
    with SplitCgroups(v2_name, v1_name, cpu_quota_us=30_000, memory=True) as groups:
        a = groups.spawn(BURN, in_v2=True).pid
        b = groups.spawn(BURN, in_v2=False).pid
        groups.spawn(ALLOC, in_v2=False, args=("32",))  # 32 MiB in the v1 memory cgroup
        v2_stat = groups.v2 / "cpu.stat"
        v1_usage = Path("/sys/fs/cgroup/cpuacct") / v1_name / "cpuacct.usage"
        log = tmp_path / "croft.log"
        with log.open("wb") as log_file:
            command = [CROFT, "run", "--watch", "croft-split", "--dataset", str(dataset)]
            croft = subprocess.Popen([*command, "--metrics-addr", metrics], stderr=log_file)
        exposition = ""
        v2_samples: list[tuple[int, int]] = []
        v1_samples: list[tuple[int, int]] = []
        periods: list[tuple[int, int]] = []
        throttled: list[tuple[int, int]] = []
        memory: list[tuple[int, int]] = []
        v1_cpu_stat = Path("/sys/fs/cgroup/cpu") / v1_name / "cpu.stat"
        v1_memory = Path("/sys/fs/cgroup/memory") / v1_name / "memory.usage_in_bytes"
        try:
            deadline = time.monotonic() + 180
            while not (dataset.exists() and dataset.stat().st_size) and time.monotonic() < deadline:
                if croft.poll() is not None:
                    pytest.skip(f"croft run could not start here: {log.read_text()[-300:]}")
                time.sleep(0.2)
            end = time.monotonic() + WINDOW_S
            while time.monotonic() < end:
                now_ms = time.time_ns() // 1_000_000
                stat = v2_stat.read_text().splitlines()
                usec = next(int(line.split()[1]) for line in stat if line.startswith("usage_usec "))
                v2_samples.append((now_ms, usec * 1000))
                v1_samples.append((now_ms, int(v1_usage.read_text())))
                cpu_stat = dict(line.split() for line in v1_cpu_stat.read_text().splitlines())
                periods.append((now_ms, int(cpu_stat["nr_periods"])))
                throttled.append((now_ms, int(cpu_stat["nr_throttled"])))
                memory.append((now_ms, int(v1_memory.read_text())))
                time.sleep(0.2)
            exposition = httpx.get(f"http://{metrics}/metrics", timeout=10).text
        finally:
            croft.send_signal(signal.SIGTERM)
            assert croft.wait(timeout=30) == 0
    rows = [msgspec.json.decode(line) for line in dataset.read_bytes().splitlines()]
    assert {r["node"] for r in rows} == {socket.gethostname()}  # a live row names the node it was written on
    lo, hi = v2_samples[0][0], v2_samples[-1][0]
    report = []
    for pid, name, samples, cgroup in (
        (a, "A", v2_samples, f"/{v2_name}"),
        (b, "B", v1_samples, f"/{v1_name}"),
    ):
        mine = [r for r in rows if r["tgid"] == pid and lo < r["unix_ms"] < hi]
        assert len(mine) >= 5, f"croft wrote {len(mine)} rows for burner {name} in the window"
        assert {r["process"]["cgroup"] for r in mine} == {cgroup}
        first, last = mine[0]["unix_ms"], mine[-1]["unix_ms"]
        rated = [r for r in mine if r["unix_ms"] > first]
        croft_cores = statistics.fmean(r["cgroup_usage"]["cpu_cores"] for r in rated)
        kernel_cores = (_at(samples, last) - _at(samples, first)) / ((last - first) * 1e6)
        hierarchy = "v2 cpu.stat usage_usec" if samples is v2_samples else "v1 cpuacct.usage"
        report.append(
            f"burner {name} row cgroup {cgroup}: croft {croft_cores:.3f} cores, "
            f"kernel {hierarchy} {kernel_cores:.3f}"
        )
        assert abs(croft_cores - kernel_cores) <= 0.05 * kernel_cores, report[-1]
        usage = [r["cgroup_usage"] for r in rated]
        if name == "A":
            # A's v1 cgroup holds both burners: reading it for A's row would be far off
            v1_cores = (_at(v1_samples, last) - _at(v1_samples, first)) / ((last - first) * 1e6)
            report.append(f"burner A's v1 cpuacct cgroup /{v1_name} (both burners): {v1_cores:.3f} cores")
            assert v1_cores > 1.3 * kernel_cores, report[-1]
            # the v2 cgroup offers neither; the v1 cgroup's memory and throttling are another
            # cgroup's: left out of the row, never written 0
            for gone in ("memory_bytes", "oom_kills", "cpu_throttled_fraction"):
                assert not any(gone in u for u in usage), (gone, usage[0])
            assert all("cpu_pressure_avg10" in u for u in usage)  # PSI: the v2 cgroup's own
        else:
            # a v1 cgroup has no PSI
            for gone in ("cpu_pressure_avg10", "memory_pressure_avg10", "io_pressure_avg10"):
                assert not any(gone in u for u in usage), (gone, usage[0])
            kernel_fraction = (_at(throttled, last) - _at(throttled, first)) / (
                _at(periods, last) - _at(periods, first)
            )
            croft_fraction = statistics.fmean(u["cpu_throttled_fraction"] for u in usage)
            report.append(
                f"burner B throttled fraction: croft {croft_fraction:.3f}, "
                f"kernel v1 cpu.stat {kernel_fraction:.3f}"
            )
            assert abs(croft_fraction - kernel_fraction) <= 0.05, report[-1]
            times = [t for t, _ in memory]
            pairs = [
                (
                    r["cgroup_usage"]["memory_bytes"],
                    memory[min(bisect.bisect_left(times, r["unix_ms"]), len(memory) - 1)][1],
                )
                for r in rated
            ]
            croft_mib = statistics.fmean(c for c, _ in pairs) / 2**20
            kernel_mib = statistics.fmean(k for _, k in pairs) / 2**20
            report.append(
                f"burner B memory: croft {croft_mib:.1f} MiB, "
                f"kernel v1 memory.usage_in_bytes {kernel_mib:.1f} MiB"
            )
            assert abs(croft_mib - kernel_mib) <= 0.05 * kernel_mib, report[-1]
    _check_absent_elsewhere(exposition, dataset, log.read_text(), f"/{v2_name}", f"/{v1_name}")
    print("\n".join(report))


def _check_absent_elsewhere(exposition: str, dataset: Path, log: str, v2_cgroup: str, v1_cgroup: str) -> None:
    """/metrics serves no series of a figure the group's cgroup does not offer, croft profile says
    it was not measured, and croft run said at start which figures this layout cannot give."""
    served: dict[str, set[str]] = {}
    for sample in parse_exposition(exposition):
        if sample.label(names.LABEL_CGROUP) in (v2_cgroup, v1_cgroup):
            served.setdefault(sample.label(names.LABEL_CGROUP), set()).add(sample.name)
    v2_only = {names.CONTAINER_CPU_CORES, names.CONTAINER_PRESSURE_RATIO}
    v1_only = {
        names.CONTAINER_CPU_CORES,
        names.CONTAINER_MEMORY_USAGE_BYTES,
        names.CONTAINER_CPU_THROTTLED_FRACTION,
    }
    assert v2_only <= served[v2_cgroup], served
    assert (
        not {names.CONTAINER_MEMORY_USAGE_BYTES, names.CONTAINER_CPU_THROTTLED_FRACTION} & served[v2_cgroup]
    )
    assert v1_only <= served[v1_cgroup], served
    assert names.CONTAINER_PRESSURE_RATIO not in served[v1_cgroup]
    out = subprocess.run(
        [CROFT, "profile", "--cgroup", v2_cgroup, "--dataset", str(dataset)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    profile = json.loads(out.stdout)
    assert profile["memory_bytes"] is None and profile["cpu_throttled_fraction"] is None, profile
    assert profile["not_measured"] == ["memory_bytes", "cpu_throttled_fraction"]
    assert profile["cpu_cores"]["mean"] > 0
    hybrid = [line for line in log.splitlines() if line.startswith("croft: hybrid cgroups:")]
    assert len(hybrid) == 1, log
    assert "a row whose cgroup is a v2 path gets no memory, OOM kills or CPU throttling" in hybrid[0]
    assert "one whose cgroup is a v1 path gets no PSI pressure" in hybrid[0]
