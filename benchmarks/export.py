"""croft export figures, side by side in one run:

- `croft export` against DuckDB's own `read_json` -> Parquet conversion of the same files;
- the writing library: the same Arrow tables (from croft's reader) written by pyarrow and by
  DuckDB's `COPY ... TO`;
- one container's profile: DuckDB over the export against `croft profile` over the JSONL;
- a re-run with nothing new, and the export's size on disk against the zstd segments.

    .venv/bin/python benchmarks/export.py [--gb 0.4] [--repeat 2]

The dataset (cached under bench-data/export/) is three per-node directories of hourly zstd segments
and a live file each, rows from the fixtures' simulated fleet as in benchmarks/readers.py. Each
timing is the best of --repeat runs (wall s), with CPU s of all the command's processes.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import zstandard

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "export"
CROFT = str(Path(sys.executable).with_name("croft"))
sys.path.insert(0, str(ROOT / "fixtures" / "datasets"))

from make_fixtures import Fleet  # noqa: E402

NODES = ("node-a", "node-b", "node-c")
SEGMENT_POLLS = 1800  # an hour of 2 s polls


class Run(NamedTuple):
    wall_s: float
    cpu_s: float
    out: str


def run(command: list[str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{command} exited {done.returncode}: {done.stderr}")
    return Run(elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stdout)


def in_process(fn) -> Run:  # type: ignore[no-untyped-def]
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return Run(elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, str(out))


def dataset(gb: float) -> tuple[Path, str]:
    manifest = DATA / "manifest.json"
    wanted = {"gb": gb, "nodes": NODES, "segment_polls": SEGMENT_POLLS, "v": 1}
    if manifest.exists() and json.loads(manifest.read_text())["params"] == json.loads(json.dumps(wanted)):
        return DATA / "nodes", json.loads(manifest.read_text())["container"]
    shutil.rmtree(DATA, ignore_errors=True)
    print(f"generating {gb} GB under {DATA} (once) ...", flush=True)
    per_node, container = int(gb * 1e9 / len(NODES)), ""
    for seed, node in enumerate(NODES, 21):
        directory = DATA / "nodes" / node
        directory.mkdir(parents=True)
        polls = Fleet(seed=seed, pods=24, hosts=10).polls(start_ms=1_792_504_800_000 - 6 * 3_600_000)
        written, out, first_ms = 0, [], None
        compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
        while written < per_node:
            unix_ms, lines = next(polls)
            container = container or json.loads(lines.split(b"\n", 1)[0])["process"]["container_id"]
            first_ms = first_ms or unix_ms
            out.append(lines)
            written += len(lines)
            if len(out) == SEGMENT_POLLS:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(first_ms // 1000))
                (directory / f"croft-dataset-{stamp}.jsonl.zst").write_bytes(
                    compressor.compress(b"".join(out))
                )
                out, first_ms = [], None
        (directory / "croft-dataset.jsonl").write_bytes(b"".join(out))
    manifest.write_text(json.dumps({"params": wanted, "container": container}))
    return DATA / "nodes", container


def duckdb_convert(nodes: Path, out: Path) -> str:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET enable_progress_bar = false")
    files = sorted(str(p) for p in nodes.rglob("*.jsonl*"))
    con.execute(
        f"COPY (SELECT * FROM read_json({files!r}, format = 'newline_delimited')) "
        f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)"
    )
    return "ok"


def library_choice(nodes: Path) -> tuple[Run, Run, int]:
    """The same Arrow tables (one big segment, through croft's reader) written by pyarrow and by
    DuckDB's COPY ... TO."""
    import duckdb
    import pyarrow.parquet as pq

    from croft.adapters.dataset.files import find_files
    from croft.adapters.dataset.parquet import table_of
    from croft.dataset import file_rows
    from croft.domain.dataset.skips import SkipTally

    segment = next(f for f in find_files(nodes / NODES[0], None) if f.compressed)
    table = table_of(list(file_rows(segment, SkipTally())))
    with tempfile.TemporaryDirectory() as tmp:
        by_arrow = in_process(lambda: pq.write_table(table, f"{tmp}/a.parquet", compression="zstd"))
        con = duckdb.connect()
        con.execute("SET threads = 2")
        con.register("rows", table)
        by_duckdb = in_process(
            lambda: con.execute(f"COPY rows TO '{tmp}/d.parquet' (FORMAT parquet, COMPRESSION zstd)")
        )
    return by_arrow, by_duckdb, table.num_rows


def duckdb_profile(export: Path, container: str) -> str:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    row = con.execute(
        f"""WITH polls AS (
              SELECT node, unix_ms, max(cgroup_usage.cpu_cores) AS c, max(cgroup_usage.memory_bytes) AS m
              FROM read_parquet('{export}/**/*.parquet', hive_partitioning = true)
              WHERE process.container_id = '{container}' GROUP BY node, unix_ms)
            SELECT count(*), avg(c), quantile_cont(c, 0.95), max(c), avg(m), max(m) FROM polls"""
    ).fetchone()
    return json.dumps(row)


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.wall_s)


def size_of(path: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=0.4, help="decompressed size of the dataset")
    parser.add_argument("--repeat", type=int, default=2, help="runs per timing; the best is shown")
    args = parser.parse_args()
    nodes, container = dataset(args.gb)
    scratch = DATA / "out"
    exports, converts, reruns, profiles, scans = [], [], [], [], []
    for _ in range(args.repeat):
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        exports.append(run([CROFT, "export", str(nodes), "--to", str(scratch / "croft")]))
        reruns.append(run([CROFT, "export", str(nodes), "--to", str(scratch / "croft")]))
        converts.append(in_process(lambda: duckdb_convert(nodes, scratch / "duckdb.parquet")))
        profiles.append(in_process(lambda: duckdb_profile(scratch / "croft", container)))
        scans.append(run([CROFT, "profile", container, "--dataset", str(nodes)]))
    by_arrow, by_duckdb, table_rows = library_choice(nodes)
    zst = size_of(nodes, "*.zst")
    plain = size_of(nodes, "*.jsonl")
    parquet = size_of(scratch / "croft", "*.parquet")
    # The parts of the segments alone (a live file's parts are part-<stem>.parquet, no time stamp).
    live_parts = {f"part-{p.name.removesuffix('.jsonl')}.parquet" for p in nodes.rglob("*.jsonl")}
    segment_parts = sum(
        p.stat().st_size for p in (scratch / "croft").rglob("*.parquet") if p.name not in live_parts
    )
    duck = (scratch / "duckdb.parquet").stat().st_size
    e, c, r, p, s = best(exports), best(converts), best(reruns), best(profiles), best(scans)
    print(f"dataset: {args.gb} GB decompressed, {len(NODES)} nodes; zstd segments {zst / 1e6:.1f} MB")
    print(f"{'':46}{'croft':>16}{'competitor':>18}{'ratio':>8}")
    line("export vs DuckDB read_json -> Parquet", e, c)
    line("profile: DuckDB on export vs croft on JSONL", p, s)
    line(f"writer: pyarrow vs DuckDB COPY ({table_rows} rows)", by_arrow, by_duckdb)
    print(f"re-run with nothing new: {r.wall_s:.2f} s ({r.out.strip()})")
    print(
        f"on disk: the segments' Parquet {segment_parts / 1e6:.1f} MB vs zstd segments {zst / 1e6:.1f} MB "
        f"({segment_parts / zst:.2f}x); all Parquet {parquet / 1e6:.1f} MB (with the live files, "
        f"{plain / 1e6:.1f} MB plain JSONL); DuckDB's own Parquet of everything {duck / 1e6:.1f} MB"
    )


def line(what: str, mine: Run, theirs: Run) -> None:
    """One row of the table: wall s (CPU s) of each side and the ratio of wall times."""
    print(
        f"{what:46}{mine.wall_s:8.2f} ({mine.cpu_s:5.1f}){theirs.wall_s:10.2f} ({theirs.cpu_s:5.1f})"
        f"{mine.wall_s / theirs.wall_s:8.2f}"
    )


if __name__ == "__main__":
    main()
