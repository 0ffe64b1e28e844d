"""A fake NVML behind croft's `NvmlApi` port, answering from a recording in fixtures/nvml/ (the format
of scripts/record_nvml.py). It records which calls it was asked, with their arguments.

A call's recorded entry is one answer, `{"result": ...}` or `{"error": <NVML_ERROR_* code>}`, or a
list of them: one per call in order, the last repeated (the answers of successive polls). A device
without an entry for a utilisation call answers NVML_ERROR_FUNCTION_NOT_FOUND, as a driver without
that function does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
UTILIZATION_CALLS = ("processes_utilization_info", "process_utilization")


class RecordedNvml:
    def __init__(self, recording: dict[str, Any]) -> None:
        self._recording = recording
        self._asked: dict[str, int] = {}
        self.calls: list[str] = []

    @classmethod
    def named(cls, name: str) -> RecordedNvml:
        return cls(json.loads((FIXTURES / f"{name}.json").read_text()))

    def _answer(self, call: str, recorded: dict[str, Any] | list[dict[str, Any]], shown: str = "") -> Any:
        """The answer to `call` (a name that counts its answers, listed as `shown` when given)."""
        self.calls.append(shown or call)
        if isinstance(recorded, list):
            asked = self._asked.get(call, 0)
            self._asked[call] = asked + 1
            recorded = recorded[min(asked, len(recorded) - 1)]
        if "error" in recorded:
            raise pynvml.NVMLError(recorded["error"])
        return recorded["result"]

    def nvmlInit(self) -> None:
        self._answer("nvmlInit", self._recording["init"])

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        return int(self._answer("nvmlDeviceGetCount", self._recording["device_count"]))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        self.calls.append(f"nvmlDeviceGetHandleByIndex({index})")
        return dict(self._recording["devices"][index])

    def nvmlDeviceGetUUID(self, handle: dict[str, Any]) -> str:
        self.calls.append(f"nvmlDeviceGetUUID({handle['index']})")
        if handle.get("uuid") is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return str(handle["uuid"])

    def nvmlDeviceGetComputeRunningProcesses(self, handle: dict[str, Any]) -> list[Any]:
        return self._processes("compute_processes", handle)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: dict[str, Any]) -> list[Any]:
        return self._processes("graphics_processes", handle)

    def nvmlDeviceGetProcessesUtilizationInfo(self, handle: dict[str, Any], timeStamp: int) -> list[Any]:
        return self._utilization("processes_utilization_info", handle, timeStamp)

    def nvmlDeviceGetProcessUtilization(self, handle: dict[str, Any], timeStamp: int) -> list[Any]:
        return self._utilization("process_utilization", handle, timeStamp)

    def _processes(self, listing: str, handle: dict[str, Any]) -> list[Any]:
        answer = self._answer(f"{listing}({handle['index']})", handle[listing])
        return [pynvml.nvmlFriendlyObject(process) for process in answer]

    def _utilization(self, call: str, handle: dict[str, Any], since_us: int) -> list[Any]:
        recorded = handle.get(call, {"error": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
        # successive polls' answers are taken in order per device: the call's name carries the index
        index = handle["index"]
        answer = self._answer(f"{call}({index})", recorded, f"{call}({index}, since={since_us})")
        return [pynvml.nvmlFriendlyObject(sample) for sample in answer]
