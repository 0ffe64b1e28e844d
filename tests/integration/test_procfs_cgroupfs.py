"""procfs and cgroupfs adapters on captured trees of each cgroup layout, on damaged copies, and on
the live host with real processes that exit mid-read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.container import row_cgroup
from croft.domain.collector.procparse import (
    parse_flat_keyed,
    parse_psi_some,
    parse_psi_some_avg10,
    parse_stat,
)
from croft.domain.collector.snapshot import CgroupMembership

PROCFS = Path(__file__).resolve().parents[2] / "fixtures" / "procfs"
PIDS = msgspec.json.decode((PROCFS / "hybrid" / "pids.json").read_bytes())
CAPTURED = sorted(int(p.name) for p in (PROCFS / "hybrid" / "proc").iterdir())


def everything(_: int, __: CgroupMembership) -> bool:
    return True


@pytest.mark.parametrize("layout", ["hybrid", "v2", "v1"])
def test_each_layout_reads_the_same_numbers(layout: str) -> None:
    samples, dropped = ProcFS(PROCFS / layout / "proc").scan(everything)
    assert dropped == 0
    assert [s.tgid for s in samples] == CAPTURED
    burn = next(s for s in samples if s.tgid == PIDS["burn"])
    raw = parse_stat((PROCFS / layout / "proc" / str(PIDS["burn"]) / "stat").read_bytes())
    assert (burn.cpu_ticks, burn.start_ticks, burn.threads) == (raw.cpu_ticks, raw.start_ticks, raw.threads)
    assert burn.exe.endswith("python3.11") and burn.cwd.startswith("/")
    assert "libc.so.6" in burn.libraries
    cgroupfs = CgroupFS(PROCFS / layout / "cgroup")
    assert cgroupfs.layout == layout
    (group,) = cgroupfs.read_all([burn.cgroups])
    hybrid_procs, _ = ProcFS(PROCFS / "hybrid" / "proc").scan(everything)
    (expected,) = CgroupFS(PROCFS / "hybrid" / "cgroup").read_all([hybrid_procs[0].cgroups])
    assert group.cpu_usage_ns and expected.cpu_usage_ns
    assert group.cpu_usage_ns // 1000 == expected.cpu_usage_ns // 1000  # v2 counts microseconds
    assert group.memory_bytes == expected.memory_bytes and group.memory_bytes
    assert (group.nr_periods, group.nr_throttled, group.oom_kills) == (
        expected.nr_periods,
        expected.nr_throttled,
        expected.oom_kills,
    )
    if layout == "v1":
        assert group.cpu_pressure_avg10 is None  # PSI lives in v2 only
    else:
        assert group.cpu_pressure_avg10 == expected.cpu_pressure_avg10 is not None


def test_damaged_tree_drops_the_torn_and_the_vanished_pid_and_counts_them() -> None:
    samples, dropped = ProcFS(PROCFS / "damaged" / "proc").scan(everything)
    assert dropped == 2
    assert {s.tgid for s in samples} == set(CAPTURED) - {PIDS["burn"], PIDS["idle"]}


def test_unwanted_processes_are_not_read_in_full() -> None:
    asked: list[int] = []

    def only_alloc(tgid: int, _: CgroupMembership) -> bool:
        asked.append(tgid)
        return tgid == PIDS["alloc"]

    samples, _ = ProcFS(PROCFS / "hybrid" / "proc").scan(only_alloc)
    assert [s.tgid for s in samples] == [PIDS["alloc"]]
    assert sorted(asked) == CAPTURED


def test_live_host_reads_this_process() -> None:
    samples, _ = ProcFS().scan(lambda tgid, _: tgid == os.getpid())
    (me,) = samples
    assert me.exe == os.path.realpath(sys.executable) or me.exe.startswith("/")
    assert me.rss_bytes > 1 << 20 and me.threads >= 1 and me.cpu_ticks >= 0
    assert me.runqueue_ns is not None and me.read_bytes is not None
    (group,) = CgroupFS().read_all([me.cgroups])
    named = row_cgroup(me.cgroups)
    if named in (me.cgroups.unified, me.cgroups.controller("cpuacct")):
        assert group.cpu_usage_ns is not None and group.cpu_usage_ns > 0
    else:  # no CPU hierarchy has this process at the cgroup its row names (a split hybrid host)
        assert group.cpu_usage_ns is None


@pytest.mark.root
def test_live_host_psi_totals_are_the_kernels_counters() -> None:
    """A busy process in a v2 cgroup of its own: croft reads the PSI `some total` of each resource
    between two reads of the file itself (the counter only grows)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup")
    cgroupfs = CgroupFS()
    if cgroupfs.unified is None:
        pytest.skip("this host has no cgroup v2 hierarchy, where PSI lives")
    own = Path(cgroupfs.unified) / f"croft-psi-test-{os.getpid()}"
    own.mkdir()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        (own / "cgroup.procs").write_text(f"{busy.pid}\n")
        if not (own / "cpu.pressure").exists():
            pytest.skip(f"{own}/cpu.pressure does not exist: the kernel has no PSI (psi=0 or CONFIG_PSI off)")
        samples, _ = ProcFS().scan(lambda tgid, _: tgid == busy.pid)
        (process,) = samples
        assert row_cgroup(process.cgroups) == process.cgroups.unified == f"/{own.name}"
        before = parse_psi_some((own / "cpu.pressure").read_bytes())[1]
        (group,) = cgroupfs.read_all([process.cgroups])
        after = parse_psi_some((own / "cpu.pressure").read_bytes())[1]
        assert before is not None and after is not None
        assert group.cpu_pressure_stalled_us is not None
        assert before <= group.cpu_pressure_stalled_us <= after
        assert group.memory_pressure_stalled_us is not None and group.io_pressure_stalled_us is not None
    finally:
        busy.kill()
        busy.wait()
        own.rmdir()


SPLIT = PROCFS / "split"


def test_split_hybrid_paths_read_every_number_from_the_row_cgroup() -> None:
    """A sits in v2 /croft-split and v1 cpu,cpuacct /croft-split-v1; B in v2 / and v1 /croft-split-v1;
    both in an unrelated v1 memory cgroup. Each sample's numbers are its row cgroup's files only."""
    pids = msgspec.json.decode((SPLIT / "pids.json").read_bytes())
    samples, dropped = ProcFS(SPLIT / "proc").scan(everything)
    assert dropped == 0
    by_pid = {s.tgid: s for s in samples}
    a, b = by_pid[pids["a"]].cgroups, by_pid[pids["b"]].cgroups
    assert (a.unified, a.controller("cpuacct")) == ("/croft-split", "/croft-split-v1")
    assert row_cgroup(a) == "/croft-split" and row_cgroup(b) == "/croft-split-v1"
    cgroupfs = CgroupFS(SPLIT / "cgroup")
    assert cgroupfs.layout == "hybrid"
    group_a, group_b = cgroupfs.read_all([a, b])
    cg = SPLIT / "cgroup"
    v2_stat = parse_flat_keyed((cg / "unified" / "croft-split" / "cpu.stat").read_bytes())
    assert group_a.cpu_usage_ns == v2_stat["usage_usec"] * 1000
    assert group_a.cpu_pressure_avg10 == parse_psi_some_avg10(
        (cg / "unified" / "croft-split" / "cpu.pressure").read_bytes()
    )
    assert group_a.cpu_pressure_stalled_us == 1_555_435  # its `some total=`, microseconds
    # the v2 tree of a hybrid host has no memory or CPU bandwidth files; the v1 ones are elsewhere
    assert (group_a.memory_bytes, group_a.oom_kills, group_a.nr_periods) == (None, None, None)
    v1_usage = int((cg / "cpuacct" / "croft-split-v1" / "cpuacct.usage").read_text())
    assert v1_usage != group_a.cpu_usage_ns
    assert group_b.cpu_usage_ns == v1_usage
    v1_stat = parse_flat_keyed((cg / "cpu" / "croft-split-v1" / "cpu.stat").read_bytes())
    assert group_b.nr_periods == v1_stat["nr_periods"]
    # B's v2 path is the root and its memory cgroup another one: neither is B's row cgroup
    assert (group_b.cpu_pressure_avg10, group_b.memory_bytes, group_b.oom_kills) == (None, None, None)


@pytest.mark.root
def test_live_pid_that_exits_mid_read_is_dropped_and_counted() -> None:
    if os.geteuid() != 0:
        pytest.skip("reading every process's files needs root")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        killed = []

        def kill_it_now(tgid: int, _: CgroupMembership) -> bool:
            if tgid == child.pid:
                child.kill()
                child.wait()  # reaped: /proc/<pid> is gone before its status is read
                killed.append(tgid)
                return True
            return False

        samples, dropped = ProcFS().scan(kill_it_now)
        assert killed == [child.pid]
        assert dropped >= 1
        assert child.pid not in {s.tgid for s in samples}
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
