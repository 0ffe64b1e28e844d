"""Draining the count maps loses no increment (root, eBPF): threads of one process on every CPU make
one syscall (getppid) into one (tgid, nr) key as fast as they can while user space drains in a tight
loop; the drained counts add up to the calls the threads counted themselves.

Draining the map being written loses some: the batch copies and deletes an element while a program
that looked it up before the delete adds to it after the copy (a few ns a syscall, hit once in a few
hundred to a few thousand drains).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from croft.adapters.host.bpf_maps import LOSS, Drain, ProgramBarrier
from croft.adapters.host.ebpf_source import COUNT, SYSCALL_KEY, EbpfKernelSource
from croft.adapters.host.syscall_table import SyscallNames
from croft.domain.collector.kernel import KernelSelection
from tests.helpers.loaders import open_source

pytestmark = [pytest.mark.root, pytest.mark.bpf]

THREADS, SECONDS = 4, 4.0

# Waits for a line on stdin, then THREADS threads call getppid (ctypes lets go of the GIL around the
# call, so they run on every CPU) for SECONDS; prints how many calls they made.
CHILD = r"""
import ctypes, sys, threading, time
libc = ctypes.CDLL(None)
getppid = libc.getppid
threads, seconds = int(sys.argv[1]), float(sys.argv[2])
made = [0] * threads
def run(index):
    calls = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            getppid()
        calls += 1000
    made[index] = calls
sys.stdin.readline()
workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(sum(made), flush=True)
"""


@pytest.fixture
def kernel(loader: str) -> Iterator[EbpfKernelSource]:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    with open_source(loader, oncpu=False) as loaded:
        yield loaded


def test_drains_in_a_tight_loop_lose_no_count_of_threads_syscalling_on_every_cpu(
    kernel: EbpfKernelSource,
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(THREADS), str(SECONDS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            kernel.select(KernelSelection(tgids=frozenset({child.pid})))
            kernel.read()  # whatever it did before the start (the interpreter calls no getppid)
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            counted, drains = 0, 0
            deadline = time.monotonic() + SECONDS + 60
            while child.poll() is None:
                assert time.monotonic() < deadline, "the child did not end"
                counted += kernel.read().syscalls.get(child.pid, {}).get("getppid", 0)
                drains += 1
            counted += kernel.read().syscalls.get(child.pid, {}).get("getppid", 0)
            made = int(child.stdout.read())
        finally:
            if child.poll() is None:
                child.kill()
    assert drains >= 20, f"only {drains} drains while the threads ran"
    assert made > 100_000
    assert counted == made, f"{made - counted} of {made} calls lost over {drains} drains"


def test_the_barrier_is_membarrier_here_and_says_so_where_it_has_no_syscall_number(
    caplog: pytest.LogCaptureFixture,
) -> None:
    names = SyscallNames.for_machine()
    assert names is not None
    with caplog.at_level(logging.WARNING, logger="croft.ebpf"):
        ProgramBarrier(names.number("membarrier"))()
        assert caplog.messages == []  # membarrier(MEMBARRIER_CMD_GLOBAL) returned 0
        ProgramBarrier(None)()
    assert caplog.messages == [f"no membarrier syscall number for {os.uname().machine}: {LOSS}"]


def test_a_drain_key_by_key_returns_and_empties_what_a_batch_drain_does(loader: str) -> None:
    """Kernels before 5.6 have no BPF_MAP_LOOKUP_AND_DELETE_BATCH: the same entries come back,
    and the map is left empty, either way."""
    with open_source(loader, oncpu=False) as kernel:
        counts = kernel.loaded.map("syscall_counts_even")  # drained only by the odd-parity read
        entries = {SYSCALL_KEY.pack(tgid, 39, 7): COUNT.pack(tgid * 3) for tgid in range(1, 300)}
        results = []
        for drain in (Drain(counts), Drain(counts, batch=False)):
            for key, value in entries.items():
                counts.set(key, value)
            keys, values = drain.raw()
            results.append(dict(zip(SYSCALL_KEY.iter_unpack(keys), COUNT.iter_unpack(values), strict=True)))
            assert counts.all_keys() == []
    expected = {SYSCALL_KEY.unpack(k): COUNT.unpack(v) for k, v in entries.items()}
    assert results == [expected, expected]
