"""Segment summaries: a one-hour croft profile window against `zstd -dcf | grep -F | wc -l` over the
whole dataset, croft stats --json (and the human stats) against DuckDB's read_json, at 12, 24 and 48
hourly segments per node on 3 nodes, with the peak memory of both croft commands; in one run.

    .venv/bin/python benchmarks/summaries.py [--pods 24] [--repeat 3]

The dataset (cached under bench-data/summaries/, regenerated when its parameters change) is three
per-node directories of 48 hourly segments written by croft's own compressor (so each carries its
summary, as the collector writes it) plus a short plain live file each; rows come from the fixtures'
simulated fleet (fixtures/datasets/make_fixtures.py, 24 pods and 10 host processes per node) as in
benchmarks/readers.py. The 12- and 24-segment datasets are the
first segments of each node (symbolic links) with the same live file. Each timing is the best of
--repeat interleaved runs on a warm page cache; CPU seconds of all the command's processes beside
it. The goals: profile (1 h window) <= 0.15 x grep, stats --json <= 0.08 x DuckDB, reader memory
< 300 MB. A closed segment's summary is trusted on the file's structure (no data read), so every
run reads each segment's summary frame and nothing is remembered between runs.

croft's modules are compiled to bytecode first, as `pip install` leaves an installed croft: with
PYTHONDONTWRITEBYTECODE set (as on the shared development host) an editable install would compile
every module from source on every run (about 150 M instructions of a 12-segment croft stats).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "summaries"
sys.path.insert(0, str(ROOT / "fixtures" / "datasets"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_fixtures import Fleet  # noqa: E402

from croft.adapters.dataset.compressor import compress_segment  # noqa: E402
from croft.domain.dataset.rotation import Naming, SegmentName  # noqa: E402
from readers import CROFT, Run, duckdb_stats, files_of, run  # noqa: E402

NODES = ("node-a", "node-b", "node-c")
SEGMENTS = 48
SIZES = (12, 24, 48)
SEGMENT_POLLS = 1800  # an hour of 2 s polls
LIVE_POLLS = 300  # the live file: ten minutes
BASE_POLLS = 700
HOUR_MS = 3_600_000
T0_MS = 1_792_505_950_473 - 3 * 86_400_000
NAMING = Naming.for_live("croft-dataset.jsonl")


def _node_dataset(args: tuple[int, str, int]) -> tuple[str, str]:
    """Write one node's 48 hourly segments (through croft's compressor) and live file."""
    seed, node, pods = args
    directory = DATA / "nodes" / node
    directory.mkdir(parents=True, exist_ok=True)
    polls = Fleet(seed=seed, pods=pods, hosts=10).polls()
    base = []
    for _ in range(BASE_POLLS):
        unix_ms, lines = next(polls)
        base.append((str(unix_ms).encode(), lines))
    busy = json.loads(base[0][1].split(b"\n", 1)[0])["process"]["container_id"]
    poll = 0
    for index in range(SEGMENTS + 1):
        start_ms = T0_MS + index * HOUR_MS
        out = []
        for i in range(SEGMENT_POLLS if index < SEGMENTS else LIVE_POLLS):
            old_ms, lines = base[poll % BASE_POLLS]
            unix_ms = start_ms + i * 2000
            out.append(lines.replace(b'"unix_ms":' + old_ms + b",", b'"unix_ms":%d,' % unix_ms))
            poll += 1
        if index == SEGMENTS:
            (directory / NAMING.live).write_bytes(b"".join(out))
            break
        name = SegmentName(start_ms // 1000 * 1000)
        (directory / NAMING.plain(name)).write_bytes(b"".join(out))
        compress_segment(directory, NAMING, name)
    return node, busy


def dataset(pods: int) -> str:
    """The cached dataset; a busy container id of its first node."""
    manifest = DATA / "manifest.json"
    # v2: summaries of version 3 (per-poll figures for croft profile)
    wanted = {"pods": pods, "nodes": NODES, "segments": SEGMENTS, "segment_polls": SEGMENT_POLLS, "v": 2}
    if manifest.exists() and json.loads(manifest.read_text())["params"] == json.loads(json.dumps(wanted)):
        return str(json.loads(manifest.read_text())["container"])
    subprocess.run(["rm", "-rf", str(DATA)], check=True)
    print(f"generating {len(NODES)} nodes x {SEGMENTS} hourly segments under {DATA} (once) ...", flush=True)
    start = time.perf_counter()
    with Pool(2) as pool:
        results = pool.map(_node_dataset, [(21 + i, node, pods) for i, node in enumerate(NODES)])
    for size in SIZES:
        for node in NODES:
            view = DATA / f"n{size}" / node
            view.mkdir(parents=True)
            source = DATA / "nodes" / node
            for segment in sorted(source.glob("*.jsonl.zst"))[:size]:
                (view / segment.name).symlink_to(segment)
            (view / NAMING.live).symlink_to(source / NAMING.live)
    container = dict(results)[NODES[0]]
    manifest.write_text(json.dumps({"params": wanted, "container": container}))
    print(f"generated in {time.perf_counter() - start:.0f} s", flush=True)
    return container


def compress_cost(repeat: int = 3) -> None:
    """What writing the summary adds to the compression thread's work on one hourly segment."""
    import zstandard

    segment = sorted((DATA / "nodes" / NODES[0]).glob("*.jsonl.zst"))[0]
    data = zstandard.ZstdDecompressor().stream_reader(segment.open("rb")).read()
    name = NAMING.parse(segment.name)
    assert name is not None
    seconds: dict[bool, float] = {}
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        for summaries in (False, True) * repeat:
            (Path(scratch) / NAMING.plain(name[0])).write_bytes(data)
            start = time.process_time()
            compress_segment(Path(scratch), NAMING, name[0], summaries=summaries)
            took = time.process_time() - start
            seconds[summaries] = min(seconds.get(summaries, took), took)
    print(
        f"\ncompressing one hourly segment ({len(data) / 1e6:.0f} MB): {seconds[False]:.2f} CPU s, "
        f"with its summary {seconds[True]:.2f} CPU s ({seconds[True] / seconds[False]:.2f}x); "
        f"{seconds[True] / 3600 * 100:.2f} % of a core at one segment an hour"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=24, help="simulated pods per node")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per timing, interleaved; the best is shown"
    )
    args = parser.parse_args()
    container = dataset(args.pods)
    compileall.compile_dir(str(ROOT / "src" / "croft"), quiet=1)  # as an installed croft has it
    results: dict[int, dict[str, Run]] = {}
    for size in SIZES:
        nodes = DATA / f"n{size}"
        files = [str(Path(f).resolve()) for f in files_of(nodes)]
        subprocess.run(f"cat {' '.join(files)} > /dev/null", shell=True, check=True)  # warm the page cache
        plain = sum(1 for f in files if not f.endswith(".zst"))
        on_disk = sum(Path(f).stat().st_size for f in files)
        middle = T0_MS + size // 2 * HOUR_MS
        window = ["--from-ms", str(middle), "--to-ms", str(middle + HOUR_MS - 1)]
        commands: dict[str, Callable[[], Run]] = {
            "grep": lambda files=files: run(
                f"zstd -dcf {' '.join(files)} | LC_ALL=C grep -F {container} | wc -l"
            ),
            "profile": lambda nodes=nodes, window=window: run(
                [CROFT, "profile", container, "--dataset", str(nodes), *window]
            ),
            "duckdb": lambda files=files: duckdb_stats(files),
            "stats --json": lambda nodes=nodes: run([CROFT, "stats", str(nodes), "--json"]),
            "stats": lambda nodes=nodes: run([CROFT, "stats", str(nodes)]),
        }
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                runs[name].append(command())
        results[size] = {name: min(rs, key=lambda r: r.wall_s) for name, rs in runs.items()}
        peak = {name: max(r.peak_rss for r in rs) for name, rs in runs.items()}
        results[size]["peak"] = Run(0, 0, max(peak["profile"], peak["stats"], peak["stats --json"]), "")
        stats = json.loads(results[size]["stats --json"].out)
        duck = json.loads(results[size]["duckdb"].out)
        assert (stats["rows"], stats["first_ms"], stats["last_ms"]) == (duck[0], duck[3], duck[4]), (
            stats,
            duck,
        )
        print(
            f"{size} segments x {len(NODES)} nodes: {len(files)} files ({plain} plain live), "
            f"{on_disk / 1e6:.0f} MB on disk, {stats['rows']:,} rows; same rows as DuckDB: yes",
            flush=True,
        )

    print(
        f"\nbest of {args.repeat}, wall seconds (CPU seconds of all processes in brackets); "
        f"cores: {os.cpu_count()}"
    )
    print(f"{'':34}{'segments':>9}{'croft':>16}{'competitor':>18}{'ratio':>8}{'goal':>8}")
    for label, mine, theirs, goal in (
        ("profile 1 h vs zstd|grep -F|wc -l", "profile", "grep", "<= 0.15"),
        ("stats --json vs DuckDB", "stats --json", "duckdb", "<= 0.08"),
        ("stats (human) vs DuckDB", "stats", "duckdb", ""),
        ("stats (human) vs stats --json", "stats", "stats --json", "<= 1.0"),
    ):
        for size in SIZES:
            a, b = results[size][mine], results[size][theirs]
            print(
                f"{label if size == SIZES[0] else '':34}{size:>9}{a.wall_s:>8.2f} ({a.cpu_s:5.2f})"
                f"{b.wall_s:>10.2f} ({b.cpu_s:5.2f}){a.wall_s / b.wall_s:>8.3f}{goal:>8}"
            )
    print(f"\n{'flat: croft at 48 / at 12 segments':44}{'ratio':>8}")
    for name in ("profile", "stats --json", "stats"):
        flat = results[SIZES[-1]][name].wall_s / results[SIZES[0]][name].wall_s
        print(
            f"  {name:42}{flat:>8.2f}   (grep {results[48]['grep'].wall_s / results[12]['grep'].wall_s:.2f})"
        )
    print("\npeak RSS of croft profile and stats (process tree)")
    for size in SIZES:
        print(f"  {size:>2} segments {results[size]['peak'].peak_rss / 1e6:>8.0f} MB   goal < 300 MB")
    compress_cost()
    prof = json.loads(results[SIZES[-1]]["profile"].out)
    print(
        f"\nprofile at 48: {prof['polls']} polls of {container[:12]} in the hour, "
        f"{prof['processes']} processes"
    )


if __name__ == "__main__":
    main()
