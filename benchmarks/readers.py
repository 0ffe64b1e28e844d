"""Reader figures: croft profile against `zstd -dcf | grep -F | wc -l`, croft stats against DuckDB's
read_json, and the peak memory of both croft commands at two dataset sizes, in one run.

    .venv/bin/python benchmarks/readers.py [--gb 3.6] [--repeat 2]

The dataset (cached under bench-data/readers/, regenerated when its parameters change) is four
per-node dataset directories of hourly zstd segments plus a plain live file each, at the
collector's zstd level. Rows come from the fixtures' simulated fleet (fixtures/datasets/
make_fixtures.py, 24 pods and 10 host processes per node): a base of polls is simulated per node
and replayed with fresh poll times, the cycle longer than zstd's window so it compresses like new
rows. The segments carry no summary, so croft stats reads every row (its full scan); a copy of the
dataset as croft's own writer leaves it (`croft index` gives each closed segment its summary; the
live file stays plain) gives croft stats' figure there, against the same DuckDB run (same rows).
Every command gets both cores (croft's two workers, DuckDB's two threads, the pipeline's
processes); each timing is the best of --repeat interleaved runs on a warm page cache, with the CPU
seconds of all the command's processes beside it (this machine is shared, so CPU seconds are the
steadier figure); croft's modules are byte-compiled first, as an install leaves them. Peak memory
is the largest sum of RSS over a command's process tree, sampled every 10 ms.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path
from typing import NamedTuple

import zstandard

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "readers"
CROFT = str(Path(sys.executable).with_name("croft"))
sys.path.insert(0, str(ROOT / "fixtures" / "datasets"))

from make_fixtures import Fleet  # noqa: E402

from croft.domain.dataset.rotation import Naming, SegmentName  # noqa: E402

NODES = ("node-a", "node-b", "node-c", "node-d")
SEGMENT_POLLS = 1800  # an hour of 2 s polls: the collector rotates hourly
BASE_POLLS = 700  # simulated polls per node, replayed with new times (about 27 MB, > zstd's 2 MB window)
NAMING = Naming.for_live("croft-dataset.jsonl")


def _node_dataset(args: tuple[int, str, int]) -> tuple[str, str]:
    """Write one node's dataset of about `target` decompressed bytes; (node, a busy container id)."""
    seed, node, target = args
    directory = DATA / "nodes" / node
    directory.mkdir(parents=True, exist_ok=True)
    base = []
    polls = Fleet(seed=seed, pods=24, hosts=10).polls()
    for _ in range(BASE_POLLS):
        unix_ms, lines = next(polls)
        base.append((str(unix_ms).encode(), lines))
    busy = json.loads(base[0][1].split(b"\n", 1)[0])["process"]["container_id"]
    unix_ms, written, poll = 1_792_505_950_473 - 86_400_000, 0, 0
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    while written < target:
        first_ms, out = unix_ms, []
        for _ in range(SEGMENT_POLLS):
            old_ms, lines = base[poll % BASE_POLLS]
            block = lines.replace(b'"unix_ms":' + old_ms + b",", b'"unix_ms":%d,' % unix_ms)
            out.append(block)
            written += len(block)
            poll += 1
            unix_ms += 2000 + (poll * 7919) % 7 - 3
            if written >= target:
                break
        data = b"".join(out)
        if written < target:
            name = NAMING.compressed(SegmentName(first_ms // 1000 * 1000))
            (directory / name).write_bytes(compressor.compress(data))
        else:
            (directory / NAMING.live).write_bytes(data)
    return node, busy


def dataset(gb: float) -> tuple[Path, str]:
    """The cached dataset of about `gb` decompressed GB, and a busy container id of its first node;
    beside it (`indexed`), the same files with each segment's summary, as croft writes them."""
    manifest = DATA / "manifest.json"
    wanted = {"gb": gb, "nodes": NODES, "segment_polls": SEGMENT_POLLS, "base_polls": BASE_POLLS, "v": 2}
    if manifest.exists() and json.loads(manifest.read_text())["params"] == json.loads(json.dumps(wanted)):
        return DATA / "nodes", json.loads(manifest.read_text())["container"]
    subprocess.run(["rm", "-rf", str(DATA)], check=True)
    print(f"generating {gb} GB under {DATA} (once) ...", flush=True)
    start = time.perf_counter()
    per_node = int(gb * 1e9 / len(NODES))
    with Pool(2) as pool:
        results = pool.map(_node_dataset, [(11 + i, node, per_node) for i, node in enumerate(NODES)])
    container = dict(results)[NODES[0]]
    subprocess.run(["cp", "-r", str(DATA / "nodes"), str(DATA / "indexed")], check=True)
    subprocess.run([CROFT, "index", str(DATA / "indexed")], check=True, stdout=subprocess.DEVNULL)
    manifest.write_text(json.dumps({"params": wanted, "container": container}))
    print(f"generated in {time.perf_counter() - start:.0f} s", flush=True)
    return DATA / "nodes", container


def files_of(path: Path) -> list[str]:
    return sorted(str(p) for p in path.rglob("*.jsonl*"))


def _tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(status.split("VmRSS:")[1].split()[0]) * 1024
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return total


class Run(NamedTuple):
    wall_s: float
    cpu_s: float
    peak_rss: int
    out: str


def run(command: list[str] | str, env: dict[str, str] | None = None) -> Run:
    """One command (with `env` added to the environment): wall and CPU seconds (all its
    processes), peak RSS of its process tree."""
    peak = 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        shell=isinstance(command, str),
        stdout=subprocess.PIPE,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{command} exited {proc.returncode}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Run(elapsed, cpu, peak, out)


def duckdb_stats(files: list[str]) -> Run:
    """DuckDB's read_json on two threads, columns given (no sampling to detect them)."""
    import duckdb

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET enable_progress_bar = false")
    row = con.execute(
        "SELECT count(*), count(DISTINCT process.container_id), count(DISTINCT tgid), min(unix_ms), "
        "max(unix_ms) FROM read_json(?, format = 'newline_delimited', "
        "columns = {unix_ms: 'BIGINT', tgid: 'BIGINT', process: 'STRUCT(container_id VARCHAR)'})",
        [files],
    ).fetchone()
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    con.close()
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Run(elapsed, cpu, 0, json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=3.6, help="decompressed size of the dataset")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per timing, interleaved; the best is shown"
    )
    args = parser.parse_args()
    nodes, container = dataset(args.gb)
    indexed = nodes.with_name("indexed")
    small = nodes / NODES[0]
    files = files_of(nodes)
    on_disk = sum(Path(f).stat().st_size for f in files)
    zst = sum(f.endswith(".zst") for f in files)
    print(
        f"dataset: {nodes.relative_to(ROOT)}, {len(NODES)} nodes, {len(files)} files ({zst} zstd), "
        f"{on_disk / 1e9:.2f} GB on disk, {args.gb} GB decompressed; cores: {os.cpu_count()}"
    )
    # croft's bytecode, as an installed wheel has it: an editable install run with
    # PYTHONDONTWRITEBYTECODE (as CI and this machine set it) compiles its ~30 modules on every run
    # (~150 M instructions, ~40 ms of each croft command's start).
    import croft

    compileall.compile_dir(Path(croft.__file__).parent, quiet=1)
    every = files + files_of(indexed)
    subprocess.run(f"cat {' '.join(every)} > /dev/null", shell=True, check=True)  # warm the page cache

    commands: dict[str, Callable[[], Run]] = {
        "grep": lambda: run(f"zstd -dcf {' '.join(files)} | LC_ALL=C grep -F {container} | wc -l"),
        "profile": lambda: run([CROFT, "profile", container, "--dataset", str(nodes)]),
        "duckdb": lambda: duckdb_stats(files),
        "stats --json": lambda: run([CROFT, "stats", str(nodes), "--json"]),
        "stats --json, summaries": lambda: run([CROFT, "stats", str(indexed), "--json"]),
        "stats": lambda: run([CROFT, "stats", str(nodes)]),
    }
    runs: dict[str, list[Run]] = {name: [] for name in commands}
    for _ in range(args.repeat):  # interleaved, so that a busy moment hits every command alike
        for name, command in commands.items():
            runs[name].append(command())
    best = {name: min(rs, key=lambda r: r.wall_s) for name, rs in runs.items()}
    small_rss = {
        "profile": run([CROFT, "profile", container, "--dataset", str(small)]).peak_rss,
        "stats": run([CROFT, "stats", str(small)]).peak_rss,
    }
    big_rss = {
        "profile": max(r.peak_rss for r in runs["profile"]),
        "stats": max(r.peak_rss for r in runs["stats"] + runs["stats --json"]),
    }
    small_gb = sum(Path(f).stat().st_size for f in files_of(small)) / on_disk * args.gb

    print(f"\nbest of {args.repeat}, wall seconds (CPU seconds of all processes in brackets)")
    print(f"{'':30}{'croft':>16}{'competitor':>18}{'ratio':>8}{'goal':>8}")
    for label, mine, theirs, goal in (
        ("profile vs zstd|grep -F|wc -l", "profile", "grep", "<= 1.2"),
        ("stats --json vs DuckDB", "stats --json", "duckdb", "<= 1.0"),
        ("  segments summarized", "stats --json, summaries", "duckdb", "<= 0.08"),
        ("stats (+ syscalls) vs DuckDB", "stats", "duckdb", ""),
    ):
        a, b = best[mine], best[theirs]
        print(
            f"{label:30}{a.wall_s:>8.2f} ({a.cpu_s:5.1f}){b.wall_s:>10.2f} ({b.cpu_s:5.1f})"
            f"{a.wall_s / b.wall_s:>8.2f}{goal:>8}"
        )
    print(
        f"\npeak RSS, process tree    {small_gb:.1f} GB (1 node)   {args.gb:.1f} GB ({len(NODES)} nodes)"
        "   goal"
    )
    for name in ("profile", "stats"):
        print(
            f"{'croft ' + name:26}{small_rss[name] / 1e6:>10.0f} MB{big_rss[name] / 1e6:>17.0f} MB"
            "   < 300 MB, flat"
        )

    prof = json.loads(best["profile"].out)
    stats = json.loads(best["stats --json"].out)
    duck = json.loads(best["duckdb"].out)
    print(
        f"\nsame answers: grep -F counts {best['grep'].out.strip()} lines of {container[:12]}; "
        f"croft profile saw {prof['polls']} polls of its {prof['processes']} processes"
    )
    print(f"  rows        croft {stats['rows']:>10}   duckdb {duck[0]:>10}")
    print(f"  containers  croft {stats['containers']:>10}   duckdb {duck[1]:>10}")
    print(f"  tgids       croft {stats['processes']:>10}   duckdb {duck[2]:>10}   (croft counts node+tgid)")
    print(f"  unix_ms     croft {stats['first_ms']}..{stats['last_ms']}   duckdb {duck[3]}..{duck[4]}")
    summarized = json.loads(best["stats --json, summaries"].out)
    same = all(summarized[key] == stats[key] for key in stats if key != "bytes")
    print(f"  summarized  croft stats --json says the same of the indexed copy (but its bytes): {same}")


if __name__ == "__main__":
    main()
