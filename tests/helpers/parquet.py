"""A generated multi-node dataset for croft export's tests: one zstd segment per UTC hour per node,
then a live file; rows of three containers and host processes, every row field varied."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

from croft.domain.dataset import codec
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage

# The figures croft profile reports as {mean, p95, max}.
PROFILE_FIGURES = ("cpu_cores", "memory_bytes", "cpu_throttled_fraction", "cpu_pressure_avg10")
HOUR_MS = 3_600_000
START_MS = 1_792_504_800_000  # 2026-10-20T14:00:00Z


def fleet_rows(rng: random.Random, node: int, first_ms: int, polls: int) -> list[Row]:
    containers = [f"{rng.getrandbits(256):064x}" for _ in range(3)] + [None]
    out = []
    for poll in range(polls):
        unix_ms = first_ms + poll * 61_000 + rng.randrange(0, 7)
        for index, container in enumerate(containers):
            cgroup = CgroupUsage(
                cpu_cores=round(rng.uniform(0, 4), 3),
                cpu_throttled_fraction=round(rng.choice([0.0, rng.uniform(0, 1)]), 4),
                memory_bytes=rng.randrange(1 << 20, 1 << 34),
                oom_kills=rng.choice([0, 0, 1]),
                cpu_pressure_avg10=round(rng.uniform(0, 50), 2),
                memory_pressure_avg10=0.0,
                io_pressure_avg10=round(rng.uniform(0, 3), 2),
            )
            for proc in range(2):
                out.append(
                    Row(
                        unix_ms=unix_ms,
                        tgid=1000 * node + 10 * index + proc,
                        process=Process(
                            comm=rng.choice(["python", "nginx", "pt_main_thread"]),
                            exe="/usr/bin/python3",
                            cgroup=f"/kubepods/pod{index}/{container}" if container else "/system.slice/x",
                            container_id=container,
                            cwd="/app",
                            framework=rng.choice([None, "pytorch"]),
                        ),
                        workload=rng.choice(["no-gpu", "gpu-held", "gpu-onset"]),
                        usage=Usage(
                            cpu_cores=round(rng.uniform(0, 2), 4),
                            rss_bytes=rng.randrange(1 << 30),
                            threads=rng.randrange(1, 99),
                            ctx_voluntary_s=1.5,
                            ctx_involuntary_s=0.5,
                            read_bytes_s=0.0,
                            write_bytes_s=1024.0,
                            network_rx_bytes_s=2.25,
                            network_tx_bytes_s=3.5,
                            runqueue_s=0.001,
                        ),
                        cgroup_usage=cgroup,
                        syscalls=tuple(
                            SyscallRate(name=name, rate_per_sec=round(rng.uniform(0, 900), 2))
                            for name in rng.sample(["read", "futex", "ioctl", "epoll_wait", "sendto"], 3)
                        ),
                        ioctl_count=rng.choice([None, 3]),
                        since_last_gpu_ioctl_ms=None,
                        label=rng.choice([None, "burst"]),
                    )
                )
    return out


def write_fleet(root: Path, nodes: int = 3, hours: int = 3) -> Path:
    """Per-node dataset directories: one zstd segment per hour, then a live file."""
    rng = random.Random(7)
    for node in range(nodes):
        directory = root / f"node-{node}"
        directory.mkdir(parents=True)
        for hour in range(hours):
            first = START_MS + hour * HOUR_MS + 1000
            data = b"".join(codec.encode_row(r) for r in fleet_rows(rng, node, first, 50))
            stamp = f"202610{20 + 0}T{14 + hour:02d}0001Z"
            segment = directory / f"croft-dataset-{stamp}.jsonl.zst"
            segment.write_bytes(zstandard.ZstdCompressor(level=3).compress(data))
        live = fleet_rows(rng, node, START_MS + hours * HOUR_MS + 1000, 10)
        (directory / "croft-dataset.jsonl").write_bytes(b"".join(codec.encode_row(r) for r in live))
    return root


def write_segment(path: Path, rows: list[Row]) -> Path:
    """`rows` as a dataset file at `path`: zstd when its name ends in .zst, else plain JSONL."""
    data = b"".join(codec.encode_row(r) for r in rows)
    compressed = path.name.endswith(".zst")
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(data) if compressed else data)
    return path


# The keys of croft stats --json that a query over the export answers, and the profile's.
STATS_KEYS = ("rows", "polls", "containers", "processes", "first_ms", "last_ms")
PROFILE_KEYS = (
    "polls",
    "processes",
    "gpu_poll_share",
    *(f"{figure}_{stat}" for figure in PROFILE_FIGURES for stat in ("mean", "p95", "max")),
)


def stats_sql(table: str, spark: bool = False) -> str:
    """`croft stats --json`'s rows, polls (distinct node and time), containers, processes (distinct
    node and tgid), first and last time over `table`, in DuckDB's or Spark's dialect."""
    pair = "DISTINCT node, {}" if spark else "DISTINCT (node, {})"
    return f"""SELECT count(*) AS rows, count({pair.format("unix_ms")}) AS polls,
                      count(DISTINCT process.container_id) AS containers,
                      count({pair.format("tgid")}) AS processes,
                      min(unix_ms) AS first_ms, max(unix_ms) AS last_ms
               FROM {table}"""


def profile_sql(table: str, container_id: str, spark: bool = False) -> str:
    """`croft profile`'s polls, processes, GPU share and the mean, p95 (linear interpolation: DuckDB's
    quantile_cont, Spark's percentile, numpy's default) and max of each figure over `table`. A poll
    is a distinct (node, unix_ms) with a row of the container; its figures are the max of its rows.
    The GPU share averages doubles: Spark's avg of a 1.0 literal is a DECIMAL of 5 places."""
    quantile = "percentile" if spark else "quantile_cont"
    figures = ", ".join(
        f"avg({f}) AS {f}_mean, {quantile}({f}, 0.95) AS {f}_p95, max({f}) AS {f}_max"
        for f in PROFILE_FIGURES
    )
    processes = "count(DISTINCT node, tgid)" if spark else "count(DISTINCT (node, tgid))"
    return f"""
        WITH mine AS (SELECT * FROM {table} WHERE process.container_id = '{container_id}'),
        polls AS (
            SELECT node, unix_ms,
                   max(cgroup_usage.cpu_cores) AS cpu_cores,
                   CAST(max(cgroup_usage.memory_bytes) AS DOUBLE) AS memory_bytes,
                   max(cgroup_usage.cpu_throttled_fraction) AS cpu_throttled_fraction,
                   max(cgroup_usage.cpu_pressure_avg10) AS cpu_pressure_avg10,
                   CAST(max(CASE WHEN workload IN ('gpu-onset', 'gpu-held') THEN 1 ELSE 0 END)
                        AS DOUBLE) AS gpu
            FROM mine GROUP BY node, unix_ms)
        SELECT count(*) AS polls, (SELECT {processes} FROM mine) AS processes,
               avg(gpu) AS gpu_poll_share, {figures}
        FROM polls"""


def profile_answers(profile: dict[str, Any]) -> dict[str, float]:
    """A `croft profile` JSON object flattened to PROFILE_KEYS."""
    out = {key: float(profile[key]) for key in ("polls", "processes", "gpu_poll_share")}
    for figure in PROFILE_FIGURES:
        for stat in ("mean", "p95", "max"):
            out[f"{figure}_{stat}"] = float(profile[figure][stat])
    return out


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
ODD_NODE = "07 a=b%c"  # a digit first, a space, '=' and '%': escaped in the path, a string in the table


def fixture_nodes(root: Path) -> Path:
    """fixtures/datasets/nodes, and one more node with an odd name (a copy of cpu-c's rows)."""
    nodes = Path(shutil.copytree(FIXTURES / "nodes", root / "nodes"))
    shutil.copytree(nodes / "cpu-c", nodes / ODD_NODE)
    return nodes


def damaged_tree(root: Path) -> Path:
    """fixtures/datasets/damaged, plus two dataset names that are not files: a FIFO and a directory."""
    damaged = Path(shutil.copytree(FIXTURES / "damaged", root / "damaged"))
    os.mkfifo(damaged / "pipe.jsonl")
    (damaged / "directory.jsonl").mkdir()
    return damaged


# The datasets both engines are checked on, each made under a directory given.
DATASETS: dict[str, Callable[[Path], Path]] = {
    "generated fleet": lambda root: write_fleet(root / "nodes"),
    "fixture nodes": fixture_nodes,
    "damaged fixtures": damaged_tree,
}
