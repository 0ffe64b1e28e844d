"""The real `GpuHolderSource`: NVML (nvidia-ml-py's `pynvml`) lists the processes running compute
and graphics work on each GPU, with the GPU memory each uses, and the utilisation samples its
driver took of each since the previous read.

Utilisation comes from `nvmlDeviceGetProcessesUtilizationInfo`, or `nvmlDeviceGetProcessUtilization`
where the driver lacks it; each takes the timestamp of the newest sample seen on that device and
returns the samples after it (`NVML_ERROR_NOT_FOUND`: none, as when nothing ran). A device that
supports neither (MIG mode, older GPUs) gives None, said once.

NVML reports host pids (the driver sees the init pid namespace), the same numbers eBPF reports, so a
containerised process is keyed by its host tgid with no translation; croft must see the host's
/proc (hostPID) for the rest of its row. Without a driver the source says so once, and `read()`
returns `available=False`: GPU detection then rests on ioctls and open device files.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from croft.domain.collector.kernel import GpuHolders, NvmlGpu, UtilizationSample

log = logging.getLogger("croft.nvml")

FALLBACK_NOTE = "GPU detection falls back to GPU ioctls and open device files"
NOT_IN_MIG = 0xFFFFFFFF  # NVML's gpuInstanceId and computeInstanceId outside MIG


class NvmlApi(Protocol):
    """The slice of `pynvml` croft calls; the `pynvml` module itself is one, a recorded trace is
    another (tests/helpers/nvml_fake.py). Errors are `pynvml.NVMLError`."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetProcessesUtilizationInfo(self, handle: Any, timeStamp: int) -> list[Any]: ...
    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[Any]: ...


class NvmlGpuHolders:
    """GPU holders by host tgid, with the bytes of GPU memory each uses summed over GPUs (a process
    NVML lists for both compute and graphics on one GPU counts once there), and per process what
    NVML says of each GPU (or MIG instance) it is on. A device or call that fails is skipped for
    that poll and logged once per device and error."""

    def __init__(self, api: NvmlApi | None = None) -> None:
        import pynvml

        self._error: type[Exception] = pynvml.NVMLError
        self._not_supported: int = pynvml.NVML_ERROR_NOT_SUPPORTED
        self._no_sample: frozenset[int] = frozenset({pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_SUCCESS})
        self._missing: frozenset[int] = frozenset(
            {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
        )
        self._api: NvmlApi = api if api is not None else pynvml
        self._logged: set[tuple[int, str]] = set()
        self._uuids: dict[int, str | None] = {}
        self._since_us: dict[int, int] = {}  # by device: the newest utilisation sample's timestamp
        self._utilization: dict[int, list[str]] = {}  # by device: the utilisation calls left to try
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
        e.g. without the permission to see a process's memory), and the GPUs each is on."""
        if not self.available:
            return GpuHolders(available=False)
        try:
            count = self._api.nvmlDeviceGetCount()
        except self._error as exc:
            self._skip(-1, exc)
            return GpuHolders(available=True)
        memory: dict[int, int] = {}
        gpus: dict[int, list[NvmlGpu]] = {}
        for index in range(count):
            for pid, gpu in self._device(index):
                used = gpu.memory_bytes or 0
                memory[pid] = memory.get(pid, 0) + used
                gpus.setdefault(pid, []).append(gpu)
        return GpuHolders(
            memory_bytes=memory, available=True, gpus={pid: tuple(listed) for pid, listed in gpus.items()}
        )

    def _device(self, index: int) -> list[tuple[int, NvmlGpu]]:
        """The processes on device `index`, one entry per process and MIG instance."""
        try:
            handle = self._api.nvmlDeviceGetHandleByIndex(index)
        except self._error as exc:
            self._skip(index, exc)
            return []
        holders: dict[tuple[int, int | None, int | None], int | None] = {}
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
                key = (
                    int(process.pid),
                    _instance(process, "gpuInstanceId"),
                    _instance(process, "computeInstanceId"),
                )
                used = None if process.usedGpuMemory is None else int(process.usedGpuMemory)
                known = holders.get(key)
                holders[key] = used if known is None else max(known, used or 0)
        if not holders:
            return []
        uuid = self._uuid(index, handle)
        samples = self._samples(index, handle)
        return [
            (
                pid,
                NvmlGpu(
                    index=index,
                    uuid=uuid,
                    memory_bytes=used,
                    gpu_instance_id=gpu_instance,
                    compute_instance_id=compute_instance,
                    samples=None if samples is None else samples.get(pid, ()),
                ),
            )
            for (pid, gpu_instance, compute_instance), used in sorted(
                holders.items(), key=lambda item: (item[0][0], item[0][1] or 0, item[0][2] or 0)
            )
        ]

    def _uuid(self, index: int, handle: Any) -> str | None:
        if index not in self._uuids:
            try:
                self._uuids[index] = str(self._api.nvmlDeviceGetUUID(handle))
            except self._error as exc:
                self._skip(index, exc)
                return None
        return self._uuids[index]

    def _samples(self, index: int, handle: Any) -> dict[int, tuple[UtilizationSample, ...]] | None:
        """The device's utilisation samples since the newest one seen, by pid; None when the
        device gives none (said once) or the call failed this poll."""
        calls = self._utilization.setdefault(
            index, ["nvmlDeviceGetProcessesUtilizationInfo", "nvmlDeviceGetProcessUtilization"]
        )
        since = self._since_us.get(index, 0)
        while calls:
            try:
                answer = getattr(self._api, calls[0])(handle, since)
            except self._error as exc:
                code = getattr(exc, "value", None)
                if code in self._no_sample:
                    return {}
                if code in self._missing:
                    calls.pop(0)
                    if not calls:
                        log.info(
                            "NVML device %d gives no per-process utilisation (%s): rows leave it out",
                            index,
                            exc,
                        )
                    continue
                self._skip(index, exc)
                return None
            by_pid: dict[int, list[UtilizationSample]] = {}
            for raw in answer:
                stamp = int(raw.timeStamp)
                if stamp <= since:
                    continue
                sample = UtilizationSample(
                    timestamp_us=stamp,
                    sm=int(raw.smUtil),
                    memory=int(raw.memUtil),
                    encoder=int(raw.encUtil),
                    decoder=int(raw.decUtil),
                )
                by_pid.setdefault(int(raw.pid), []).append(sample)
                self._since_us[index] = max(self._since_us.get(index, 0), stamp)
            return {pid: tuple(sorted(found, key=lambda s: s.timestamp_us)) for pid, found in by_pid.items()}
        return None

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


def _instance(process: Any, field: str) -> int | None:
    """A MIG instance id of a listed process; None outside MIG (and from older drivers)."""
    value = getattr(process, field, None)
    return None if value is None or int(value) == NOT_IN_MIG else int(value)
