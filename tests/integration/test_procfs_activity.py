"""ProcFS with the kernel's `Activity` (bpf/oncpu.c) on a copy of a captured /proc tree that the test
changes between scans: a process that neither ran nor moved is not read (its earlier sample comes
back although its files changed), one that ran or moved is, and every process is still checked once
every `verify_every` polls."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.kernel import Activity
from croft.domain.collector.snapshot import CgroupMembership, ProcessSample

PROCFS = Path(__file__).resolve().parents[2] / "fixtures" / "procfs" / "hybrid"
PIDS = orjson.loads((PROCFS / "pids.json").read_bytes())
NOBODY = Activity(ran=frozenset())


def everything(_: int, __: CgroupMembership) -> bool:
    return True


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    shutil.copytree(PROCFS / "proc", root, symlinks=True)
    return root


def burn_more(proc: Path, pid: int) -> None:
    """Add 100 ticks of user time to `pid`'s stat (field 14), as running would."""
    path = proc / str(pid) / "stat"
    head, _, tail = path.read_bytes().rpartition(b") ")
    fields = tail.split(b" ")
    fields[11] = str(int(fields[11]) + 100).encode()
    path.write_bytes(head + b") " + b" ".join(fields))


def by_tgid(samples: tuple[ProcessSample, ...]) -> dict[int, ProcessSample]:
    return {s.tgid: s for s in samples}


def test_a_process_that_did_not_run_is_not_read_and_one_that_ran_is(proc: Path) -> None:
    procfs = ProcFS(proc, verify_every=1000)
    first, _ = procfs.scan(everything, NOBODY)  # nothing known yet: every process is read
    assert [s.tgid for s in first] == sorted(int(p.name) for p in proc.iterdir())
    burn, idle = PIDS["burn"], PIDS["idle"]
    burn_more(proc, burn)
    burn_more(proc, idle)
    second = by_tgid(procfs.scan(everything, Activity(ran=frozenset({burn})))[0])
    assert second[burn].cpu_ticks == by_tgid(first)[burn].cpu_ticks + 100
    assert second[idle] is by_tgid(first)[idle]  # not read: the change is not seen
    unfiltered = by_tgid(ProcFS(proc).scan(everything)[0])
    assert unfiltered[idle].cpu_ticks == by_tgid(first)[idle].cpu_ticks + 100
    third = by_tgid(procfs.scan(everything)[0])  # no activity known: everything is read
    assert third[idle].cpu_ticks == unfiltered[idle].cpu_ticks


def test_every_process_is_checked_once_every_verify_every_polls(proc: Path) -> None:
    procfs = ProcFS(proc, verify_every=3)
    procfs.scan(everything, NOBODY)
    for pid in PIDS.values():
        if (proc / str(pid)).exists():
            burn_more(proc, pid)
    original = by_tgid(ProcFS(PROCFS / "proc").scan(everything)[0])
    seen: dict[int, int] = {}
    for poll in range(3):
        for sample in procfs.scan(everything, NOBODY)[0]:
            if sample.cpu_ticks != original[sample.tgid].cpu_ticks:
                seen.setdefault(sample.tgid, poll)
    assert sorted(seen) == sorted(pid for pid in PIDS.values() if (proc / str(pid)).exists())
    assert len(set(seen.values())) > 1  # spread over the polls, not all in one


def test_a_moved_process_is_read_with_its_new_cgroups(proc: Path) -> None:
    procfs = ProcFS(proc, verify_every=1000)
    idle = PIDS["idle"]
    before = by_tgid(procfs.scan(everything, NOBODY)[0])[idle]
    cgroup = proc / str(idle) / "cgroup"
    cgroup.write_bytes(cgroup.read_bytes().replace(b"0::/", b"0::/moved-here/", 1))
    kept = by_tgid(procfs.scan(everything, NOBODY)[0])[idle]
    assert kept is before
    moved = by_tgid(procfs.scan(everything, Activity(ran=frozenset(), moved=frozenset({idle})))[0])[idle]
    assert moved.cgroups.unified is not None and moved.cgroups.unified.startswith("/moved-here/")


def test_a_process_newly_worth_reading_is_read_though_it_did_not_run(proc: Path) -> None:
    procfs = ProcFS(proc, verify_every=1000)
    idle = PIDS["idle"]
    gpu_holders: set[int] = set()

    def wanted(tgid: int, _: CgroupMembership) -> bool:
        return tgid in gpu_holders

    assert procfs.scan(wanted, NOBODY)[0] == ()
    assert procfs.scan(wanted, NOBODY)[0] == ()
    gpu_holders.add(idle)  # NVML now says it holds GPU memory
    assert [s.tgid for s in procfs.scan(wanted, NOBODY)[0]] == [idle]
    gpu_holders.clear()
    assert procfs.scan(wanted, NOBODY)[0] == ()
