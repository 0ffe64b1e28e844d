"""A fork burst inside and outside a watched cgroup, through the live poll (root, eBPF, cgroup v2):
eBPF map drops, poll durations and gaps, and the watched children's syscall counts against
syscount-bpfcc -c (children of the watched spawner). Prints one line per poll and a summary.

    sudo .venv/bin/python -m benchmarks.fork_burst [--watched N] [--noise N] [--noise-distinct K]

The same burst ran against the code before the kernel filter for the busy-node note (figures there).

Not part of `make bench`: the figures are load-sensitive (they print the load average) and go into
the busy-node note; the pass/fail version is tests/kernel/test_busy_node.py.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from tests.helpers.burst import Spawner, Syscount, counts_of, run_polls, scratch_cgroup

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.ebpf_source import EbpfKernelSource, load_kernel_source
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.kernel import KernelSample

WATCHED_FIRST_NR = 2000
UNIFIED = (
    Path("/sys/fs/cgroup/unified")
    if Path("/sys/fs/cgroup/unified/cgroup.procs").exists()
    else Path("/sys/fs/cgroup")
)


class TimedKernel:
    """The kernel source, with how long each `read()` (the drain) took."""

    def __init__(self, kernel: EbpfKernelSource) -> None:
        self._kernel = kernel
        self.took_s: list[float] = []

    def read(self) -> KernelSample:
        start = time.perf_counter()
        sample = self._kernel.read()
        self.took_s.append(time.perf_counter() - start)
        return sample

    def select(self, selection: Any) -> None:  # Any: the same script measures the code before select()
        self._kernel.select(selection)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--watched", type=int, default=300)
    parser.add_argument("--noise", type=int, default=600)
    parser.add_argument("--noise-distinct", type=int, default=150)
    parser.add_argument("--loader", choices=("core", "bcc"), default="core")
    args = parser.parse_args()
    tag = f"croft-burst-{os.getpid()}"
    with (
        scratch_cgroup(UNIFIED, f"{tag}-watched") as watched,
        scratch_cgroup(UNIFIED, f"{tag}-noise") as noise,
    ):
        kernel = load_kernel_source(args.loader)
        timed = TimedKernel(kernel)
        source = LiveSource(ProcFS(), CgroupFS(), timed, UnavailableGpu(), (watched.name,))
        w = Spawner((watched,), getppids=2000, distinct=40, first_nr=WATCHED_FIRST_NR)
        u = Spawner((noise,), getppids=0, distinct=args.noise_distinct, first_nr=1000)
        syscount = Syscount()

        def burst() -> None:
            u.start_burst(args.noise)
            time.sleep(0.3)
            w.start_burst(args.watched)

        def release() -> None:
            w.start_release()
            u.start_release()

        records = run_polls(source, 7, {1: burst, 4: release})
        children = w.burst_pids()
        u.burst_pids()
        w.released()
        u.released()
        records += run_polls(source, 1, {})
        theirs = syscount.stop()
        w.close()
        u.close()
        kernel.close()
    for k, record in enumerate(records):
        sample = record.poll.kernel
        entries = sum(len(c) for c in sample.syscalls.values())
        print(
            f"poll {k}: took {record.took_s:.2f} s (drain {timed.took_s[k]:.3f} s), "
            f"gap {record.gap_s:.2f} s, "
            f"drops {sample.dropped_entries}, tgids {len(sample.syscalls)}, "
            f"(tgid,nr) entries {entries}, load {record.load:.2f}"
        )
    ours = counts_of(records, children)
    print(f"drops total {sum(r.poll.kernel.dropped_entries for r in records)}")
    print(f"getppid: croft {ours.get('getppid', 0)} syscount {theirs.get('getppid', 0)}")
    numbers = [WATCHED_FIRST_NR + i for i in range(40)]
    a = sum(ours.get(f"syscall_{n}", 0) for n in numbers)
    b = sum(theirs.get(f"[unknown: {n}]", 0) for n in numbers)
    print(f"the watched children's own numbers: croft {a} syscount {b}")


if __name__ == "__main__":
    main()
