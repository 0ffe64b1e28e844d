#!/usr/bin/env python3
"""Record what NVML answers on this host, for tests/helpers/nvml_fake.py to replay (fixtures/nvml/).

    .venv/bin/python scripts/record_nvml.py fixtures/nvml/<name>.json

Records the calls croft's NvmlGpuHolders makes, in pynvml's own shapes: each call is
{"result": ...} or {"error": <NVML_ERROR_* code>, "error_name": "..."}; a process is the dict of
pynvml's nvmlFriendlyObject (pid, usedGpuMemory -- null where NVML cannot tell --, gpuInstanceId,
computeInstanceId). `host_proc` notes, for each pid NVML listed, the comm and the NSpid line of
/proc/<pid>/status, which shows the pid is the host's even for a process in a container.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml


def answer(call: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"result": call()}
    except pynvml.NVMLError as exc:
        return {"error": exc.value, "error_name": str(exc)}


def processes(call: Callable[[], list[Any]]) -> dict[str, Any]:
    got = answer(call)
    if "result" in got:
        got["result"] = [
            {
                "pid": p.pid,
                "usedGpuMemory": p.usedGpuMemory,
                "gpuInstanceId": p.gpuInstanceId,
                "computeInstanceId": p.computeInstanceId,
            }
            for p in got["result"]
        ]
    return got


def host_proc(pid: int) -> dict[str, Any]:
    base = Path("/proc") / str(pid)
    try:
        comm = (base / "comm").read_text().strip()
        status = (base / "status").read_text().splitlines()
    except OSError:
        return {"gone": True}
    nspid = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
    return {"comm": comm, "nspid": [int(n) for n in nspid]}


def record() -> dict[str, Any]:
    recording: dict[str, Any] = {
        "provenance": f"recorded by scripts/record_nvml.py with nvidia-ml-py {version('nvidia-ml-py')}",
        "init": answer(pynvml.nvmlInit),
    }
    if "error" in recording["init"]:
        return recording
    recording["driver_version"] = answer(pynvml.nvmlSystemGetDriverVersion)
    count = answer(pynvml.nvmlDeviceGetCount)
    recording["device_count"] = count
    devices = []
    for index in range(count.get("result", 0)):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        devices.append(
            {
                "index": index,
                "name": answer(lambda h=handle: pynvml.nvmlDeviceGetName(h)).get("result"),
                "uuid": answer(lambda h=handle: pynvml.nvmlDeviceGetUUID(h)).get("result"),
                "compute_processes": processes(
                    lambda h=handle: pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                ),
                "graphics_processes": processes(
                    lambda h=handle: pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
                ),
            }
        )
    recording["devices"] = devices
    pids = {
        p["pid"]
        for d in devices
        for calls in (d["compute_processes"], d["graphics_processes"])
        for p in calls.get("result", [])
    }
    recording["host_proc"] = {str(pid): host_proc(pid) for pid in sorted(pids)}
    pynvml.nvmlShutdown()
    return recording


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    Path(sys.argv[1]).write_text(json.dumps(record(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
