"""croft collect from local collectors, beside curl of the same files, and the bytes a second collect
of an unchanged cluster moves, in one run.

    .venv/bin/python benchmarks/collect.py [--nodes 3] [--segment-mb 16] [--segments 3] [--live-mb 40]

Each node is a real collector HTTP server process (croft's HttpServer and dataset endpoint) serving
a generated dataset directory under bench-data/collect/ (kept for the next run): compressed
segments (random bytes: zstd output does not compress further) and a live file of JSON lines.
`croft collect --url NODE=URL ...` (the real command, one process for all nodes) copies everything
into an empty directory; `curl` (one process per node, every file of the node in that one process)
fetches the same files, and a third arm runs `sync` on curl's files after it (croft collect fsyncs
each copy before it renames it into place: a copy that a crash could leave torn under its final name
would be taken as complete by the next, incremental collect). Each arm starts after a `sync`, so that
none waits for the writeback of the arm before it (croft collect's fsyncs did, behind curl's 275 MB
of dirty pages: 0.80-0.87x in session 8). Best of `--rounds`, arms alternating. Then a second
collect into the complete copy: its bytes moved (HTTP bodies: index, overlaps) against the first's.
croft's modules are byte-compiled first, as an install leaves them (an editable install run under
PYTHONDONTWRITEBYTECODE, as CI and this machine set it, compiles them again at every start).
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "bench-data" / "collect"
CROFT = str(Path(sys.executable).parent / "croft")
LIVE = "croft-dataset.jsonl"
SERVER = """
import signal, sys, threading
from pathlib import Path
from croft.adapters.dataset.endpoint import DatasetEndpoint
from croft.adapters.http.server import HttpServer
server = HttpServer("127.0.0.1", 0)
DatasetEndpoint(Path(sys.argv[1])).register(server)
server.start()
print(server.address[1], flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.close()
"""
ROW = (
    b'{"unix_ms":%d,"tgid":%d,"process":{"comm":"python","exe":"/usr/local/bin/python3.12",'
    b'"cgroup":"/kubepods/burstable/pod5d1c/33813f5d","container_id":"33813f5d","cwd":"/workspace",'
    b'"framework":"pytorch"},"workload":"gpu-held","usage":{"cpu_cores":0.0,"rss_bytes":1145397248,'
    b'"threads":104},"syscalls":[{"name":"futex","rate_per_sec":282.0}]}\n'
)


def generate(nodes: int, segments: int, segment_mb: int, live_mb: int) -> list[Path]:
    """The node directories, made once per shape (a stamp file names the shape)."""
    shape = f"{nodes} {segments} {segment_mb} {live_mb}\n"
    data = DATA / f"{nodes}x{segments}x{segment_mb}+{live_mb}"  # one directory per shape, kept
    stamp = data / "shape"
    dirs = [data / "nodes" / f"node-{i}" for i in range(nodes)]
    if stamp.exists() and stamp.read_text() == shape:
        return dirs
    shutil.rmtree(data, ignore_errors=True)
    for d in dirs:
        d.mkdir(parents=True)
        for s in range(segments):
            (d / f"croft-dataset-20261020T{10 + s:02d}0000Z.jsonl.zst").write_bytes(
                os.urandom(segment_mb << 20)
            )
        block = b"".join(ROW % (1_792_505_950_000 + 2000 * i, i) for i in range(2000))
        with (d / LIVE).open("wb") as f:
            for _ in range((live_mb << 20) // len(block)):
                f.write(block)
    stamp.write_text(shape)
    return dirs


def start_servers(stack: ExitStack, dirs: list[Path]) -> list[str]:
    urls = []
    for d in dirs:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(d / LIVE)], stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        stack.callback(process.wait, 10)
        stack.callback(process.terminate)
        assert process.stdout is not None
        stack.callback(process.stdout.close)
        urls.append(f"http://127.0.0.1:{process.stdout.readline().strip()}")
    return urls


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_collect(urls: list[str], out: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the croft process, its last line."""
    argv = [CROFT, "collect", "--out", str(out)]
    for i, url in enumerate(urls):
        argv += ["--url", f"node-{i}={url}"]
    cpu = children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, children_cpu_s() - cpu, done.stdout.strip().splitlines()[-1]


def run_curl(urls: list[str], dirs: list[Path], out: Path, durable: bool = False) -> tuple[float, float]:
    """Wall seconds, CPU seconds of the curl processes; `durable`: then `sync` of the files it wrote
    (fsync of each, what croft collect does before it renames a copy into place)."""
    cpu = children_cpu_s()
    started = time.perf_counter()
    for url, d in zip(urls, dirs, strict=True):
        target = out / d.name
        target.mkdir(parents=True)
        argv = ["curl", "-sSf"]
        for name in sorted(p.name for p in d.iterdir()):
            argv += [f"{url}/dataset/{name}", "-o", str(target / name)]
        subprocess.run(argv, check=True)
    if durable:
        subprocess.run(["sync", *(str(p) for d in dirs for p in (out / d.name).iterdir())], check=True)
    return time.perf_counter() - started, children_cpu_s() - cpu


def moved_bytes(summary: str) -> int:
    """Bytes moved from collect's last line (`... 12.3 MB moved` or `... 1234 bytes moved`)."""
    match = re.search(r"([\d.]+) (MB|bytes) moved$", summary)
    assert match, summary
    return int(float(match.group(1)) * (1e6 if match.group(2) == "MB" else 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--segments", type=int, default=3)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--live-mb", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("curl") is None:
        print("benchmarks/collect.py: curl is not installed; apt-get install curl", file=sys.stderr)
        return 1
    dirs = generate(args.nodes, args.segments, args.segment_mb, args.live_mb)
    import croft

    compileall.compile_dir(Path(croft.__file__).parent, quiet=1)
    total = sum(p.stat().st_size for d in dirs for p in d.iterdir())
    out = DATA / "out"
    collect_s: list[tuple[float, float]] = []
    curl_s: list[tuple[float, float]] = []
    synced_s: list[tuple[float, float]] = []
    with ExitStack() as stack:
        urls = start_servers(stack, dirs)
        for u in urls:
            httpx.get(u + "/dataset/").raise_for_status()
        first_summary = second_summary = ""
        for round_no in range(args.rounds):
            arms = ("collect", "curl", "curl+sync")
            for arm in arms if round_no % 2 == 0 else arms[::-1]:
                shutil.rmtree(out, ignore_errors=True)
                os.sync()  # untimed: the previous arm's dirty pages are written before this one starts
                if arm == "collect":
                    seconds, cpu_s, first_summary = run_collect(urls, out)
                    collect_s.append((seconds, cpu_s))
                else:
                    (curl_s if arm == "curl" else synced_s).append(run_curl(urls, dirs, out, arm != "curl"))
        shutil.rmtree(out, ignore_errors=True)
        run_collect(urls, out)
        second_s, second_cpu_s, second_summary = run_collect(urls, out)
        for d in dirs:
            for p in d.iterdir():
                assert (out / d.name / p.name).read_bytes() == p.read_bytes(), p
    shutil.rmtree(out, ignore_errors=True)
    first_moved, second_moved = moved_bytes(first_summary), moved_bytes(second_summary)
    mb = total / 1e6
    (best_collect, collect_cpu), (best_curl, curl_cpu) = min(collect_s), min(curl_s)
    best_synced, synced_cpu = min(synced_s)
    load = os.getloadavg()[0]
    files = len(list(dirs[0].iterdir()))
    print(
        f"croft collect from {args.nodes} local collectors: {mb:.0f} MB in {files} files per node, "
        f"best of {args.rounds}; load average {load:.2f} on {os.cpu_count()} cores"
    )
    print(f"{'':24}{'seconds':>10}{'MB/s':>10}{'client CPU s':>14}")
    print(f"{'croft collect':24}{best_collect:>10.2f}{mb / best_collect:>10.0f}{collect_cpu:>14.2f}")
    print(f"{'curl, same files':24}{best_curl:>10.2f}{mb / best_curl:>10.0f}{curl_cpu:>14.2f}")
    print(f"{'curl, then sync':24}{best_synced:>10.2f}{mb / best_synced:>10.0f}{synced_cpu:>14.2f}")
    print(
        f"croft collect / curl throughput: {best_curl / best_collect:.2f}x (goal >= 0.9x); against curl "
        f"whose files are then on disk too, as croft collect's are before it renames them: "
        f"{best_synced / best_collect:.2f}x"
    )
    print(
        f"second collect of the unchanged cluster: {second_moved} bytes moved vs {first_moved} on the first "
        f"= {100 * second_moved / first_moved:.4f} % (goal <= 1 %), {second_s:.2f} s, "
        f"{second_cpu_s:.2f} CPU s (croft's start, the indexes, the plans)"
    )
    return 0 if second_moved <= first_moved / 100 else 1


if __name__ == "__main__":
    sys.exit(main())
