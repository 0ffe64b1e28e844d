"""The dataset (docs/dataset.md): the row and its codec, fast read views, rotation and retention, skip
counts, the stats summary, the container profile, the /dataset HTTP rules, croft collect's transfer
plans and croft export's partitions."""

# What the other rooms of the core use; they import it from here, never from the modules
# (pyproject.toml, the import contract on the core's rooms). Each is imported when first asked for:
# `croft collect` imports croft.domain.dataset.http, which must not cost it the row's classes.
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from croft.domain.dataset.gpus import (
        NVML_ENGINES,
        engine_percents,
        gpu_busy_percent,
        gpu_label,
        gpu_memory_bytes,
        gpu_percent,
    )
    from croft.domain.dataset.http import is_safe_name
    from croft.domain.dataset.row import (
        CMDLINE_CHARS,
        GPU_WORKLOADS,
        WORKLOADS,
        CgroupUsage,
        GpuEngine,
        GpuUse,
        Ingress,
        Pod,
        Process,
        Row,
        ShortLived,
        SyscallRate,
        Usage,
        Workload,
    )

__all__ = [
    "CMDLINE_CHARS",
    "GPU_WORKLOADS",
    "NVML_ENGINES",
    "WORKLOADS",
    "CgroupUsage",
    "GpuEngine",
    "GpuUse",
    "Ingress",
    "Pod",
    "Process",
    "Row",
    "ShortLived",
    "SyscallRate",
    "Usage",
    "Workload",
    "engine_percents",
    "gpu_busy_percent",
    "gpu_label",
    "gpu_memory_bytes",
    "gpu_percent",
    "is_safe_name",
]
# The module a name comes from, where it is not the row's (croft.domain.dataset.row).
_HOMES = {"is_safe_name": "croft.domain.dataset.http"} | dict.fromkeys(
    ("NVML_ENGINES", "engine_percents", "gpu_busy_percent", "gpu_label", "gpu_memory_bytes", "gpu_percent"),
    "croft.domain.dataset.gpus",
)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES.get(name, "croft.domain.dataset.row")), name)
    globals()[name] = value
    return value
