"""A test cgroup of its own and workloads with known behaviour, for the live tests, the fixture
capture script and the collector benchmark (root only).

On a hybrid host (v1 controllers under /sys/fs/cgroup/<controller>, v2 at /sys/fs/cgroup/unified)
the cgroup is created in the v2 tree and in the v1 cpu, cpuacct and memory hierarchies; on a pure v2
host in the v2 tree only. Children join every one of them before they exec.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

BURN = "while True:\n    pass\n"
ALLOC = (
    "import sys, time\n"
    "b = bytearray(int(sys.argv[1]) << 20)\n"
    "for i in range(0, len(b), 4096):\n    b[i] = 1\n"
    "while True:\n    time.sleep(1)\n"
)
# Writes argv[2] bytes per second into file argv[1] in 50 paced chunks a second (so it also makes
# ~50 voluntary context switches a second), truncating every 64 MiB.
WRITE = (
    "import os, sys, time\n"
    "path, per_s = sys.argv[1], int(sys.argv[2])\n"
    "chunk = b'x' * (per_s // 50)\n"
    "fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\n"
    "start = time.monotonic(); n = 0\n"
    "while True:\n"
    "    os.write(fd, chunk); n += 1\n"
    "    if n % 3200 == 0:\n        os.ftruncate(fd, 0); os.lseek(fd, 0, 0)\n"
    "    time.sleep(max(0.0, start + n / 50 - time.monotonic()))\n"
)
IDLE = "import time\nwhile True:\n    time.sleep(3600)\n"


class OwnCgroup:
    """A cgroup named `name` in every hierarchy croft reads; `cpu_quota_us` limits CPU per 100 ms
    period (v1 cfs_quota_us / v2 cpu.max) to make throttling visible."""

    def __init__(self, name: str, cpu_quota_us: int | None = None) -> None:
        self.name = name
        unified = CGROUP_ROOT / "unified"
        v2_root = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else unified
        self.dirs = [v2_root / name]
        for controller in ("cpu", "cpuacct", "memory"):
            if (CGROUP_ROOT / controller / "cgroup.procs").exists():
                self.dirs.append(CGROUP_ROOT / controller / name)
        self.children: list[subprocess.Popen[bytes]] = []
        for directory in self.dirs:
            directory.mkdir(exist_ok=True)
        if cpu_quota_us is not None:
            v1_cpu = CGROUP_ROOT / "cpu" / name
            if v1_cpu in self.dirs:
                (v1_cpu / "cpu.cfs_quota_us").write_text(str(cpu_quota_us))
            elif (v2_root / name / "cpu.max").exists():
                (v2_root / name / "cpu.max").write_text(f"{cpu_quota_us} 100000")

    def _join(self) -> None:
        pid = str(os.getpid())
        for directory in self.dirs:
            (directory / "cgroup.procs").write_text(pid)

    def spawn(self, code: str, *args: str) -> subprocess.Popen[bytes]:
        """Start `python -c code args` inside this cgroup."""
        child = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            preexec_fn=self._join,
            stdin=subprocess.DEVNULL,
        )
        self.children.append(child)
        return child

    def close(self) -> None:
        """Stop every child and every process left in the cgroup, and remove its directories."""
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait()
        for directory in self.dirs:
            procs = directory / "cgroup.procs"
            for pid in procs.read_text().split() if procs.exists() else ():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        for directory in self.dirs:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)

    def __enter__(self) -> OwnCgroup:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class SplitCgroups:
    """A hybrid host's disagreeing hierarchies (root only, hybrid hosts only): a v2 cgroup `v2_name`
    under /sys/fs/cgroup/unified and a different v1 cgroup `v1_name` in the cpu and cpuacct
    hierarchies (and memory, with `memory`), its CPU limited to `cpu_quota_us` per 100 ms when given.
    `spawn(code, in_v2=...)` starts a child in the v1 cgroup and, when `in_v2`, in the v2 one too
    (else it stays where the parent sits in v2)."""

    def __init__(
        self, v2_name: str, v1_name: str, cpu_quota_us: int | None = None, memory: bool = False
    ) -> None:
        self.v2 = CGROUP_ROOT / "unified" / v2_name
        names = ("cpu", "cpuacct", "memory") if memory else ("cpu", "cpuacct")
        self.v1 = [CGROUP_ROOT / c / v1_name for c in names if (CGROUP_ROOT / c / "cgroup.procs").exists()]
        if not (CGROUP_ROOT / "unified" / "cgroup.controllers").exists() or len(self.v1) < len(names):
            raise RuntimeError(
                f"not a hybrid host (v1 {', '.join(names)} and a v2 tree at /sys/fs/cgroup/unified)"
            )
        for directory in (self.v2, *self.v1):
            directory.mkdir(exist_ok=True)
        if cpu_quota_us is not None:
            (CGROUP_ROOT / "cpu" / v1_name / "cpu.cfs_quota_us").write_text(str(cpu_quota_us))
        self.children: list[subprocess.Popen[bytes]] = []

    def spawn(self, code: str, *, in_v2: bool, args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        targets = [*self.v1, *([self.v2] if in_v2 else [])]

        def join() -> None:
            for directory in targets:
                (directory / "cgroup.procs").write_text(str(os.getpid()))

        child = subprocess.Popen(
            [sys.executable, "-c", code, *args], preexec_fn=join, stdin=subprocess.DEVNULL
        )
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait()
        for directory in (self.v2, *self.v1):
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)

    def __enter__(self) -> SplitCgroups:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
