"""Partial views of a dataset row, for readers that decode millions of lines.

`croft.domain.dataset.codec` owns the row's JSON shape; these msgspec Structs only *read* it. Each view
declares the fields one reader needs, with the codec's types, and msgspec skips every other key
without building Python objects for it. A line that lacks a declared field, or has one of the
wrong type, fails the view exactly as it would fail the codec (tests check the two agree).
"""

from __future__ import annotations

from typing import Literal

import msgspec

WorkloadView = Literal["gpu-onset", "gpu-held", "no-gpu"]


class ProcessIds(msgspec.Struct, gc=False, frozen=True):
    """Hashable, so that a set of them holds the distinct (container, framework) pairs."""

    container_id: str | None
    framework: str | None = None


class SyscallView(msgspec.Struct, gc=False):
    name: str
    rate_per_sec: float


class StatsView(msgspec.Struct, gc=False):
    """What `croft stats --json` reads of a row."""

    unix_ms: int
    tgid: int
    process: ProcessIds
    workload: WorkloadView


class StatsSyscallsView(msgspec.Struct, gc=False):
    """What `croft stats` reads of a row for its human summary: the busiest syscalls too."""

    unix_ms: int
    tgid: int
    process: ProcessIds
    workload: WorkloadView
    syscalls: list[SyscallView]


class ContainerOnly(msgspec.Struct, gc=False):
    container_id: str | None


class CgroupView(msgspec.Struct, gc=False):
    cpu_cores: float
    cpu_throttled_fraction: float
    memory_bytes: int
    cpu_pressure_avg10: float


class ProfileView(msgspec.Struct, gc=False):
    """What `croft profile` reads of a row."""

    unix_ms: int
    tgid: int
    process: ContainerOnly
    workload: WorkloadView
    cgroup_usage: CgroupView


STATS_DECODER = msgspec.json.Decoder(StatsView)
STATS_SYSCALLS_DECODER = msgspec.json.Decoder(StatsSyscallsView)
PROFILE_DECODER = msgspec.json.Decoder(ProfileView)
