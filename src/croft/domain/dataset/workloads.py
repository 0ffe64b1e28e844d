"""The workloads a row names, apart from the row's attrs classes (`croft.domain.dataset.row`), so
that croft stats and croft profile, which count them, start without building those classes."""

from __future__ import annotations

from typing import Literal

Workload = Literal["gpu-onset", "gpu-held", "no-gpu"]
WORKLOADS: tuple[Workload, ...] = ("gpu-onset", "gpu-held", "no-gpu")
GPU_WORKLOADS: frozenset[str] = frozenset({"gpu-onset", "gpu-held"})
