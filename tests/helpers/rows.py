"""Dataset rows for tests, one builder with variants, encoded with the dataset's own codec.

- `make_row`: any valid row; every field a keyword with a plain default (croft top's tests).
- `seq_row`: a row whose `tgid` carries a sequence number, for exactly-once checks of the writer,
  the readers and croft collect.
- `member_row`: a row as the collector's core writes it for a process of a cgroup membership, for the
  /metrics series.
- `poll`, `encode`, `append`: a poll's rows, their bytes, one write of them to a live file.
"""

from __future__ import annotations

from pathlib import Path

from croft.domain.collector.container import display_path, membership_container_id
from croft.domain.collector.snapshot import CgroupMembership
from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage, Workload

T0_MS = 1_792_505_950_473  # 2026-10-20 14:19:10.473 UTC, the example row's time
EXAMPLE_CONTAINER = "33813f5d0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5"


def make_row(
    tgid: int,
    unix_ms: int = T0_MS,
    *,
    comm: str = "python",
    exe: str = "/usr/local/bin/python3.12",
    cgroup: str | None = None,
    cpu_cores: float = 0.5,
    rss_bytes: int = 1 << 30,
    container_id: str | None = EXAMPLE_CONTAINER,
    cwd: str = "/workspace",
    framework: str | None = "pytorch",
    workload: Workload = "no-gpu",
    usage: Usage | None = None,
    cgroup_usage: CgroupUsage | None = None,
    syscalls: tuple[SyscallRate, ...] = (
        SyscallRate(name="futex", rate_per_sec=282.0),
        SyscallRate(name="read", rate_per_sec=12.0),
    ),
    pad: int = 0,
) -> Row:
    """A valid row. `cgroup` defaults to the container's docker scope (or /user.slice without one);
    `usage` and `cgroup_usage` default to figures built from `cpu_cores` and `rss_bytes`; `pad`
    lengthens the exe so a line takes more bytes on disk. A GPU workload gets ioctl figures."""
    gpu = workload != "no-gpu"
    if cgroup is None:
        cgroup = f"/system.slice/docker-{container_id}.scope" if container_id else "/user.slice"
    return Row(
        unix_ms=unix_ms,
        tgid=tgid,
        process=Process(
            comm=comm,
            exe=exe + "x" * pad,
            cgroup=cgroup,
            container_id=container_id,
            cwd=cwd,
            framework=framework,
        ),
        workload=workload,
        usage=usage
        or Usage(
            cpu_cores=cpu_cores,
            rss_bytes=rss_bytes,
            threads=8,
            ctx_voluntary_s=1.0,
            ctx_involuntary_s=0.0,
            read_bytes_s=0.0,
            write_bytes_s=512.0,
            network_rx_bytes_s=10.0,
            network_tx_bytes_s=20.0,
            runqueue_s=0.001,
        ),
        cgroup_usage=cgroup_usage
        or CgroupUsage(
            cpu_cores=cpu_cores,
            cpu_throttled_fraction=0.0,
            memory_bytes=rss_bytes,
            oom_kills=0,
            cpu_pressure_avg10=0.0,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.0,
        ),
        syscalls=syscalls,
        ioctl_count=3 if gpu else None,
        since_last_gpu_ioctl_ms=40 if gpu else None,
    )


def seq_row(seq: int, unix_ms: int, *, container: int = 0) -> Row:
    """A small, valid row whose `tgid` carries a sequence number for exactly-once checks."""
    return make_row(
        seq,
        unix_ms,
        exe="/usr/bin/python3",
        cgroup=f"/kubepods/pod{container}",
        container_id=f"{container:064x}",
        syscalls=(SyscallRate(name="futex", rate_per_sec=100.0), SyscallRate(name="read", rate_per_sec=3.5)),
    )


def cgroup_usage(**changes: float) -> CgroupUsage:
    """The cgroup figures of `member_row`, with `changes`."""
    base = {
        "cpu_cores": 1.5,
        "cpu_throttled_fraction": 0.25,
        "memory_bytes": 1 << 30,
        "oom_kills": 0,
        "cpu_pressure_avg10": 4.0,
        "memory_pressure_avg10": 0.5,
        "io_pressure_avg10": 0.0,
    }
    return CgroupUsage(**{**base, **changes})  # type: ignore[arg-type]


def member_row(
    membership: CgroupMembership,
    tgid: int,
    syscalls: dict[str, float],
    cgroup_usage: CgroupUsage | None = None,
    cgroup: str | None = None,
) -> Row:
    """A row as the core writes it for a process of `membership` (container id and cgroup derived
    the same way)."""
    return make_row(
        tgid,
        1_700_000_000_000,
        comm="web",
        exe="/srv/web",
        cgroup=cgroup if cgroup is not None else display_path(membership),
        container_id=membership_container_id(membership),
        cwd="/",
        framework=None,
        usage=Usage(
            cpu_cores=0.5,
            rss_bytes=1 << 20,
            threads=4,
            ctx_voluntary_s=1.0,
            ctx_involuntary_s=0.0,
            read_bytes_s=0.0,
            write_bytes_s=0.0,
            network_rx_bytes_s=0.0,
            network_tx_bytes_s=0.0,
            runqueue_s=0.0,
        ),
        cgroup_usage=cgroup_usage or _cgroup_usage_default(),
        syscalls=tuple(SyscallRate(name=n, rate_per_sec=r) for n, r in syscalls.items()),
    )


def _cgroup_usage_default() -> CgroupUsage:
    return cgroup_usage()


def poll(
    unix_ms: int, count: int, *, first_tgid: int = 1000, comm: str = "python", pad: int = 0
) -> list[Row]:
    """`count` rows of one poll at `unix_ms`, tgids counting up from `first_tgid`."""
    return [
        make_row(first_tgid + i, unix_ms, comm=comm, cpu_cores=0.01 * (i % 300), pad=pad)
        for i in range(count)
    ]


def encode(rows: list[Row]) -> bytes:
    return b"".join(encode_row(row) for row in rows)


def append(path: Path, data: bytes) -> None:
    """Append `data` in one write, as the collector writes a poll."""
    with path.open("ab") as f:
        f.write(data)
