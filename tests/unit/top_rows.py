"""Rows and polls for croft top's tests, encoded with the dataset's own codec."""

from __future__ import annotations

from pathlib import Path

from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage, Workload

T0_MS = 1_792_505_950_473  # 2026-10-20 14:19:10.473 UTC, the example row's time


def top_row(
    tgid: int,
    unix_ms: int = T0_MS,
    *,
    comm: str = "python",
    cpu_cores: float = 0.5,
    rss_bytes: int = 1 << 30,
    container_id: str | None = "33813f5d0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5",
    cwd: str = "/workspace",
    framework: str | None = "pytorch",
    workload: Workload = "no-gpu",
    syscalls: tuple[SyscallRate, ...] = (SyscallRate("futex", 282.0), SyscallRate("read", 12.0)),
    pad: int = 0,
) -> Row:
    """A valid row; `pad` lengthens its exe so a line takes more bytes on disk."""
    gpu = workload != "no-gpu"
    return Row(
        unix_ms=unix_ms,
        tgid=tgid,
        process=Process(
            comm=comm,
            exe="/usr/local/bin/python3.12" + "x" * pad,
            cgroup=f"/system.slice/docker-{container_id}.scope" if container_id else "/user.slice",
            container_id=container_id,
            cwd=cwd,
            framework=framework,
        ),
        workload=workload,
        usage=Usage(cpu_cores, rss_bytes, 8, 1.0, 0.0, 0.0, 512.0, 10.0, 20.0, 0.001),
        cgroup_usage=CgroupUsage(cpu_cores, 0.0, rss_bytes, 0, 0.0, 0.0, 0.0),
        syscalls=syscalls,
        ioctl_count=3 if gpu else None,
        since_last_gpu_ioctl_ms=40 if gpu else None,
    )


def poll(
    unix_ms: int, count: int, *, first_tgid: int = 1000, comm: str = "python", pad: int = 0
) -> list[Row]:
    """`count` rows of one poll at `unix_ms`, tgids counting up from `first_tgid`."""
    return [
        top_row(first_tgid + i, unix_ms, comm=comm, cpu_cores=0.01 * (i % 300), pad=pad) for i in range(count)
    ]


def encode(rows: list[Row]) -> bytes:
    return b"".join(encode_row(row) for row in rows)


def append(path: Path, data: bytes) -> None:
    """Append `data` in one write, as the collector writes a poll."""
    with path.open("ab") as f:
        f.write(data)
