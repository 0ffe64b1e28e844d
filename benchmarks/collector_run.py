"""`croft run` as a user runs it, with the CO-RE programs against BCC, side by side in one run (root):
what it costs to start and to keep running while it watches N idle processes.

For each loader (`--ebpf core`, `--ebpf bcc`) and each size, interleaved round by round, a fresh
`croft run --watch <cgroup> --metrics-addr ...` over N idle processes in a cgroup of their own:

- start to attached: from the process's start until its log says the programs are attached (the
  `eBPF: ...` line, written once libbpf or BCC attached the last program): Python's start, croft's
  imports, the syscall table, loading and attaching; beside it the CPU the process had used by then
  (what a busy host's wall time inflates);
- start to first row: until the first row of a watched process is in the dataset (the first poll
  has no rates: rows come with the second, 2 s later);
- RSS steady: VmRSS after `--settle` seconds of polls, the median of a few samples; RSS peak: VmHWM
  at the end (BCC's peak is its compile);
- CPU: the process's CPU time (user + system, /proc/<pid>/stat) over `--seconds` of polls after
  settling, in % of one core at 2 s polls.

Goals (CO-RE): RSS steady <= 48 MB and peak <= 64 MB at 1,000 processes; attached
<= 0.5 s; first row at the second poll (<= 2.5 s).

    sudo .venv/bin/python benchmarks/collector_run.py [--rounds 3] [--sizes 1000,10000]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.workload import OwnCgroup  # noqa: E402

CROFT = str(Path(sys.executable).parent / "croft")
LOADERS = ("core", "bcc")


def start_idle(group: OwnCgroup, count: int) -> None:
    """`count` idle `sleep` processes inside `group`, forked by one shell that joined it."""
    script = f"for i in $(seq {count}); do sleep 100000 & done; echo started; wait"
    shell = subprocess.Popen(["sh", "-c", script], preexec_fn=group._join, stdout=subprocess.PIPE, text=True)
    group.children.append(shell)  # type: ignore[arg-type]
    assert shell.stdout is not None
    shell.stdout.readline()
    deadline = time.monotonic() + 120
    while len((group.dirs[0] / "cgroup.procs").read_text().split()) < count + 1:
        if time.monotonic() > deadline:
            raise SystemExit(f"only some of {count} processes started")
        time.sleep(0.1)


def status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in kB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def cpu_s(pid: int) -> float:
    """CPU time of every thread of `pid` so far, in s (schedstat: nanoseconds, not 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int(task.joinpath("schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_run(loader: str, watch: str, settle_s: float, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="croft-run-bench-") as tmp:
        dataset = Path(tmp) / "croft-dataset.jsonl"
        argv = [CROFT, "run", "--ebpf", loader, "--watch", watch, "--dataset", str(dataset)]
        argv += ["--metrics-addr", f"127.0.0.1:{free_port()}"]
        started = time.monotonic()
        croft = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        attached: list[float] = []
        attached_cpu: list[float] = []
        lines: list[str] = []

        def read_log() -> None:
            assert croft.stderr is not None
            for line in croft.stderr:
                lines.append(line)
                if line.startswith("croft: eBPF:") and not attached:
                    attached.append(time.monotonic() - started)
                    attached_cpu.append(cpu_s(croft.pid))

        reader = threading.Thread(target=read_log, daemon=True)
        reader.start()
        first_row = None
        deadline = started + 120
        while first_row is None and time.monotonic() < deadline and croft.poll() is None:
            if dataset.exists() and dataset.stat().st_size > 0:
                first_row = time.monotonic() - started
            time.sleep(0.01)
        if first_row is None:
            croft.kill()
            raise SystemExit(f"croft run --ebpf {loader} wrote no row: {''.join(lines)[-2000:]}")
        time.sleep(max(0.0, settle_s - (time.monotonic() - started)))
        rss = []
        before, t0 = cpu_s(croft.pid), time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(min(2.0, seconds / 5))
            rss.append(status(croft.pid)["VmRSS"])
        used = cpu_s(croft.pid) - before
        elapsed = time.monotonic() - t0
        peak = status(croft.pid)["VmHWM"]
        croft.send_signal(signal.SIGINT)
        croft.wait(timeout=60)
        reader.join(timeout=5)
        return {
            "attached_s": attached[0] if attached else float("nan"),
            "attached_cpu_s": attached_cpu[0] if attached_cpu else float("nan"),
            "first_row_s": first_row,
            "rss_mb": statistics.median(rss) / 1024,
            "peak_mb": peak / 1024,
            "cpu_pct": 100.0 * used / elapsed,
        }


def spread(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--settle", type=float, default=12.0, help="seconds from start before measuring")
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="seconds of polls CPU and RSS are taken over"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("benchmarks/collector_run.py: skipped, needs root (croft run, cgroups)")
        return
    print(
        f"croft run, CO-RE against BCC: {args.rounds} rounds, medians [min-max]; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"{'processes':>9} {'loader':>6} {'attached s':>18} {'(its CPU s)':>18} {'first row s':>18} "
        f"{'RSS MB':>18} {'peak MB':>18} {'CPU % core @2s':>18}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with OwnCgroup(f"croft-run-bench-{os.getpid()}") as group:
            start_idle(group, size)
            results: dict[str, list[dict[str, float]]] = {loader: [] for loader in LOADERS}
            for round_number in range(args.rounds):
                order = LOADERS if round_number % 2 == 0 else LOADERS[::-1]
                for loader in order:
                    results[loader].append(one_run(loader, group.name, args.settle, args.seconds))
            for loader in LOADERS:
                runs = results[loader]

                def column(key: str, digits: int, runs: list[dict[str, float]] = runs) -> str:
                    return spread([r[key] for r in runs], digits)

                print(
                    f"{size:>9} {loader:>6} {column('attached_s', 2):>18} {column('attached_cpu_s', 2):>18} "
                    f"{column('first_row_s', 2):>18} "
                    f"{column('rss_mb', 1):>18} {column('peak_mb', 1):>18} {column('cpu_pct', 2):>18}",
                    flush=True,
                )
    print(
        "goals (CO-RE, 1,000 processes): RSS <= 48 MB, peak <= 64 MB, attached <= 0.5 s, first row <= 2.5 s"
    )


if __name__ == "__main__":
    main()
