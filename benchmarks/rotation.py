"""Rotation figures: zstd ratio and speed per level on realistic rows, and what compressing a 1 GiB
segment does to the poll thread.

    .venv/bin/python benchmarks/rotation.py [--rows FILE.jsonl[.zst]] [--segment-mib 1024]

Rows: a realistic mix (pods of several frameworks, GPU holders, host daemons, idle processes written
every 15th poll, syscall lists, rates as counts over the real interval, rounded as the collector
rounds them). A real dataset file (--rows, or the largest in fixtures/datasets/) gets its own level
table beside it. The 1 GiB segment is 16 MiB of generated rows repeated: repeats are farther apart
than zstd's window at these levels, so they compress like fresh rows. Files go under bench-data/
and are removed afterwards.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import zstandard

from croft.adapters.dataset.compressor import ZSTD_LEVEL
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset import codec
from croft.domain.dataset.rotation import Limits, Naming, SegmentName
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "rotation"
SYSCALLS = (
    "futex",
    "read",
    "write",
    "epoll_wait",
    "openat",
    "close",
    "newfstatat",
    "ioctl",
    "mmap",
    "munmap",
    "sendto",
    "recvfrom",
    "poll",
    "nanosleep",
    "clock_nanosleep",
    "getdents64",
    "lseek",
    "pread64",
    "sched_yield",
    "madvise",
    "rt_sigprocmask",
    "brk",
)
FRAMEWORKS = ("pytorch", "vllm", "jax", "tensorflow", "ray", "triton", None, None)


class _Proc:
    def __init__(self, rng: random.Random, tgid: int, pod: int, framework: str | None, gpu: bool) -> None:
        self.tgid, self.gpu, self.rng = tgid, gpu, rng
        cid = f"{rng.getrandbits(256):064x}" if pod >= 0 else None
        cgroup = (
            f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{rng.getrandbits(128):032x}"
            f".slice/cri-containerd-{cid}.scope"
            if cid
            else rng.choice(["/system.slice/kubelet.service", "/system.slice/containerd.service", "/"])
        )
        comm = rng.choice(["python", "pt_main_thread", "ray::IDLE", "node", "nginx", "java", "sshd"])
        self.process = Process(
            comm=comm,
            exe=f"/usr/bin/{comm}",
            cgroup=cgroup,
            container_id=cid,
            cwd=rng.choice(["/workspace", "/app", "/"]),
            framework=framework,
        )
        self.cpu = rng.choice([0.0, 0.01, 0.3, 1.0, 3.5])
        self.rss = rng.randrange(1 << 24, 1 << 34, 4096)
        self.threads = rng.choice([1, 4, 16, 64, 104])
        self.idle = self.cpu == 0.0
        self.ctx = rng.choice([2.0, 20.0, 400.0])
        self.io = rng.choice([0.0, 0.0, 1e5, 8e6])
        self.net = rng.choice([0.0, 0.0, 2e3, 5e5]) if pod >= 0 else 0.0
        self.syscalls = [
            (name, rng.choice([5.0, 50.0, 2000.0])) for name in rng.sample(SYSCALLS, rng.randrange(0, 10))
        ]
        self.since_ioctl = rng.randrange(0, 10_000_000)

    def row(self, unix_ms: int, interval_s: float, cgroup_usage: CgroupUsage) -> Row:
        # Rates are counts over the real interval, rounded as the collector rounds them: CPU in
        # 10 ms ticks, context switches, syscalls and bytes as whole counts.
        r = self.rng
        busy = not self.idle and r.random() < 0.8

        def rate(mean: float, digits: int = 2) -> float:
            return round(int(r.expovariate(1 / mean)) / interval_s, digits) if busy and mean else 0.0

        ticks = int(self.cpu * 100 * interval_s * r.uniform(0.8, 1.2)) if busy else 0
        if r.random() < 0.05:
            self.rss += r.choice([4096, -4096, 1 << 20, 8 << 20])
        gpu_calls = int(r.expovariate(1 / 300)) if self.gpu and busy else 0
        self.since_ioctl = 0 if gpu_calls else self.since_ioctl + round(interval_s * 1000)
        return Row(
            unix_ms=unix_ms,
            tgid=self.tgid,
            process=self.process,
            workload="gpu-held" if self.gpu else "no-gpu",
            usage=Usage(
                cpu_cores=round(ticks / 100 / interval_s, 4),
                rss_bytes=self.rss,
                threads=self.threads,
                ctx_voluntary_s=rate(self.ctx),
                ctx_involuntary_s=rate(self.ctx / 10),
                read_bytes_s=rate(self.io) if r.random() < 0.3 else 0.0,
                write_bytes_s=rate(self.io / 2) if r.random() < 0.3 else 0.0,
                network_rx_bytes_s=rate(self.net),
                network_tx_bytes_s=rate(self.net * 2),
                runqueue_s=round(ticks / 100 / interval_s * r.uniform(0, 0.3), 4),
            ),
            cgroup_usage=cgroup_usage,
            syscalls=tuple(
                sorted(
                    (SyscallRate(name=name, rate_per_sec=rate(mean)) for name, mean in self.syscalls if busy),
                    key=lambda s: -s.rate_per_sec,
                )
            ),
            ioctl_count=gpu_calls if self.gpu else None,
            since_last_gpu_ioctl_ms=self.since_ioctl if self.gpu else None,
        )


def realistic_polls(target_bytes: int, seed: int = 7) -> list[bytes]:
    """Encoded polls (one bytes object per 2 s poll) until `target_bytes`: 14 pods of 1-8
    processes, some holding GPUs, and 25 host processes."""
    rng = random.Random(seed)
    procs = [
        _Proc(rng, 1000 + 97 * pod + i, pod, fw, gpu=fw in ("pytorch", "vllm", "jax") and i == 0)
        for pod in range(14)
        for fw in [rng.choice(FRAMEWORKS)]
        for i in range(rng.randrange(1, 9))
    ] + [_Proc(rng, 100 + i, -1, None, gpu=False) for i in range(25)]
    polls, size, unix_ms, n, interval_ms = [], 0, 1_792_505_950_473, 0, 2000
    memory = {p.process.container_id: rng.randrange(1 << 28, 1 << 35, 4096) for p in procs}
    while size < target_bytes:
        pods: dict[str | None, CgroupUsage] = {}
        lines = []
        for p in procs:
            if p.idle and n % 15:
                continue
            cg = pods.setdefault(
                p.process.container_id,
                CgroupUsage(
                    cpu_cores=round(rng.randrange(0, 800) / 100 / (interval_ms / 1000), 4),
                    cpu_throttled_fraction=round(rng.choice([0.0, 0.0, 0.0, rng.randrange(1, 20) / 20]), 4),
                    memory_bytes=memory[p.process.container_id],
                    oom_kills=0,
                    cpu_pressure_avg10=round(rng.choice([0.0, rng.uniform(0, 30)]), 2),
                    memory_pressure_avg10=round(rng.choice([0.0, 0.0, 0.0, rng.uniform(0, 5)]), 2),
                    io_pressure_avg10=round(rng.choice([0.0, rng.uniform(0, 2)]), 2),
                ),
            )
            lines.append(codec.encode_row(p.row(unix_ms, interval_ms / 1000, cg)))
        poll = b"".join(lines)
        polls.append(poll)
        size += len(poll)
        interval_ms = 2000 + rng.randrange(-3, 4)
        unix_ms += interval_ms
        n += 1
    return polls


def polls_from_file(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    polls: dict[bytes, list[bytes]] = {}
    for line in data.splitlines(keepends=True):
        if line.endswith(b"\n"):
            polls.setdefault(line[: line.index(b",")], []).append(line)  # grouped by "unix_ms"
    return [b"".join(lines) for lines in polls.values()]


def level_table(sample: bytes, what: str) -> None:
    print(f"\nzstd levels on {len(sample) / 2**20:.1f} MiB of {what}; the writer uses level {ZSTD_LEVEL}")
    print(f"{'level':>8} {'ratio':>8} {'MB/s':>8}")
    for level in (1, 3, 6, 9, 12, 15, 19):
        cctx = zstandard.ZstdCompressor(level=level, write_checksum=True)
        start = time.process_time()
        out = cctx.compress(sample)
        cpu = time.process_time() - start
        mark = "  <- chosen" if level == ZSTD_LEVEL else ""
        print(f"{level:>8} {len(sample) / len(out):>7.1f}x {len(sample) / 1e6 / cpu:>8.0f}{mark}")
    start = time.process_time()
    out = gzip.compress(sample, 6)
    cpu = time.process_time() - start
    print(f"{'gzip -6':>8} {len(sample) / len(out):>7.1f}x {len(sample) / 1e6 / cpu:>8.0f}")


def write_segment(path: Path, polls: list[bytes], size: int) -> None:
    block = b"".join(polls)
    with path.open("wb") as f:
        while f.tell() < size:
            f.write(block[: size - f.tell()])
        f.flush()
        os.fsync(f.fileno())


def time_polls(
    writer: DatasetWriter,
    polls: list[bytes],
    start: int,
    stop: threading.Event | None,
    count: int,
    spacing_s: float,
) -> list[float]:
    """Seconds each append took, `count` polls `spacing_s` apart (or until `stop` is set)."""
    durations = []
    now_ms = 1_900_000_000_000
    for i in range(count):
        if stop is not None and stop.is_set():
            break
        lines = polls[(start + i) % len(polls)]
        t0 = time.perf_counter()
        writer.append(lines, now_ms)
        durations.append(time.perf_counter() - t0)
        now_ms += 2000
        time.sleep(spacing_s)
    return durations


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _idle_phase(polls: list[bytes], limits: Limits, spacing_s: float) -> list[float]:
    writer = DatasetWriter(DATA / "croft-dataset.jsonl", limits)
    durations = time_polls(writer, polls, 0, None, 300, spacing_s)
    writer.close()
    (DATA / "croft-dataset.jsonl").unlink()
    return durations


def poll_figures(polls: list[bytes], segment_mib: int, spacing_s: float) -> None:
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True)
    naming = Naming.for_live("croft-dataset.jsonl")
    segment = SegmentName(1_800_000_000_000)
    plain = DATA / naming.plain(segment)
    write_segment(plain, polls, segment_mib << 20)
    limits = Limits(rotate_secs=10**9, rotate_bytes=1 << 40, retain_days=10**5, retain_bytes=1 << 50)
    # Idle before and after, busy in between, all on one writer's directory: the segment waits
    # under a name the writer ignores until the busy phase, when a new writer finds it closed.
    parked = DATA / "parked"
    plain.rename(parked)
    idle = _idle_phase(polls, limits, spacing_s)
    parked.rename(plain)
    started = time.perf_counter()
    writer = DatasetWriter(DATA / "croft-dataset.jsonl", limits)
    done = threading.Event()

    def watch() -> None:
        while writer.compressor.waiting():
            time.sleep(0.005)
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    busy = time_polls(writer, polls, 0, done, 10**6, spacing_s)
    done.wait()
    took = time.perf_counter() - started
    writer.close()
    (DATA / "croft-dataset.jsonl").unlink()
    idle += _idle_phase(polls, limits, spacing_s)
    compressed = DATA / naming.compressed(segment)
    ratio = (segment_mib << 20) / compressed.stat().st_size
    print(
        f"\n{segment_mib} MiB segment on the compression thread: {took:.1f} s wall, "
        f"{(segment_mib << 20) / 1e6 / took:.0f} MB/s, {ratio:.1f}x"
    )
    poll_kib = statistics.mean(map(len, polls)) / 1024
    print(f"append() of a {poll_kib:.0f} KiB poll, {spacing_s * 1000:.0f} ms apart:")
    print(f"{'':>12} {'polls':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, values in (("idle", idle), ("compressing", busy)):
        p50, p99, top = (v * 1e3 for v in (pct(values, 50), pct(values, 99), max(values)))
        print(f"{name:>12} {len(values):>6} {p50:>8.3f} {p99:>8.3f} {top:>8.3f}")
    ratio50, ratio99 = pct(busy, 50) / pct(idle, 50), pct(busy, 99) / pct(idle, 99)
    print(f"{'ratio':>12} {'':>6} {ratio50:>8.2f} {ratio99:>8.2f}   (goal: p99 ratio <= 1.2)")
    shutil.rmtree(DATA, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, help="a real dataset file whose rows get a level table too")
    parser.add_argument("--segment-mib", type=int, default=1024)
    parser.add_argument("--sample-mib", type=int, default=16)
    parser.add_argument("--spacing-ms", type=float, default=5.0)
    args = parser.parse_args()
    fixtures = sorted((ROOT / "fixtures" / "datasets").glob("**/*.jsonl*"))
    real = args.rows or (max(fixtures, key=lambda f: f.stat().st_size) if fixtures else None)
    if real is not None:
        real_polls = polls_from_file(real)
        level_table(b"".join(real_polls)[: args.sample_mib << 20], f"recorded rows of {real.name}")
    # The segment is always built from the generator: a small real file repeated within zstd's
    # window would compress absurdly well and say nothing about a real hour.
    polls = realistic_polls(args.sample_mib << 20)
    rows = sum(poll.count(b"\n") for poll in polls)
    level_table(
        b"".join(polls)[: args.sample_mib << 20],
        f"generated rows ({len(polls)} polls, {sum(map(len, polls)) / rows:.0f} bytes/row)",
    )
    poll_figures(polls, args.segment_mib, args.spacing_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
