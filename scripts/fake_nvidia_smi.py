#!/usr/bin/env python3
"""A stand-in for nvidia-smi in `scripts/record_gpu.sh dry-run` (a machine without a GPU): it answers
the three commands the script runs, in the driver's formats as its manual describes them (not
recorded output), naming as the GPU's process the workload the dry run starts
(scripts/gpu_workload.py, found in /proc). Its figures are made up: the dry run tests the script's
steps, not croft's agreement with NVIDIA's tool.

    nvidia-smi -L
    nvidia-smi pmon -s um -o DT -d 1
    nvidia-smi --query-compute-apps=timestamp,pid,used_memory,gpu_uuid --format=csv,noheader,nounits -l 1
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

UUID = "GPU-00000000-0000-0000-0000-000000000000"


def workload() -> int | None:
    """The pid of the Python process running scripts/gpu_workload.py (not the `timeout` above it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                comm = (entry / "comm").read_text()
            except OSError:
                continue
            if comm.startswith("python") and any(arg.endswith(b"gpu_workload.py") for arg in argv):
                return int(entry.name)
    return None


def main(argv: list[str]) -> int:
    if argv == ["-L"]:
        print(f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {UUID})")
        return 0
    if argv[:1] == ["pmon"]:
        print(
            "#Date       Time        gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   command"
        )
        print(
            "#YYYYMMDD   HH:MM:SS    Idx           #    C/G      %      %      %      %      %      %     MB   name"
        )
        while True:
            now = dt.datetime.now(dt.UTC)
            pid = workload()
            day, second = now.strftime("%Y%m%d"), now.strftime("%H:%M:%S")
            if pid is None:
                print(
                    f" {day}   {second}      0           -      -      -      -      -      -      -      -      -   -"
                )
            else:
                print(
                    f" {day}   {second}      0  {pid:>10}      C     97     40      -      -      -      -   2581   python3"
                )
            sys.stdout.flush()
            time.sleep(1)
    if argv[:1] and argv[0].startswith("--query-compute-apps"):
        while True:
            pid = workload()
            if pid is not None:
                stamp = dt.datetime.now(dt.UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
                print(f"{stamp}, {pid}, 2581, {UUID}", flush=True)
            time.sleep(1)
    print(f"fake nvidia-smi: {' '.join(argv)} is not one the dry run asks", file=sys.stderr)
    return 9


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
