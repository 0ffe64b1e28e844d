"""What each process used of each GPU in a poll, the rows' `gpus` (pure): NVML's answers for
NVIDIA GPUs (`croft.domain.collector.kernel.NvmlGpu`), the kernel's DRM counters for the rest
(`croft.domain.collector.drm`).

NVML hands over, per process and GPU, the utilisation samples its driver took since the previous
poll; their mean is the process's utilisation over the poll. The driver keeps a sample only for a
period in which the process used the GPU, so none at all means it did not (0), while a device
that gives no per-process utilisation (MIG mode, older GPUs) gives None, left out of the row.
"""

from __future__ import annotations

from collections.abc import Mapping

from croft.domain.collector.drm import PERCENT_DIGITS, drm_uses, owned
from croft.domain.collector.kernel import NvmlGpu
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset import GpuUse


def nvml_use(gpu: NvmlGpu) -> GpuUse:
    """The row's `GpuUse` of one NVML listing: its memory and its samples' mean utilisation."""
    samples = gpu.samples
    if samples is None:
        sm = memory = encoder = decoder = None
    elif not samples:
        sm = memory = encoder = decoder = 0.0
    else:
        count = len(samples)
        sm = round(sum(s.sm for s in samples) / count, PERCENT_DIGITS)
        memory = round(sum(s.memory for s in samples) / count, PERCENT_DIGITS)
        encoder = round(sum(s.encoder for s in samples) / count, PERCENT_DIGITS)
        decoder = round(sum(s.decoder for s in samples) / count, PERCENT_DIGITS)
    return GpuUse(
        index=gpu.index,
        uuid=gpu.uuid,
        gpu_instance_id=gpu.gpu_instance_id,
        compute_instance_id=gpu.compute_instance_id,
        memory_bytes=gpu.memory_bytes,
        sm_percent=sm,
        memory_bandwidth_percent=memory,
        encoder_percent=encoder,
        decoder_percent=decoder,
    )


def gpu_uses(previous: Poll | None, current: Poll, interval_ns: int) -> Mapping[int, tuple[GpuUse, ...]]:
    """By tgid, the GPUs each process of `current` used: NVML's listings (in NVML's order), then
    the DRM devices it holds clients of (the engines' shares over `interval_ns` since `previous`)."""
    out: dict[int, tuple[GpuUse, ...]] = {
        tgid: tuple(nvml_use(gpu) for gpu in gpus) for tgid, gpus in current.gpu.gpus.items() if gpus
    }
    if current.drm:
        now = owned(current.drm)
        before = owned(previous.drm) if previous is not None and previous.drm else {}
        for tgid in sorted({owner for owner, _ in now.values()}):
            out[tgid] = (*out.get(tgid, ()), *drm_uses(tgid, now, before, interval_ns))
    return out
