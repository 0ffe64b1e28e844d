"""Capture the collector's fixtures on this host (root): a real trace recorded by `croft run` under
a workload in its own cgroup, procfs/cgroupfs trees per layout, damaged copies, and the golden
datasets their replays must reproduce.

    sudo .venv/bin/python scripts/capture_fixtures.py [--seconds 16]

Writes (replacing what is there):
- fixtures/traces/live/          the recorded trace (croft run --record, --watch croft-fixture)
- fixtures/traces/<damage>/      copies of it with one fault each: counter-reset, pid-reuse,
                                 vanished-pid, first-poll-only
- fixtures/procfs/hybrid/        /proc files of the workload pids and the cgroup files they name,
                                 as captured (this host is hybrid: v1 controllers + v2 unified)
- fixtures/procfs/v2/, v1/       the same capture laid out as a pure v2 and a pure v1 host would
- fixtures/procfs/damaged/       the hybrid tree with a truncated stat line and a vanished pid
- fixtures/golden/<trace>.jsonl  `croft run --replay` of each trace (tests regenerate them with
                                 CROFT_REGEN_GOLDEN=1 or pytest --regen-golden)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import zstandard

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.workload import ALLOC, BURN, IDLE, WRITE, OwnCgroup  # noqa: E402

FIXTURES = REPO / "fixtures"
CGROUP = "croft-fixture"
PROC_FILES = ("stat", "status", "io", "schedstat", "cgroup", "cmdline")
CROFT = [sys.executable, "-m", "croft"]


def record_trace(seconds: float, out: Path) -> dict[str, int]:
    """Run the workload in its own cgroup and `croft run --record` beside it; returns its pids."""
    if out.exists():
        shutil.rmtree(out)
    with OwnCgroup(CGROUP, cpu_quota_us=50_000) as group, tempfile.TemporaryDirectory() as tmp:
        pids = {
            "burn": group.spawn(BURN).pid,
            "alloc": group.spawn(ALLOC, "48").pid,
            "write": group.spawn(WRITE, f"{tmp}/written", "1048576").pid,
            "idle": group.spawn(IDLE).pid,
        }
        time.sleep(1)
        croft = subprocess.Popen(
            [*CROFT, "run", "--watch", CGROUP, "--record", str(out), "--dataset", f"{tmp}/live.jsonl"]
        )
        try:
            deadline = time.monotonic() + 120  # loading the eBPF programs takes a while
            while not any(out.glob("*.jsonl.zst")) and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(seconds / 2)
            short = group.spawn("import time; time.sleep(3)")  # exits mid-trace
            pids["short"] = short.pid
            time.sleep(seconds / 2)
            capture_procfs({k: v for k, v in pids.items() if k != "short"}, FIXTURES / "procfs" / "hybrid")
        finally:
            croft.send_signal(signal.SIGTERM)
            if croft.wait(timeout=30) != 0:
                raise SystemExit("croft run failed while recording")
    return pids


def capture_procfs_files(pids: dict[str, int], out: Path) -> None:
    """Copy the /proc files of `pids` into `out/proc/<pid>/`."""
    proc = out / "proc"
    for pid in pids.values():
        source = Path(f"/proc/{pid}")
        if not source.exists():
            continue
        target = proc / str(pid)
        target.mkdir(parents=True)
        for name in PROC_FILES:
            (target / name).write_bytes((source / name).read_bytes())
        maps_lines = (source / "maps").read_bytes().splitlines()
        maps = b"".join(line + b"\n" for line in maps_lines if b".so" in line)
        (target / "maps").write_bytes(maps)
        for link in ("exe", "cwd"):
            (target / link).symlink_to((source / link).readlink())


def capture_procfs(pids: dict[str, int], out: Path) -> None:
    """Copy the /proc files of `pids` and the cgroup files they point at into `out`."""
    if out.exists():
        shutil.rmtree(out)
    capture_procfs_files(pids, out)
    cgroup = out / "cgroup"
    files = {
        "unified": ("cgroup.controllers", "cpu.stat", "cpu.pressure", "memory.pressure", "io.pressure"),
        "cpu": ("cgroup.procs", "cpu.stat"),
        "cpuacct": ("cgroup.procs", "cpuacct.usage"),
        "memory": ("cgroup.procs", "memory.usage_in_bytes", "memory.oom_control"),
    }
    for hierarchy, names in files.items():
        for sub in ("", CGROUP):
            for name in names:
                src = Path("/sys/fs/cgroup") / hierarchy / sub / name
                if src.exists():
                    dst = cgroup / hierarchy / sub / name
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_bytes(b"" if name == "cgroup.procs" else src.read_bytes())


def derive_layouts(hybrid: Path) -> None:
    """v2-only and v1-only trees rearranged from the hybrid capture (same numbers, other paths)."""
    for layout in ("v2", "v1"):
        out = FIXTURES / "procfs" / layout
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(hybrid / "proc", out / "proc", symlinks=True)
        for cgroup_file in (out / "proc").glob("*/cgroup"):
            lines = cgroup_file.read_text().splitlines()
            if layout == "v2":
                # The v2 path is where the v1 controllers put the process here.
                path = next(line.split(":", 2)[2] for line in lines if ":memory:" in line)
                cgroup_file.write_text(f"0::{path}\n")
            else:
                cgroup_file.write_text("".join(f"{line}\n" for line in lines if not line.startswith("0::")))
        cg = out / "cgroup"
        if layout == "v2":
            for sub in ("", CGROUP):
                base = cg / sub
                base.mkdir(parents=True, exist_ok=True)
                for name in ("cpu.pressure", "memory.pressure", "io.pressure"):
                    shutil.copy(hybrid / "cgroup" / "unified" / sub / name, base / name)
                (base / "cgroup.controllers").write_text("cpu memory io\n")
                usage_ns = int((hybrid / "cgroup" / "cpuacct" / sub / "cpuacct.usage").read_text())
                v1_cpu = (hybrid / "cgroup" / "cpu" / sub / "cpu.stat").read_text()
                (base / "cpu.stat").write_text(f"usage_usec {usage_ns // 1000}\n{v1_cpu}")
                memory = (hybrid / "cgroup" / "memory" / sub / "memory.usage_in_bytes").read_text()
                (base / "memory.current").write_text(memory)
                oom = (hybrid / "cgroup" / "memory" / sub / "memory.oom_control").read_text()
                kills = oom.split("oom_kill ")[1].split()[0]
                (base / "memory.events").write_text(f"low 0\nhigh 0\nmax 0\noom 0\noom_kill {kills}\n")
        else:
            for hierarchy in ("cpu", "cpuacct", "memory"):
                shutil.copytree(hybrid / "cgroup" / hierarchy, cg / hierarchy)


def damage_procfs(hybrid: Path, pids: dict[str, int]) -> None:
    out = FIXTURES / "procfs" / "damaged"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(hybrid, out, symlinks=True)
    stat = out / "proc" / str(pids["burn"]) / "stat"
    stat.write_bytes(stat.read_bytes()[:40])  # a torn read: the line stops mid-field
    vanished = out / "proc" / str(pids["idle"])
    for child in vanished.iterdir():
        child.unlink()  # listed, but every file gone: it exited between listing and reading
    # git keeps no empty directory; a dot file keeps the listed pid without giving it a readable file
    (vanished / ".keep").write_bytes(b"")


def read_polls(trace_dir: Path) -> tuple[bytes, list[dict[str, object]]]:
    (path,) = sorted(trace_dir.glob("*.jsonl.zst"))
    with path.open("rb") as raw:
        text = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
    header, *lines = text.splitlines()
    return header, [orjson.loads(line) for line in lines]


def write_polls(trace_dir: Path, header: bytes, polls: list[dict[str, object]]) -> None:
    if trace_dir.exists():
        shutil.rmtree(trace_dir)
    trace_dir.mkdir(parents=True)
    first = polls[0]["at"]["unix_ms"]  # type: ignore[index]
    body = header + b"\n" + b"".join(orjson.dumps(p) + b"\n" for p in polls)
    compressed = zstandard.ZstdCompressor(level=19).compress(body)
    (trace_dir / f"croft-trace-{first}.jsonl.zst").write_bytes(compressed)


def damage_traces(pids: dict[str, int]) -> None:
    header, polls = read_polls(FIXTURES / "traces" / "live")
    middle = len(polls) // 2

    def edit(name: str, change: object) -> None:
        copy = orjson.loads(orjson.dumps(polls))
        for index, poll in enumerate(copy):
            change(index, poll)  # type: ignore[operator]
        write_polls(FIXTURES / "traces" / name, header, copy)

    def counter_reset(index: int, poll: dict) -> None:  # type: ignore[type-arg]
        if index >= middle:
            for proc in poll["processes"]:
                if proc["tgid"] == pids["burn"]:
                    proc["cpu_ticks"] -= 10_000 if proc["cpu_ticks"] > 10_000 else proc["cpu_ticks"]
                    proc["write_bytes"] = 0

    def pid_reuse(index: int, poll: dict) -> None:  # type: ignore[type-arg]
        if index >= middle:
            for proc in poll["processes"]:
                if proc["tgid"] == pids["alloc"]:
                    proc["start_ticks"] += 1
                    proc["comm"] = "reused"

    def vanished(index: int, poll: dict) -> None:  # type: ignore[type-arg]
        if index == middle:
            poll["processes"] = [p for p in poll["processes"] if p["tgid"] != pids["write"]]
            poll["dropped"] += 1

    edit("counter-reset", counter_reset)
    edit("pid-reuse", pid_reuse)
    edit("vanished-pid", vanished)


def regenerate_golden() -> None:
    golden = FIXTURES / "golden"
    golden.mkdir(parents=True, exist_ok=True)
    for trace in sorted((FIXTURES / "traces").iterdir()):
        out = golden / f"{trace.name}.jsonl"
        out.unlink(missing_ok=True)
        subprocess.run([*CROFT, "run", "--replay", str(trace), "--dataset", str(out)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=16.0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("capture_fixtures.py needs root: it creates cgroups and reads every /proc file")
    pids = record_trace(args.seconds, FIXTURES / "traces" / "live")
    (FIXTURES / "traces" / "live" / "pids.json").write_bytes(orjson.dumps(pids))
    hybrid = FIXTURES / "procfs" / "hybrid"
    (hybrid / "pids.json").write_bytes(orjson.dumps(pids))
    derive_layouts(hybrid)
    damage_procfs(hybrid, pids)
    damage_traces(pids)
    regenerate_golden()
    print("captured", ", ".join(f"{k}={v}" for k, v in pids.items()))


if __name__ == "__main__":
    main()
