"""The dataset (docs/dataset.md): the row and its codec, fast read views, rotation and retention, skip
counts, the stats summary, the container profile, the /dataset HTTP rules, croft collect's transfer
plans and croft export's partitions."""

# What the other rooms of the core use; they import it from here, never from the modules
# (pyproject.toml, the import contract on the core's rooms).
from croft.domain.dataset.http import is_safe_name
from croft.domain.dataset.row import (
    GPU_WORKLOADS,
    WORKLOADS,
    CgroupUsage,
    Ingress,
    Process,
    Row,
    ShortLived,
    SyscallRate,
    Usage,
    Workload,
)

__all__ = [
    "GPU_WORKLOADS",
    "WORKLOADS",
    "CgroupUsage",
    "Ingress",
    "Process",
    "Row",
    "ShortLived",
    "SyscallRate",
    "Usage",
    "Workload",
    "is_safe_name",
]
