"""The activity filter for real (root, eBPF): bpf/oncpu.c on this kernel says which processes ran or
moved, and a ProcFS that reads only those returns, for every other process, exactly the sample a
full read returns. Real processes in a scratch cgroup: idle sleepers, a multi-threaded idle
process, one that wakes every 50 ms, and one that never leaves the CPU (no sched_switch: only the
tick marks it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.clock import SystemClock
from croft.adapters.host.ebpf_source import EbpfKernelSource
from croft.adapters.host.netns import NetnsFS, netns_inode
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.app.bootstrap import Settings, collector_config
from croft.domain.collector.kernel import Activity
from croft.domain.collector.rows import CollectorState, rows
from croft.domain.collector.snapshot import CgroupMembership, Poll, ProcessSample
from tests.helpers.burst import scratch_cgroup
from tests.helpers.loaders import LOADERS, open_source

pytestmark = [pytest.mark.root, pytest.mark.bpf]

THREADED = (
    "import threading, time\nfor _ in range(4): threading.Thread(target=time.sleep, args=(1000,)).start()\n"
)
WAKER = "import time\nwhile True: time.sleep(0.05)\n"
HOG = "while True: pass\n"


@pytest.fixture(scope="module", params=LOADERS)
def kernel(request: pytest.FixtureRequest) -> Iterator[EbpfKernelSource]:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    with open_source(request.param) as loaded:
        assert loaded.has_oncpu, "this kernel has the tracepoints of bpf/oncpu.c"
        yield loaded


@pytest.fixture
def unified() -> Path:
    mount = CgroupFS().unified
    if mount is None:
        pytest.skip("no cgroup2 hierarchy on this host")
    return Path(mount)


class Group:
    """Processes started inside the cgroup `path`; killed at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.children: list[subprocess.Popen[bytes]] = []

    def start(self, *argv: str) -> int:
        procs = self.path / "cgroup.procs"
        child = subprocess.Popen(argv, preexec_fn=lambda: procs.write_text(f"{os.getpid()}\n"))
        self.children.append(child)
        return child.pid

    def end(self, pids: set[int]) -> None:
        """Kill and reap the children `pids`."""
        for child in self.children:
            if child.pid in pids:
                child.kill()
                child.wait(timeout=10)

    def close(self) -> None:
        for child in self.children:
            child.kill()
            child.wait(timeout=10)


def by_tgid(samples: tuple[ProcessSample, ...]) -> dict[int, ProcessSample]:
    return {s.tgid: s for s in samples}


def test_a_filtered_scan_returns_what_a_full_scan_reads(kernel: EbpfKernelSource, unified: Path) -> None:
    with scratch_cgroup(unified, f"croft-test-oncpu-{os.getpid()}") as path:
        group = Group(path)
        try:
            sleepers = {group.start("sleep", "1000") for _ in range(20)}
            threaded = group.start(sys.executable, "-c", THREADED)
            waker = group.start(sys.executable, "-c", WAKER)
            hog = group.start(sys.executable, "-c", HOG)
            mine = sleepers | {threaded, waker, hog}
            time.sleep(1.0)  # every process has started and settled

            def wanted(tgid: int, _: CgroupMembership) -> bool:
                return tgid in mine

            # filtered walks every listed pid; incremental lists /proc once and looks only at what
            # changed (started and reaped processes come from the kernel's reports)
            filtered, incremental, full = ProcFS(verify_every=1000), ProcFS(verify_every=1000), ProcFS()
            marks = kernel.activity()
            previous: dict[int, ProcessSample] = {}
            previous_kept: dict[int, ProcessSample] = {}
            kept_idle = kept_unlooked = 0
            hog_ticks = []
            for _poll in range(8):
                now = kernel.activity()
                assert marks is not None and now is not None, "no on-CPU map was full"
                activity = Activity(ran=marks.ran | now.ran, moved=marks.moved | now.moved)
                tracked = Activity(
                    ran=activity.ran,
                    moved=activity.moved,
                    started=marks.started | now.started,
                    freed=marks.freed | now.freed,
                    tracks_pids=True,
                )
                got = by_tgid(filtered.scan(wanted, activity)[0])
                kept = by_tgid(incremental.scan(wanted, tracked, frozenset())[0])
                truth = by_tgid(full.scan(wanted)[0])
                if previous_kept:  # the incremental scan says what it changed (the core follows it)
                    delta = incremental.delta
                    assert delta is not None
                    assert delta.changed == {p for p, s in kept.items() if previous_kept.get(p) is not s}
                    assert delta.gone == previous_kept.keys() - kept.keys()
                    assert delta.by_tgid == kept
                marks = kernel.activity()  # what ran while the three scans were made
                assert marks is not None
                assert got.keys() == kept.keys() == truth.keys() == mine
                assert hog in activity.ran or not previous
                for pid in mine - activity.ran - marks.ran:
                    assert got[pid] == truth[pid], f"pid {pid} changed without running"
                    assert kept[pid] == truth[pid], f"pid {pid} changed without running (incremental)"
                kept_idle += sum(
                    1 for pid in sleepers & got.keys() if previous and got[pid] is previous.get(pid)
                )
                kept_unlooked += sum(
                    1 for pid in sleepers & kept.keys() if previous and kept[pid] is previous_kept.get(pid)
                )
                hog_ticks.append(got[hog].cpu_ticks)
                previous, previous_kept = got, kept
                if _poll == 3:  # /proc is not listed again: new processes and reaped ones are reported
                    ended = set(list(sleepers)[:3])
                    group.end(ended)
                    started = {group.start("sleep", "1000") for _ in range(3)}
                    sleepers = (sleepers - ended) | started
                    mine = (mine - ended) | started
                time.sleep(0.3)
            assert kept_idle >= 5 * len(sleepers)  # the sleepers were not read again
            assert kept_unlooked >= 5 * len(sleepers)
            assert hog_ticks == sorted(hog_ticks) and hog_ticks[-1] > hog_ticks[1]
        finally:
            group.close()


def test_a_process_moved_to_another_cgroup_is_read_again(kernel: EbpfKernelSource, unified: Path) -> None:
    tag = f"croft-test-oncpu-move-{os.getpid()}"
    with scratch_cgroup(unified, f"{tag}-a") as first, scratch_cgroup(unified, f"{tag}-b") as second:
        group = Group(first)
        try:
            sleeper = group.start("sleep", "1000")
            time.sleep(0.5)
            procfs = ProcFS(verify_every=1000)

            def wanted(tgid: int, _: CgroupMembership) -> bool:
                return tgid == sleeper

            def scan() -> ProcessSample:
                activity = kernel.activity()
                assert activity is not None
                (sample,) = procfs.scan(wanted, activity)[0]
                return sample

            before = scan()
            assert before.cgroups.unified == f"/{first.name}"
            assert scan() is before  # asleep, not moved: not read
            (second / "cgroup.procs").write_text(f"{sleeper}\n")
            after = scan()
            assert after.cgroups.unified == f"/{second.name}"
        finally:
            group.close()


READER = "import os\nwhile os.read(0, 1):\n    pass\n"


def voluntary_switches(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def test_a_process_is_marked_in_every_poll_it_ran_and_in_no_other(kernel: EbpfKernelSource) -> None:
    """Each CPU remembers the tasks it marked in the current poll (bpf/oncpu.c), so a task that runs
    again after the poll drained the marks must be marked again, in the map the next poll drains. A
    reader pinned to one CPU is woken once between two polls, many times over: each time it ran,
    it was switched out with its last mark remembered, and on an idle CPU it is still one of the two
    remembered when it next runs. Forgetting the marks at a drain, or draining the map being filled
    instead of the one just ended, fails here."""
    cpu = min(os.sched_getaffinity(0))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER],
        stdin=subprocess.PIPE,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
    )
    assert reader.stdin is not None
    try:

        def wake_and_wait() -> None:
            """Wake the reader and return once it has gone back to sleep (its switch-out marked)."""
            before = voluntary_switches(reader.pid)
            reader.stdin.write(b"x")
            reader.stdin.flush()
            deadline = time.monotonic() + 10.0
            while voluntary_switches(reader.pid) == before:
                assert time.monotonic() < deadline, "the reader did not take its byte"
                time.sleep(0.0005)
            time.sleep(0.005)  # the switch-out's program has run (the count moves just before it)

        wake_and_wait()  # started and settled
        for _ in range(40):
            kernel.activity()
            wake_and_wait()
            woken = kernel.activity()
            asleep = kernel.activity()
            assert woken is not None and asleep is not None, "no on-CPU map was full"
            assert reader.pid in woken.ran
            assert reader.pid not in asleep.ran
    finally:
        reader.stdin.close()  # the reader's read returns b"": it ends
        reader.wait(timeout=10)


PINGPONG = """
import os, sys
there, back = os.pipe(), os.pipe()
child = os.fork()
if child == 0:
    os.close(there[1]), os.close(back[0])
    while os.read(there[0], 1):  # b"" once the parent is gone
        os.write(back[1], b"x")
    sys.exit(0)
os.close(there[0]), os.close(back[1])
print(child, flush=True)
while True:
    os.write(there[1], b"x")
    os.read(back[0], 1)
"""


def test_tasks_taking_turns_on_a_cpu_are_marked_again_after_each_drain(kernel: EbpfKernelSource) -> None:
    """Two processes passing a byte back and forth on one CPU are the two tasks that CPU remembers
    having marked (bpf/oncpu.c): after a drain, their next switches must mark them again, in the map
    the next drain empties. The polls here come back to back while the pair runs on another CPU;
    whenever one of them was switched out after a poll (its voluntary switch count moved), it must be
    in the ran of one of the next three polls: the next; the one after, for a switch-out after the
    next poll had begun; the third, for a mark the next poll's drain passed by while it was being
    made (the map is drained again two polls on). Forgetting the marks at a drain fails here."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: the pair on one, the polls on another")
    mine = os.sched_getaffinity(0)
    pair = subprocess.Popen(
        [sys.executable, "-c", PINGPONG],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpus[0]}),
    )
    assert pair.stdout is not None
    try:
        os.sched_setaffinity(0, {cpus[1]})
        pids = (pair.pid, int(pair.stdout.readline()))
        polls: list[tuple[frozenset[int], tuple[int, ...]]] = []
        for _ in range(300):
            activity = kernel.activity()
            assert activity is not None, "no on-CPU map was full"
            polls.append((activity.ran, tuple(voluntary_switches(pid) for pid in pids)))
        checked = 0
        for index in range(1, len(polls) - 2):
            switches_after, switches_before_next = polls[index - 1][1], polls[index][1]
            for pid, after, before_next in zip(pids, switches_after, switches_before_next, strict=True):
                if before_next == after:
                    continue  # not switched out since that poll: not bound to be marked
                checked += 1
                assert pid in polls[index][0] | polls[index + 1][0] | polls[index + 2][0], (
                    f"pid {pid} was switched out after poll {index} and not marked"
                )
        assert checked >= 100, "the pair ran through most polls"
    finally:
        os.sched_setaffinity(0, mine)
        pair.kill()
        pair.wait(timeout=10)
        pair.stdout.close()


def test_the_live_poll_s_hint_gives_the_rows_of_the_full_pass(
    kernel: EbpfKernelSource, unified: Path, tmp_path: Path
) -> None:
    """The whole shell (LiveSource with bpf/oncpu.c) hands the core `Poll.changes`; the core that
    follows them writes, poll after poll, the rows and keeps the state of the core that looks at
    every process. Sleepers (due for a row every 3 polls), a waker, a hog, processes ended and
    started mid-way, a sleeper moved to another cgroup, and sleepers in network namespaces of their
    own (one holds two), one started and one ended mid-way. The cgroups read are those of the
    processes returned, and the namespaces those a full placing of them finds, both kept without
    walking them."""
    name = f"croft-test-hint-{os.getpid()}"
    config = attrs.evolve(collector_config(Settings(dataset=tmp_path / "d.jsonl", watch=name)), idle_every=3)
    with scratch_cgroup(unified, name) as path, scratch_cgroup(unified, f"{name}-b") as other:
        group = Group(path)
        try:
            sleepers = [group.start("sleep", "1000") for _ in range(12)]
            group.start(sys.executable, "-c", WAKER)
            group.start(sys.executable, "-c", HOG)
            isolated = [group.start("unshare", "-n", "sleep", "1000") for _ in range(2)]
            shared = group.start("unshare", "-n", "sh", "-c", "sleep 1000 & exec sleep 1000")
            time.sleep(0.5)
            netns, whole_netns = NetnsFS(), NetnsFS()
            own_netns = netns_inode(str(Path("/proc/self/ns/net").readlink()))
            source = LiveSource(
                ProcFS(), CgroupFS(), kernel, UnavailableGpu(), (name,), netns, activity=kernel
            )
            clock = SystemClock()
            hinted_state = full_state = CollectorState()
            previous: Poll | None = None
            previous_full: Poll | None = None
            hinted_polls = written = 0
            for index in range(14):
                poll = source.poll(clock.now())
                if poll.changes is not None:
                    hinted_polls += 1
                    assert poll.changes.by_tgid == {p.tgid: p for p in poll.processes}
                assert {c.membership for c in poll.cgroups} == {p.cgroups for p in poll.processes}
                # the sleepers' own namespaces are idle: both reads see the same counters (this
                # test's own namespace, busy with the machine's traffic, is left out)
                placed = tuple(n for n in whole_netns.read(poll.processes) if n.inode != own_netns)
                assert tuple(n for n in poll.netns if n.inode != own_netns) == placed, f"poll {index}"
                # two sleepers alone (one replaced mid-way), two together (one ended mid-way),
                # beside this test's own
                assert len({n.inode for n in poll.netns} - {own_netns}) == 3
                whole = attrs.evolve(poll, changes=None)
                hinted, hinted_state = rows(previous, poll, hinted_state, config)
                full, full_state = rows(previous_full, whole, full_state, config)
                assert hinted == full, f"poll {index}: the hinted rows differ"
                assert hinted_state == full_state, f"poll {index}: the hinted state differs"
                written += len(hinted)
                previous, previous_full = poll, whole
                if index == 4:
                    group.end({sleepers[0], sleepers[1]})
                    sleepers.append(group.start("sleep", "1000"))
                    group.end({isolated[0], shared})  # the shared namespace keeps its other sleeper
                    group.start("unshare", "-n", "sleep", "1000")
                if index == 8:
                    (other / "cgroup.procs").write_text(f"{sleepers[2]}\n")
                time.sleep(0.2)
        finally:
            group.close()
    assert hinted_polls >= 12  # every poll but the first followed the hint
    assert written > 14  # the hog and waker each poll, the sleepers when due
