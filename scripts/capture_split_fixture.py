"""Capture fixtures/procfs/split/ on a hybrid host (root): two processes whose v1 and v2 cgroup
paths differ, and the cgroup files of every path they sit at.

    sudo .venv/bin/python scripts/capture_split_fixture.py

Burner A sits in v2 /croft-split and v1 cpu,cpuacct /croft-split-v1; burner B in v2 / (where this
script sits) and v1 cpu,cpuacct /croft-split-v1. Their other v1 controllers stay where this script
sits. The tree holds their /proc files (as scripts/capture_fixtures.py copies them) and, for every
hierarchy croft reads, the cgroup files of each path they sit at; pids.json names them.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.capture_fixtures import capture_procfs_files  # noqa: E402
from tests.helpers.workload import BURN, SplitCgroups  # noqa: E402

OUT = REPO / "fixtures" / "procfs" / "split"
FILES = {
    "unified": ("cgroup.controllers", "cpu.stat", "cpu.pressure", "memory.pressure", "io.pressure"),
    "cpu": ("cgroup.procs", "cpu.stat"),
    "cpuacct": ("cgroup.procs", "cpuacct.usage"),
    "memory": ("cgroup.procs", "memory.usage_in_bytes", "memory.oom_control"),
}


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("capture_split_fixture.py needs root: it creates cgroups")
    if OUT.exists():
        shutil.rmtree(OUT)
    with SplitCgroups("croft-split", "croft-split-v1") as groups:
        pids = {"a": groups.spawn(BURN, in_v2=True).pid, "b": groups.spawn(BURN, in_v2=False).pid}
        time.sleep(3)
        capture_procfs_files(pids, OUT)
        paths: dict[str, set[str]] = {h: {""} for h in FILES}
        for pid in pids.values():
            for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                _, names, path = line.split(":", 2)
                for name in names.split(",") if names else ["unified"]:
                    if name in paths:
                        paths[name].add(path.rstrip("/"))
        for hierarchy, names in FILES.items():
            for sub in paths[hierarchy]:
                for name in names:
                    src = Path("/sys/fs/cgroup") / hierarchy / sub.lstrip("/") / name
                    if src.exists():
                        dst = OUT / "cgroup" / hierarchy / sub.lstrip("/") / name
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        dst.write_bytes(b"" if name == "cgroup.procs" else src.read_bytes())
    (OUT / "pids.json").write_bytes(orjson.dumps(pids))
    print("captured", pids)


if __name__ == "__main__":
    main()
