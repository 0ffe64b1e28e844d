"""Fork bursts and short-lived processes in a cgroup of their own, for the busy-node tests and the
fork-burst measurement (benchmarks/fork_burst.py).

A `Spawner` is a Python process placed in a cgroup before it forks anything, so every child starts
there. Each child makes `getppid` calls, then one call of each of `distinct` syscall numbers from
`first_nr` on (numbers past the kernel's table: ENOSYS, harmless, but each is a (tgid, nr) entry
in a per-process syscall map), then either waits for `release()` or exits at once:

    burst N     fork N children at once, answer their pids, keep them until `release()`
    rate R S    fork R children a second for S seconds, each exiting at once (short-lived), answer
                the count

Children use only `fork`, `getppid`, the numbered calls, a pipe read and `exit_group` after the fork.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import attrs

from croft.adapters.host.poller import LiveSource
from croft.app.collector import INTERVAL_NS
from croft.domain.collector.snapshot import Instant, Poll

SPAWNER = r"""
import ctypes, os, sys, time

libc = ctypes.CDLL(None, use_errno=True)
raw = libc.syscall
getppids, distinct, first_nr = (int(a) for a in sys.argv[1:4])
numbers = [first_nr + i for i in range(distinct)]
getppid = os.getppid


def work():
    for _ in range(getppids):
        getppid()
    for nr in numbers:
        raw(nr)


sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    command, *args = line.split()
    if command == "burst":
        hold_r, hold_w = os.pipe()
        pids = []
        for _ in range(int(args[0])):
            pid = os.fork()
            if pid == 0:
                os.close(hold_w)
                work()
                os.read(hold_r, 1)
                os._exit(0)
            pids.append(pid)
        os.close(hold_r)
        sys.stdout.write(" ".join(map(str, pids)) + "\n")
        sys.stdout.flush()
        sys.stdin.readline()  # release
        os.close(hold_w)
        for pid in pids:
            os.waitpid(pid, 0)
        sys.stdout.write("done\n")
    elif command == "rate":
        per_s, seconds = int(args[0]), float(args[1])
        total = int(per_s * seconds)
        start = time.monotonic()
        for k in range(total):
            pause = start + k / per_s - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            pid = os.fork()
            if pid == 0:
                work()
                os._exit(0)
            os.waitpid(pid, 0)
        sys.stdout.write(f"{total}\n")
    sys.stdout.flush()
"""


class Spawner:
    """A spawner process in cgroup directory `cgroup` (any hierarchy: its cgroup.procs is written)."""

    def __init__(self, cgroups: tuple[Path, ...], getppids: int, distinct: int, first_nr: int = 1000) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SPAWNER, str(getppids), str(distinct), str(first_nr)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.tgid = self.process.pid
        assert self._line() == "ready"
        for cgroup in cgroups:
            (cgroup / "cgroup.procs").write_text(f"{self.tgid}\n")

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def burst(self, n: int) -> list[int]:
        """Fork `n` children that stay until `release()`; their pids."""
        self.start_burst(n)
        return self.burst_pids()

    def start_burst(self, n: int) -> None:
        """Start forking `n` children that stay until `release()`."""
        self._send(f"burst {n}")

    def burst_pids(self) -> list[int]:
        """The pids of the burst started, once all are forked."""
        return [int(p) for p in self._line().split()]

    def release(self) -> None:
        """Let the burst's children exit, and reap them."""
        self.start_release()
        self.released()

    def start_release(self) -> None:
        """Let the burst's children exit (after `burst_pids()` or before: the answer waits)."""
        self._send("release")

    def released(self) -> None:
        """Wait until the released children are reaped."""
        assert self._line() == "done"

    def start_rate(self, per_s: int, seconds: float) -> None:
        """Start forking `per_s` short-lived children a second for `seconds`."""
        self._send(f"rate {per_s} {seconds}")

    def wait_rate(self) -> int:
        return int(self._line())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextmanager
def scratch_cgroup(parent: Path, name: str) -> Iterator[Path]:
    """A new cgroup directory `parent/name`, removed afterwards (its processes moved to `parent`)."""
    path = parent / name
    path.mkdir()
    try:
        yield path
    finally:
        procs = path / "cgroup.procs"
        for pid in procs.read_text().split() if procs.exists() else ():
            with suppress(OSError):  # exited meanwhile
                (parent / "cgroup.procs").write_text(pid + "\n")
        path.rmdir()


def syscount_table(text: str) -> dict[str, int]:
    """The SYSCALL/COUNT table syscount-bpfcc prints on SIGINT, names with blanks included (it names
    a number past its table `[unknown: N]`)."""
    counts: dict[str, int] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if line.split()[:2] == ["SYSCALL", "COUNT"]:
            break
    for line in lines:
        match = re.fullmatch(r"(\S.*?)\s+(\d+)", line.strip())
        if match:
            counts[match[1]] = counts.get(match[1], 0) + int(match[2])
    return counts


@attrs.frozen
class PollRecord:
    poll: Poll
    took_s: float
    gap_s: float
    load: float


def run_polls(source: LiveSource, polls: int, after: Mapping[int, Callable[[], None]]) -> list[PollRecord]:
    """`polls` polls of `source` on a 2 s monotonic schedule, as croft run makes them; `after[k]`
    runs right after poll k. Each record has the poll, how long it took, the gap since the previous
    poll's stamp and the 1-minute load average."""
    records: list[PollRecord] = []
    start = time.monotonic_ns()
    last: int | None = None
    for k in range(polls):
        pause = (start + k * INTERVAL_NS - time.monotonic_ns()) / 1e9
        if pause > 0:
            time.sleep(pause)
        at = Instant(unix_ms=time.time_ns() // 1_000_000, monotonic_ns=time.monotonic_ns())
        poll = source.poll(at)
        took = (time.monotonic_ns() - at.monotonic_ns) / 1e9
        gap = (at.monotonic_ns - last) / 1e9 if last is not None else 0.0
        last = at.monotonic_ns
        records.append(PollRecord(poll, took, gap, os.getloadavg()[0]))
        action = after.get(k)
        if action is not None:
            action()
    return records


def counts_of(records: list[PollRecord], tgids: Collection[int]) -> dict[str, int]:
    """The syscalls of `tgids` summed over `records`."""
    total: dict[str, int] = {}
    for record in records:
        for tgid in tgids:
            for name, count in record.poll.kernel.syscalls.get(tgid, {}).items():
                total[name] = total.get(name, 0) + count
    return total


class Syscount:
    """syscount-bpfcc over the whole host, from construction (once it says it is tracing) to `stop()`."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(["syscount-bpfcc", "-T", "2000"], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        banner = self.process.stdout.readline()
        assert banner.startswith("Tracing"), banner

    def stop(self) -> dict[str, int]:
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=60)
        return syscount_table(out)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
