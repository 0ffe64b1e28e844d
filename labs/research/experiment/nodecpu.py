"""The CPU of the machine a web run's harness runs on, every second of the run, as node_cpu.csv in
the run directory: on the test node of scripts/kube-node.sh that machine is the node itself (its
pods, the control plane, the load generator, the collector), so a reader can see whether the node
saturated during the burst rather than the pods.

From /proc/stat's first line (proc(5): user nice system idle iowait irq softirq steal guest
guest_nice, in USER_HZ ticks since boot; guest time is already inside user): over each interval,

- busy: user + nice + system + irq + softirq;
- steal: time the hypervisor ran something else while this VM wanted the CPU;
- iowait: idle with I/O outstanding;

each as cores (the share of all ticks x the cores counted on the cpuN lines), so no tick rate or
clock enters the figure. The node is saturated in a second when busy + steal reach
`SATURATED_SHARE` of its cores.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

FILE = "node_cpu.csv"
COLUMNS = ("unix_s", "busy_cores", "steal_cores", "iowait_cores", "cores")
SATURATED_SHARE = 0.95


@attrs.frozen
class CpuTimes:
    """/proc/stat's aggregate counters (ticks) and the number of CPUs."""

    busy: int
    steal: int
    iowait: int
    total: int
    cores: int

    @classmethod
    def from_text(cls, text: str) -> CpuTimes:
        """Parse /proc/stat; a text without an aggregate `cpu` line raises ValueError."""
        fields: list[int] | None = None
        cores = 0
        for line in text.splitlines():
            name, _, rest = line.partition(" ")
            if name == "cpu":
                fields = [int(v) for v in rest.split()]
            elif name.startswith("cpu") and name[3:].isdigit():
                cores += 1
        if fields is None or len(fields) < 8:
            raise ValueError("no aggregate cpu line of 8 or more counters in /proc/stat")
        user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
        busy = user + nice + system + irq + softirq
        return cls(busy, steal, iowait, busy + steal + iowait + idle, max(cores, 1))


@attrs.frozen
class Sample:
    """One interval ending at `unix_s`: cores busy, stolen and waiting on I/O, of `cores`."""

    unix_s: float
    busy_cores: float
    steal_cores: float
    iowait_cores: float
    cores: int

    @property
    def saturated(self) -> bool:
        return self.busy_cores + self.steal_cores >= SATURATED_SHARE * self.cores


def between(before: CpuTimes, after: CpuTimes, unix_s: float) -> Sample | None:
    """The interval from `before` to `after` (ended at `unix_s`); None when no tick passed or a
    counter went back (a reboot between the reads)."""
    ticks = after.total - before.total
    deltas = (after.busy - before.busy, after.steal - before.steal, after.iowait - before.iowait)
    if ticks <= 0 or min(deltas) < 0:
        return None
    busy, steal, iowait = (d * after.cores / ticks for d in deltas)
    return Sample(round(unix_s, 3), round(busy, 4), round(steal, 4), round(iowait, 4), after.cores)


def peak_cores(samples: Sequence[Sample], start_s: float, end_s: float) -> float | None:
    """The most cores busy in one interval ending within [start_s, end_s] (unix s); None if none."""
    inside = [s.busy_cores for s in samples if start_s <= s.unix_s <= end_s]
    return max(inside) if inside else None


def saturated_seconds(samples: Sequence[Sample], start_s: float, end_s: float) -> int:
    """How many intervals ending within [start_s, end_s] had the node saturated."""
    return sum(1 for s in samples if start_s <= s.unix_s <= end_s and s.saturated)


def write(path: Path, samples: Sequence[Sample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for s in samples:
            writer.writerow([s.unix_s, s.busy_cores, s.steal_cores, s.iowait_cores, s.cores])


def read(path: Path) -> list[Sample]:
    """node_cpu.csv's samples; [] when the run did not record one."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as src:
        return [
            Sample(float(r["unix_s"]), float(r["busy_cores"]), float(r["steal_cores"]),
                   float(r["iowait_cores"]), int(r["cores"]))
            for r in csv.DictReader(src)
        ]  # fmt: skip


class Recorder:
    """Reads /proc/stat (`read_stat`) every `every_s` on a thread from `start` to `stop`."""

    def __init__(
        self,
        read_stat: Callable[[], str] = lambda: Path("/proc/stat").read_text(),
        every_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.read_stat, self.every_s, self.clock = read_stat, every_s, clock
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="node-cpu")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=10)
        return list(self.samples)

    def _loop(self) -> None:
        try:
            before = CpuTimes.from_text(self.read_stat())
        except (OSError, ValueError):
            return  # no /proc/stat here: the run records no node_cpu.csv
        while not self._stop.wait(self.every_s):
            try:
                after = CpuTimes.from_text(self.read_stat())
            except (OSError, ValueError):
                continue
            sample = between(before, after, self.clock())
            if sample is not None:
                self.samples.append(sample)
            before = after
