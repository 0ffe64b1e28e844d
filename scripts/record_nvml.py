#!/usr/bin/env python3
"""Record what NVML answers on this host, for tests/helpers/nvml_fake.py to replay (fixtures/nvml/).

    .venv/bin/python scripts/record_nvml.py fixtures/nvml/<name>.json [--polls N] [--interval S]

Records the calls croft's NvmlGpuHolders makes, in pynvml's own shapes, `--polls` times `--interval`
seconds apart: each call is {"result": ...} or {"error": <NVML_ERROR_* code>, "error_name": "..."};
with more than one poll, a device's per-poll calls hold a list of those, one per poll, as the fake
replays them. A process is the dict of pynvml's nvmlFriendlyObject (pid, usedGpuMemory -- null
where NVML cannot tell --, gpuInstanceId, computeInstanceId); a utilisation sample the fields of
pynvml's structure (pid, timeStamp, smUtil, memUtil, encUtil, decUtil, and jpgUtil, ofaUtil from
nvmlDeviceGetProcessesUtilizationInfo), each answer with the `since` timestamp it was asked with
(the newest sample seen before on that device, as croft asks). `host_proc` notes, for each pid
NVML listed, the comm and the NSpid line of /proc/<pid>/status, which shows the pid is the host's
even for a process in a container.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pynvml

UTILIZATION_CALLS = {
    "processes_utilization_info": "nvmlDeviceGetProcessesUtilizationInfo",
    "process_utilization": "nvmlDeviceGetProcessUtilization",
}


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


def samples(call: Callable[[], list[Any]], since: int) -> dict[str, Any]:
    got = answer(call)
    if "result" in got:
        got["result"] = [
            {name: getattr(s, name) for name, _ in s._fields_} if hasattr(s, "_fields_") else dict(vars(s))
            for s in got["result"]
        ]
    got["since"] = since
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


def record(polls: int = 1, interval_s: float = 2.0) -> dict[str, Any]:
    """What NVML answers, `polls` times `interval_s` apart (the module's `pynvml`: the real one, or
    a stand-in in tests)."""
    recording: dict[str, Any] = {
        "provenance": f"recorded by scripts/record_nvml.py with nvidia-ml-py {version('nvidia-ml-py')}"
        f" on {Path('/proc/sys/kernel/hostname').read_text().strip()}, {polls} poll(s) {interval_s} s apart",
        "init": answer(pynvml.nvmlInit),
    }
    if "error" in recording["init"]:
        return recording
    recording["driver_version"] = answer(pynvml.nvmlSystemGetDriverVersion)
    count = answer(pynvml.nvmlDeviceGetCount)
    recording["device_count"] = count
    devices: list[dict[str, Any]] = []
    for index in range(count.get("result", 0)):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        devices.append(
            {
                "index": index,
                "name": answer(lambda h=handle: pynvml.nvmlDeviceGetName(h)).get("result"),
                "uuid": answer(lambda h=handle: pynvml.nvmlDeviceGetUUID(h)).get("result"),
                "compute_processes": [],
                "graphics_processes": [],
                **{key: [] for key in UTILIZATION_CALLS},
            }
        )
    since = dict.fromkeys(range(len(devices)), 0)
    for poll in range(polls):
        if poll:
            time.sleep(interval_s)
        for device in devices:
            index = device["index"]
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            device["compute_processes"].append(
                processes(lambda h=handle: pynvml.nvmlDeviceGetComputeRunningProcesses(h))
            )
            device["graphics_processes"].append(
                processes(lambda h=handle: pynvml.nvmlDeviceGetGraphicsRunningProcesses(h))
            )
            newest = since[index]
            for key, name in UTILIZATION_CALLS.items():
                call = getattr(pynvml, name)
                got = samples(lambda h=handle, c=call, t=since[index]: c(h, t), since[index])
                device[key].append(got)
                newest = max([newest, *(s["timeStamp"] for s in got.get("result", []))])
            since[index] = newest
    if polls == 1:  # one answer per call, as the hand-made recordings hold them
        for device in devices:
            for key in ("compute_processes", "graphics_processes", *UTILIZATION_CALLS):
                device[key] = device[key][0]
    recording["devices"] = devices
    pids = {
        p["pid"]
        for d in devices
        for key in ("compute_processes", "graphics_processes")
        for calls in (d[key] if isinstance(d[key], list) else [d[key]])
        for p in calls.get("result", [])
    }
    recording["host_proc"] = {str(pid): host_proc(pid) for pid in sorted(pids)}
    pynvml.nvmlShutdown()
    return recording


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--polls", type=int, default=1)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    if args.polls < 1 or args.interval < 0:
        parser.error("--polls takes 1 or more, --interval 0 or more seconds")
    args.out.write_text(json.dumps(record(args.polls, args.interval), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
