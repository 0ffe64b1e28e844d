"""A fake NVML behind croft's `NvmlApi` port, answering from a recording in fixtures/nvml/ (the format
of scripts/record_nvml.py). It records which calls it was asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"


class RecordedNvml:
    def __init__(self, recording: dict[str, Any]) -> None:
        self._recording = recording
        self.calls: list[str] = []

    @classmethod
    def named(cls, name: str) -> RecordedNvml:
        return cls(json.loads((FIXTURES / f"{name}.json").read_text()))

    def _answer(self, call: str, recorded: dict[str, Any]) -> Any:
        self.calls.append(call)
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

    def nvmlDeviceGetComputeRunningProcesses(self, handle: dict[str, Any]) -> list[Any]:
        return self._processes("compute_processes", handle)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: dict[str, Any]) -> list[Any]:
        return self._processes("graphics_processes", handle)

    def _processes(self, listing: str, handle: dict[str, Any]) -> list[Any]:
        answer = self._answer(f"{listing}({handle['index']})", handle[listing])
        return [pynvml.nvmlFriendlyObject(process) for process in answer]
