"""bpf/syscalls.c keeps each CPU's last watched-or-not verdict (per task) so that a syscall-heavy task
pays no cgroup or mark lookup per syscall. For real (root, eBPF): a task whose verdict is cached
and then changes, by a move to another cgroup or by user space marking it, is counted from its next
syscall, exactly.

The child is pinned to one CPU and, between its two phases, spins on shared memory without a
syscall, so the verdict its first phase cached on that CPU is still there when its second phase
starts: only the invalidation under test makes it stale (on a busy host other tasks' syscalls on
that CPU and any fork also do, which can only hide a missing invalidation, never fake one).
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.ebpf_source import EbpfKernelSource
from croft.domain.collector.kernel import GROUP_ORIGIN, KernelSample, KernelSelection
from tests.helpers.burst import scratch_cgroup
from tests.helpers.loaders import open_source

pytestmark = [pytest.mark.root, pytest.mark.bpf]

FIRST, SECOND = 3000, 2000
FIRST_NR, SECOND_NR = 2700, 2701  # past the syscall table (ENOSYS): nothing else on the host makes them

# Shared page: byte 0 is set by the child once its first phase is done, byte 1 by the test to start
# the second one. The child spins on byte 1 without a syscall.
CHILD = rf"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
page = mmap.mmap(int(sys.argv[1]), mmap.PAGESIZE)
first, second = int(sys.argv[2]), int(sys.argv[3])
for _ in range(first):
    libc.syscall({FIRST_NR})
page[0] = 1
while page[1] == 0:
    pass
for _ in range(second):
    libc.syscall({SECOND_NR})
"""


class PhasedChild:
    """A child pinned to one CPU: FIRST syscalls FIRST_NR, a spin, then SECOND syscalls SECOND_NR."""

    def __init__(self, cgroup: Path) -> None:
        fd = os.memfd_create("croft-phases")
        os.ftruncate(fd, mmap.PAGESIZE)
        self._page = mmap.mmap(fd, mmap.PAGESIZE)
        cpu = min(os.sched_getaffinity(0))
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(fd), str(FIRST), str(SECOND)],
            pass_fds=(fd,),
            preexec_fn=lambda: (
                (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n"),
                os.sched_setaffinity(0, {cpu}),
            ),
        )
        os.close(fd)
        self.tgid = self.process.pid

    def wait_first_phase(self) -> None:
        deadline = time.monotonic() + 60
        while self._page[0] == 0:
            assert self.process.poll() is None, "the child exited in its first phase"
            assert time.monotonic() < deadline, "the child's first phase did not end in 60 s"
            time.sleep(0.01)

    def second_phase(self) -> None:
        self._page[1] = 1
        assert self.process.wait(timeout=60) == 0

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._page.close()


@pytest.fixture
def unified() -> Path:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    mount = CgroupFS().unified
    if mount is None:
        pytest.skip("no cgroup2 hierarchy on this host")
    return Path(mount)


@pytest.fixture
def kernel(loader: str, unified: Path) -> Iterator[EbpfKernelSource]:
    with open_source(loader) as loaded:
        yield loaded


@pytest.fixture
def cgroups(unified: Path) -> Iterator[tuple[Path, Path]]:
    """A watched-to-be and an unwatched scratch cgroup."""
    tag = f"croft-verdict-{os.getpid()}"
    with scratch_cgroup(unified, f"{tag}-w") as watched, scratch_cgroup(unified, f"{tag}-u") as other:
        yield watched, other


def counts(sample: KernelSample, tgid: int) -> tuple[int, int]:
    per_process = sample.syscalls.get(tgid, {})
    return per_process.get(f"syscall_{FIRST_NR}", 0), per_process.get(f"syscall_{SECOND_NR}", 0)


def test_a_process_moved_into_a_watched_cgroup_is_counted_from_its_next_syscall(
    kernel: EbpfKernelSource, cgroups: tuple[Path, Path]
) -> None:
    watched, other = cgroups
    kernel.select(KernelSelection(cgroup_ids=frozenset({watched.stat().st_ino})))
    child = PhasedChild(other)
    try:
        child.wait_first_phase()
        (watched / "cgroup.procs").write_text(f"{child.tgid}\n")
        child.second_phase()
    finally:
        child.close()
    sample = kernel.read()
    assert counts(sample, child.tgid) == (0, SECOND)
    assert sample.groups[child.tgid] == watched.stat().st_ino


def test_a_process_moved_out_of_a_watched_cgroup_is_no_longer_counted(
    kernel: EbpfKernelSource, cgroups: tuple[Path, Path]
) -> None:
    watched, other = cgroups
    kernel.select(KernelSelection(cgroup_ids=frozenset({watched.stat().st_ino})))
    child = PhasedChild(watched)
    try:
        child.wait_first_phase()
        (other / "cgroup.procs").write_text(f"{child.tgid}\n")
        child.second_phase()
    finally:
        child.close()
    assert counts(kernel.read(), child.tgid) == (FIRST, 0)


def test_a_running_process_marked_by_user_space_is_counted_from_its_next_syscall(
    kernel: EbpfKernelSource, cgroups: tuple[Path, Path]
) -> None:
    _, other = cgroups
    child = PhasedChild(other)
    try:
        child.wait_first_phase()
        kernel.select(KernelSelection(tgids=frozenset({child.tgid})))
        child.second_phase()
    finally:
        child.close()
    sample = kernel.read()
    assert counts(sample, child.tgid) == (0, SECOND)
    assert sample.groups[child.tgid] == GROUP_ORIGIN | child.tgid


def test_a_cgroup_no_longer_watched_stops_counting_from_the_next_syscall(
    kernel: EbpfKernelSource, cgroups: tuple[Path, Path]
) -> None:
    watched, _ = cgroups
    kernel.select(KernelSelection(cgroup_ids=frozenset({watched.stat().st_ino})))
    child = PhasedChild(watched)
    try:
        child.wait_first_phase()
        kernel.select(KernelSelection())
        child.second_phase()
    finally:
        child.close()
    assert counts(kernel.read(), child.tgid) == (FIRST, 0)
