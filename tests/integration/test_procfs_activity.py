"""ProcFS with the kernel's `Activity` (bpf/oncpu.c) on a copy of a captured /proc tree that the test
changes between scans: a process that neither ran nor moved is not read (its earlier sample comes
back although its files changed), one that ran or moved is, and every process is still checked once
every `verify_every` polls. Each test runs both scans: the one that walks every pid and the
incremental one (`recheck` given: only what changed is looked at)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path

import msgspec
import pytest

from croft.adapters.host.procfs import ProcFS, Wanted
from croft.domain.collector.kernel import Activity
from croft.domain.collector.snapshot import CgroupMembership, ProcessSample

PROCFS = Path(__file__).resolve().parents[2] / "fixtures" / "procfs" / "hybrid"
PIDS = msgspec.json.decode((PROCFS / "pids.json").read_bytes())
NOBODY = Activity(ran=frozenset())


def everything(_: int, __: CgroupMembership) -> bool:
    return True


class Scanner:
    """`ProcFS.scan` with the kernel's activity, walking every pid or (`incremental`) only what changed."""

    def __init__(self, procfs: ProcFS, incremental: bool) -> None:
        self.procfs = procfs
        self.incremental = incremental
        self.deltas = 0
        self._last: dict[int, ProcessSample] | None = None

    def scan(
        self, wanted: Wanted, activity: Activity | None, recheck: Collection[int] = ()
    ) -> tuple[ProcessSample, ...]:
        samples = self.procfs.scan(wanted, activity, frozenset(recheck) if self.incremental else None)[0]
        assert [s.tgid for s in samples] == sorted(s.tgid for s in samples)
        self.check_delta(samples)
        return samples

    def check_delta(self, samples: tuple[ProcessSample, ...]) -> None:
        """The scan's `delta`, when it gives one, is what changed since the scan before, exactly."""
        now = by_tgid(samples)
        delta = self.procfs.delta
        if delta is not None:
            assert self.incremental and self._last is not None
            assert delta.changed == {pid for pid, sample in now.items() if self._last.get(pid) is not sample}
            assert delta.gone == self._last.keys() - now.keys()
            assert delta.by_tgid == now and all(delta.by_tgid[pid] is now[pid] for pid in now)
            self.deltas += 1
        self._last = now


@pytest.fixture(params=[False, True], ids=["every-pid", "incremental"])
def incremental(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


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


def reclaim(proc: Path, pid: int, pages: int = 10) -> None:
    """Take `pages` resident pages from `pid` (`stat` field 24), as the kernel reclaiming them while
    it sleeps would."""
    path = proc / str(pid) / "stat"
    head, _, tail = path.read_bytes().rpartition(b") ")
    fields = tail.split(b" ")
    fields[21] = str(int(fields[21]) - pages).encode()
    path.write_bytes(head + b") " + b" ".join(fields))


def by_tgid(samples: tuple[ProcessSample, ...]) -> dict[int, ProcessSample]:
    return {s.tgid: s for s in samples}


def test_a_process_that_did_not_run_is_not_read_and_one_that_ran_is(proc: Path, incremental: bool) -> None:
    procfs = Scanner(ProcFS(proc, verify_every=1000), incremental)
    first = procfs.scan(everything, NOBODY)  # nothing known yet: every process is read
    assert [s.tgid for s in first] == sorted(int(p.name) for p in proc.iterdir())
    burn, idle = PIDS["burn"], PIDS["idle"]
    burn_more(proc, burn)
    burn_more(proc, idle)
    second = by_tgid(procfs.scan(everything, Activity(ran=frozenset({burn}))))
    assert second[burn].cpu_ticks == by_tgid(first)[burn].cpu_ticks + 100
    assert second[idle] is by_tgid(first)[idle]  # not read: the change is not seen
    unfiltered = by_tgid(ProcFS(proc).scan(everything)[0])
    assert unfiltered[idle].cpu_ticks == by_tgid(first)[idle].cpu_ticks + 100
    third = by_tgid(procfs.scan(everything, None))  # no activity known: everything is read
    assert third[idle].cpu_ticks == unfiltered[idle].cpu_ticks


def test_every_process_is_checked_once_every_verify_every_polls(proc: Path, incremental: bool) -> None:
    pids = [pid for pid in PIDS.values() if (proc / str(pid)).exists()]
    procfs = Scanner(ProcFS(proc, verify_every=3), incremental)
    original = by_tgid(procfs.scan(everything, NOBODY))
    for pid in pids:
        reclaim(proc, pid)
    seen: dict[int, int] = {}
    for poll in range(3):
        for sample in procfs.scan(everything, NOBODY):
            if sample.rss_bytes != original[sample.tgid].rss_bytes:
                seen.setdefault(sample.tgid, poll)
    assert sorted(seen) == sorted(pids)
    assert len(set(seen.values())) > 1  # spread over the polls, not all in one


def test_a_check_reads_a_process_again_only_when_its_memory_changed(proc: Path, incremental: bool) -> None:
    idle = PIDS["idle"]
    procfs = Scanner(ProcFS(proc, verify_every=1), incremental)  # every process checked every poll
    before = by_tgid(procfs.scan(everything, NOBODY))[idle]
    assert by_tgid(procfs.scan(everything, NOBODY))[idle] is before
    reclaim(proc, idle)
    after = by_tgid(procfs.scan(everything, NOBODY))[idle]
    assert after.rss_bytes == before.rss_bytes - 10 * os.sysconf("SC_PAGE_SIZE")


def test_a_moved_process_is_read_with_its_new_cgroups(proc: Path, incremental: bool) -> None:
    procfs = Scanner(ProcFS(proc, verify_every=1000), incremental)
    idle = PIDS["idle"]
    before = by_tgid(procfs.scan(everything, NOBODY))[idle]
    cgroup = proc / str(idle) / "cgroup"
    cgroup.write_bytes(cgroup.read_bytes().replace(b"0::/", b"0::/moved-here/", 1))
    kept = by_tgid(procfs.scan(everything, NOBODY))[idle]
    assert kept is before
    moved = by_tgid(procfs.scan(everything, Activity(ran=frozenset(), moved=frozenset({idle}))))[idle]
    assert moved.cgroups.unified is not None and moved.cgroups.unified.startswith("/moved-here/")


def test_a_process_newly_worth_reading_is_read_though_it_did_not_run(proc: Path, incremental: bool) -> None:
    procfs = Scanner(ProcFS(proc, verify_every=1000), incremental)
    idle = PIDS["idle"]
    gpu_holders: set[int] = set()

    def wanted(tgid: int, _: CgroupMembership) -> bool:
        return tgid in gpu_holders

    assert procfs.scan(wanted, NOBODY) == ()
    assert procfs.scan(wanted, NOBODY) == ()
    gpu_holders.add(idle)  # NVML now says it holds GPU memory: the poller names it in `recheck`
    assert [s.tgid for s in procfs.scan(wanted, NOBODY, recheck={idle})] == [idle]
    assert [s.tgid for s in procfs.scan(wanted, NOBODY)] == [idle]
    gpu_holders.clear()
    assert procfs.scan(wanted, NOBODY, recheck={idle}) == ()
    assert procfs.scan(wanted, NOBODY) == ()


def copy_process(proc: Path, pid: int, new: int) -> None:
    shutil.copytree(proc / str(pid), proc / str(new), symlinks=True)


def test_started_and_reaped_processes_are_found_without_listing_proc(proc: Path, incremental: bool) -> None:
    procfs = Scanner(ProcFS(proc, verify_every=1000), incremental)
    tracking = Activity(ran=frozenset(), tracks_pids=True)
    first = by_tgid(procfs.scan(everything, tracking))
    idle, burn = PIDS["idle"], PIDS["burn"]
    new, hidden = max(first) + 100, 1  # a started one, and one that nobody reported (not listed yet)
    assert hidden not in first
    copy_process(proc, idle, new)
    copy_process(proc, idle, hidden)
    shutil.rmtree(proc / str(burn))
    reported = Activity(ran=frozenset(), started=frozenset({new}), freed=frozenset({burn}), tracks_pids=True)
    second = by_tgid(procfs.scan(everything, reported))
    assert set(second) == set(first) - {burn} | {new}
    assert second[new].cgroups == first[idle].cgroups
    assert all(second[pid] is first[pid] for pid in second if pid != new)
    assert hidden not in by_tgid(procfs.scan(everything, tracking))
    # A pid reused between two polls (reaped and started again) is read again, not its old sample.
    burn_more(proc, new)
    reused = Activity(ran=frozenset(), started=frozenset({new}), freed=frozenset({new}), tracks_pids=True)
    third = by_tgid(procfs.scan(everything, reused))
    assert third[new].cpu_ticks == second[new].cpu_ticks + 100
    # No activity (a full map): /proc is listed and everything read.
    assert hidden in by_tgid(procfs.scan(everything, None))
    # The incremental scans said what they changed (checked in `Scanner.scan`); a full one cannot.
    assert procfs.deltas == (3 if incremental else 0)


def test_a_process_that_vanishes_mid_read_is_dropped_and_read_again(proc: Path, incremental: bool) -> None:
    procfs = ProcFS(proc, verify_every=1000)
    scanner = Scanner(procfs, incremental)
    idle = PIDS["idle"]
    first = by_tgid(scanner.scan(everything, NOBODY))
    stat = proc / str(idle) / "stat"
    good = stat.read_bytes()
    stat.write_bytes(b"torn")
    samples, dropped = procfs.scan(
        everything, Activity(ran=frozenset({idle})), frozenset() if incremental else None
    )
    scanner.check_delta(samples)
    assert dropped == 1 and idle not in by_tgid(samples)
    stat.write_bytes(good)
    again = by_tgid(scanner.scan(everything, NOBODY))
    assert set(again) == set(first)
    assert again[idle] == first[idle]
