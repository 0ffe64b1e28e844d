"""The real `GpuHolderSource`: NVML (nvidia-ml-py's `pynvml`) lists the processes running compute
and graphics work on each GPU, with the GPU memory each uses.

NVML reports host pids (the driver sees the init pid namespace), the same numbers eBPF reports, so a
containerised process is keyed by its host tgid with no translation; croft must see the host's
/proc (hostPID) for the rest of its row. Without a driver the source says so once, and `read()`
returns `available=False`: GPU detection then rests on ioctls and open device files.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from croft.domain.collector.kernel import GpuHolders

log = logging.getLogger("croft.nvml")

FALLBACK_NOTE = "GPU detection falls back to GPU ioctls and open device files"


class NvmlApi(Protocol):
    """The slice of `pynvml` croft calls; the `pynvml` module itself is one, a recorded trace is
    another (tests/helpers/nvml_fake.py). Errors are `pynvml.NVMLError`."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]: ...


class NvmlGpuHolders:
    """GPU holders by host tgid, with the bytes of GPU memory each uses summed over GPUs (a process
    NVML lists for both compute and graphics on one GPU counts once there). A device or call that
    fails is skipped for that poll and logged once per device and error."""

    def __init__(self, api: NvmlApi | None = None) -> None:
        import pynvml

        self._error: type[Exception] = pynvml.NVMLError
        self._not_supported: int = pynvml.NVML_ERROR_NOT_SUPPORTED
        self._api: NvmlApi = api if api is not None else pynvml
        self._logged: set[tuple[int, str]] = set()
        self.skipped = 0
        try:
            self._api.nvmlInit()
        except self._error as exc:
            log.info("NVML unavailable (%s): %s", exc, FALLBACK_NOTE)
            self.available = False
        else:
            self.available = True

    def read(self) -> GpuHolders:
        """This moment's holders: host tgid -> used GPU memory in bytes (0 where NVML cannot tell,
        e.g. without the permission to see a process's memory)."""
        if not self.available:
            return GpuHolders(available=False)
        try:
            count = self._api.nvmlDeviceGetCount()
        except self._error as exc:
            self._skip(-1, exc)
            return GpuHolders(available=True)
        memory: dict[int, int] = {}
        for index in range(count):
            for pid, used in self._device_holders(index).items():
                memory[pid] = memory.get(pid, 0) + used
        return GpuHolders(memory_bytes=memory, available=True)

    def _device_holders(self, index: int) -> dict[int, int]:
        try:
            handle = self._api.nvmlDeviceGetHandleByIndex(index)
        except self._error as exc:
            self._skip(index, exc)
            return {}
        holders: dict[int, int] = {}
        for listing in (
            self._api.nvmlDeviceGetComputeRunningProcesses,
            self._api.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            try:
                processes = listing(handle)
            except self._error as exc:
                if getattr(exc, "value", None) != self._not_supported:  # no graphics on many cards
                    self._skip(index, exc)
                continue
            for process in processes:
                used = process.usedGpuMemory if process.usedGpuMemory is not None else 0
                holders[int(process.pid)] = max(holders.get(int(process.pid), 0), int(used))
        return holders

    def _skip(self, index: int, exc: Exception) -> None:
        self.skipped += 1
        key = (index, str(exc))
        if key not in self._logged:
            self._logged.add(key)
            where = "NVML" if index < 0 else f"NVML device {index}"
            log.warning("%s: %s; skipped this poll (said once)", where, exc)

    def close(self) -> None:
        if self.available:
            self._api.nvmlShutdown()
            self.available = False
