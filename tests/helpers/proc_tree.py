"""A /proc and a cgroup v2 tree written as files, for the real ProcFS and CgroupFS adapters: each
process's names (comm, exe, cwd, arguments, cgroup path, a mapped library) given as the bytes the
kernel would show, whatever they are."""

from __future__ import annotations

import os
from pathlib import Path

import attrs


@attrs.frozen
class FakeProcess:
    """One process as the kernel shows it. Names are bytes: `comm` holds no NUL (the kernel keeps
    at most 15 bytes), `exe` and `cwd` are symlink targets (no NUL), `cmdline` arguments hold no
    NUL, `cgroup` is a v2 path ('/'-separated names without NUL or newline, none '.' or '..')."""

    pid: int
    comm: bytes
    exe: bytes
    cwd: bytes
    cmdline: tuple[bytes, ...]
    cgroup: bytes
    library: bytes = b"libc.so.6"


def stat_line(process: FakeProcess, cpu_ticks: int, start_ticks: int = 1000) -> bytes:
    """`/proc/<pid>/stat` as proc(5) writes it: 52 fields, the comm in parentheses."""
    rest = ["0"] * 50  # rest[n - 3] is field n
    rest[0] = "R"
    rest[11] = str(cpu_ticks)  # utime
    rest[17] = "1"  # threads
    rest[19] = str(start_ticks)
    rest[20] = str(12 << 20)  # vsize, bytes
    rest[21] = "500"  # rss, pages
    return b"%d (%s) %s\n" % (process.pid, process.comm, " ".join(rest).encode())


def write_proc(root: Path, processes: list[FakeProcess], cpu_ticks: int) -> None:
    """The files of every process under `root` (made or rewritten), each having run `cpu_ticks`."""
    for process in processes:
        base = root / str(process.pid)
        base.mkdir(parents=True, exist_ok=True)
        (base / "stat").write_bytes(stat_line(process, cpu_ticks))
        (base / "status").write_bytes(
            b"Name:\tx\nThreads:\t1\nvoluntary_ctxt_switches:\t%d\nnonvoluntary_ctxt_switches:\t1\n"
            % cpu_ticks
        )
        (base / "io").write_bytes(
            b"rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: %d\nwrite_bytes: 0\n"
            b"cancelled_write_bytes: 0\n" % (cpu_ticks * 4096)
        )
        (base / "schedstat").write_bytes(b"%d %d 3\n" % (cpu_ticks * 10_000_000, cpu_ticks * 1000))
        (base / "cmdline").write_bytes(b"".join(arg + b"\0" for arg in process.cmdline))
        (base / "cgroup").write_bytes(b"0::" + process.cgroup + b"\n")
        (base / "maps").write_bytes(
            b"7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /usr/lib/" + process.library + b"\n"
        )
        for name, target in (("exe", process.exe), ("cwd", process.cwd)):
            link = base / name
            link.unlink(missing_ok=True)
            link.symlink_to(os.fsdecode(target))


def write_cgroups(root: Path, processes: list[FakeProcess], usage_usec: int) -> None:
    """A cgroup v2 tree under `root` holding each process's cgroup, with CPU `usage_usec`, a
    memory.current of 7 MiB plus the path's length, and pressure."""
    (root / "cgroup.controllers").write_bytes(b"cpu memory io\n")
    for process in processes:
        where = root / os.fsdecode(process.cgroup.lstrip(b"/"))
        where.mkdir(parents=True, exist_ok=True)
        files = {
            "cpu.stat": b"usage_usec %d\nuser_usec 0\nsystem_usec 0\nnr_periods 10\nnr_throttled 0\n"
            % usage_usec,
            "memory.current": b"%d\n" % memory_bytes(process),
            "memory.events": b"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
            "cpu.pressure": b"some avg10=1.50 avg60=0.00 avg300=0.00 total=%d\n" % usage_usec,
            "memory.pressure": b"some avg10=0.25 avg60=0.00 avg300=0.00 total=1\n",
            "io.pressure": b"some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
            "cgroup.procs": b"%d\n" % process.pid,
        }
        for name, data in files.items():
            (where / name).write_bytes(data)


def memory_bytes(process: FakeProcess) -> int:
    return (7 << 20) + len(process.cgroup)
