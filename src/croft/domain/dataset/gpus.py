"""The figures readers take from a row's `gpus` (`croft.domain.dataset.row.GpuUse`): one busy
percentage per GPU, the engines' percentages by name, a GPU's label, and a process's sums over its
GPUs. One place for croft top, croft profile and /metrics, so that they agree.

Every function takes what the row holds (a `GpuUse`, or a row's `gpus`) by attribute, so readers
that decode rows into other views may use them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NVML_ENGINES = (
    ("sm", "sm_percent"),
    ("memory_bandwidth", "memory_bandwidth_percent"),
    ("encoder", "encoder_percent"),
    ("decoder", "decoder_percent"),
)
"""The `engine` names of NVML's utilisation figures, with the `GpuUse` field each comes from."""


def gpu_percent(use: Any) -> float | None:
    """How busy the process kept the GPU, 0..100: NVML's SM utilisation, or the busiest of the
    engines DRM counts (None where neither was measured)."""
    if use.sm_percent is not None:
        return float(use.sm_percent)
    if use.engines:
        return float(max(engine.busy_percent for engine in use.engines))
    return None


def engine_percents(use: Any) -> tuple[tuple[str, float], ...]:
    """(engine, percent busy) of every engine measured: NVML's four figures by `NVML_ENGINES`'
    names, DRM's engines by the driver's."""
    measured = [(name, getattr(use, field)) for name, field in NVML_ENGINES]
    out = [(name, float(value)) for name, value in measured if value is not None]
    out.extend((engine.name, float(engine.busy_percent)) for engine in use.engines or ())
    return tuple(out)


def gpu_label(use: Any) -> str:
    """The GPU a use is of, as /metrics' `gpu` label names it: NVML's device index (the `gpu`
    label of dcgm-exporter), `index/gpu_instance/compute_instance` inside MIG; a DRM device's PCI
    address, else `card<index>`."""
    if use.uuid is not None or use.driver is None:
        if use.gpu_instance_id is not None:
            return f"{use.index}/{use.gpu_instance_id}/{use.compute_instance_id}"
        return str(use.index)
    return str(use.pci) if use.pci else f"card{use.index}"


def gpu_memory_bytes(gpus: Iterable[Any] | None) -> int | None:
    """The GPU memory a process holds over all its GPUs; None when no GPU said."""
    known = [use.memory_bytes for use in gpus or () if use.memory_bytes is not None]
    return sum(known) if known else None


def gpu_busy_percent(gpus: Iterable[Any] | None) -> float | None:
    """The process's `gpu_percent` summed over its GPUs (200: two GPUs kept busy, as top counts
    CPU cores); None when no GPU's was measured."""
    known = [p for p in (gpu_percent(use) for use in gpus or ()) if p is not None]
    return sum(known) if known else None


def exact_figures(gpus: Iterable[Any] | None) -> tuple[int | None, int | None]:
    """A process's GPU memory (bytes) and `gpu_busy_percent` in hundredths of a percent, as
    integers, so that sums over many rows do not depend on their order (croft profile's figures,
    `croft.domain.dataset.poll_groups`); None where none of its GPUs measured it."""
    uses = list(gpus or ())
    busy = [p for p in (gpu_percent(use) for use in uses) if p is not None]
    return gpu_memory_bytes(uses), (sum(round(p * 100) for p in busy) if busy else None)
