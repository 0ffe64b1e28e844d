"""Per-poll figures of a segment's containers and cgroups, kept beside its summary, so that
`croft profile` answers a window from them instead of reading the segment's rows.

A group is the rows of one (container id, cgroup) pair of a segment. Of each group the summary
keeps its first and last `unix_ms` (over all its rows) and, per poll (node, unix_ms), the figures
`ProfileAccumulator.add` takes from its rows (cgroup CPU cores, memory bytes, throttled fraction,
CPU pressure, holds a GPU), each the maximum over the group's rows of that poll, the tgids of
those rows, and the rows' GPU memory and busy share summed (integers, None where no row measured
them: `croft.domain.dataset.gpus.exact_figures`). A container's or a cgroup's profile is then the
same whether its rows are read or its groups: every figure is finite (the row schema's rule) and
none is -0.0 (`PollGroups.exact`), so a maximum does not depend on the order it is taken in, and
the GPU figures are integers, so neither does a sum. A process's own figures are not kept: a
`--pid` profile reads the rows.

They live in a zstd skippable frame of their own between the segment's data and its summary frame
(`croft.domain.dataset.segments`), so that `croft stats` never reads them:

    magic 0x184D2A5F | frame size | index (JSON) | one body per group (zlib, JSON)

The index is `[[container_id, cgroup, first_ms, last_ms, offset, length, crc32], ...]`, offsets
from the frame's start. A body holds the group's polls in (node, unix_ms) order as columns:
`{"nodes": [...], "sets": [[tgid, ...], ...], "node": [...], "ms": [...], "cpu": [...], "memory":
[...], "throttled": [...], "pressure": [...], "gpu": [...], "set": [...]}`: `node` and `set` index
`nodes` and `sets`, `ms` is the first unix_ms then each one's step from the one before, a
whole-number memory is written as an integer and `gpu` as 0 or 1 (read back as the same floats).
A group with GPU figures in any poll has two columns more, `gpu_memory` (bytes) and `gpu_busy`
(hundredths of a percent), null where a poll has none; a group without, and every group of a
segment summarized before them, has neither.
Columns compress to about 4 % of the segment's size (zlib level 6, about as small as zstd's
level 3 here, and already imported). The summary names the frame's size and the index's size and
CRC-32; the index names each body's CRC-32.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import msgspec

from croft.domain.dataset.gpus import exact_figures
from croft.domain.dataset.workloads import GPU_WORKLOADS

PROFILE_MAGIC = 0x184D2A5F
ZLIB_LEVEL = 6
FIGURES = ("cpu", "memory", "throttled", "pressure", "gpu")
GPU_FIGURES = ("gpu_memory", "gpu_busy")
FRAME_HEADER_BYTES = 8
FILE_NODE = "\x00file-node\x00"  # rows without a node of their own; the file's node when read

Index = list[list[Any]]  # [container_id, cgroup, first_ms, last_ms, offset, length, crc32]


class PollGroups:
    """The groups of a segment's rows read with node `node` (the summary's placeholder): per (container
    id, cgroup), [first ms, last ms, {(node, unix_ms): [cpu, memory, throttled, pressure, gpu, tgids,
    gpu memory, gpu busy]}]."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str | None, str], list[Any]] = {}

    def add(self, node: str, views: Sequence[Any]) -> None:
        """Count a batch of decoded rows; a row that names its node counts there."""
        groups = self.groups
        for view in views:
            process = view.process
            key = (process.container_id, process.cgroup)
            unix_ms = view.unix_ms
            group = groups.get(key)
            if group is None:
                group = groups[key] = [unix_ms, unix_ms, {}]
            elif unix_ms < group[0]:
                group[0] = unix_ms
            elif unix_ms > group[1]:
                group[1] = unix_ms
            cg = view.cgroup_usage
            figures = (
                cg.cpu_cores,
                float(cg.memory_bytes),
                cg.cpu_throttled_fraction,
                cg.cpu_pressure_avg10,
                1.0 if view.workload in GPU_WORKLOADS else 0.0,
            )
            gpu_memory, gpu_busy = exact_figures(view.gpus)
            where = (view.node or node, unix_ms)
            known = group[2].get(where)
            if known is None:
                group[2][where] = [*figures, {view.tgid}, gpu_memory, gpu_busy]
                continue
            for at in range(5):
                known[at] = max(known[at], figures[at])
            known[5].add(view.tgid)
            for at, value in ((6, gpu_memory), (7, gpu_busy)):
                if value is not None:
                    known[at] = value if known[at] is None else known[at] + value

    def exact(self) -> bool:
        """Whether every figure is finite and none is -0.0 (whose maximum with 0.0 depends on the
        order): only then are the groups written."""
        return all(
            math.isfinite(value) and math.copysign(1.0, value) > 0
            for _, _, polls in self.groups.values()
            for figures in polls.values()
            for value in figures[:5]
        )


def encode_frame(groups: PollGroups) -> tuple[bytes, list[int]]:
    """The skippable frame of `groups`, and what the summary says of it: [frame bytes, index bytes,
    index CRC-32]."""
    bodies: list[bytes] = []
    entries: list[list[Any]] = []
    for (container_id, cgroup), (first_ms, last_ms, polls) in sorted(
        groups.groups.items(), key=lambda item: (item[0][0] or "", item[0][0] is None, item[0][1])
    ):
        body = zlib.compress(msgspec.json.encode(_columns(polls)), ZLIB_LEVEL)
        bodies.append(body)
        entries.append([container_id, cgroup, first_ms, last_ms, 0, len(body), zlib.crc32(body)])
    index = msgspec.json.encode(entries)
    # Offsets depend on the index's length, which the offsets' digits change: settle it.
    while True:
        offset = FRAME_HEADER_BYTES + len(index)
        for entry, body in zip(entries, bodies, strict=True):
            entry[4] = offset
            offset += len(body)
        again = msgspec.json.encode(entries)
        if len(again) == len(index):
            index = again
            break
        index = again
    payload = index + b"".join(bodies)
    frame = PROFILE_MAGIC.to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload
    return frame, [len(frame), len(index), zlib.crc32(index)]


def _columns(polls: dict[tuple[str, int], list[Any]]) -> dict[str, list[Any]]:
    nodes = sorted({node for node, _ in polls})
    node_at = {node: at for at, node in enumerate(nodes)}
    sets: dict[tuple[int, ...], int] = {}
    columns: dict[str, list[Any]] = {name: [] for name in ("node", "ms", *FIGURES, "set", *GPU_FIGURES)}
    last_ms = 0
    for (node, unix_ms), figures in sorted(polls.items()):
        columns["node"].append(node_at[node])
        columns["ms"].append(unix_ms - last_ms)
        last_ms = unix_ms
        cpu, memory, throttled, pressure, gpu, tgids, gpu_memory, gpu_busy = figures
        columns["cpu"].append(cpu)
        columns["memory"].append(int(memory) if memory.is_integer() else memory)
        columns["throttled"].append(throttled)
        columns["pressure"].append(pressure)
        columns["gpu"].append(int(gpu))
        columns["set"].append(sets.setdefault(tuple(sorted(tgids)), len(sets)))
        columns["gpu_memory"].append(gpu_memory)
        columns["gpu_busy"].append(gpu_busy)
    if all(value is None for name in GPU_FIGURES for value in columns[name]):
        for name in GPU_FIGURES:
            del columns[name]
    return {"nodes": nodes, "sets": [list(s) for s in sets], **columns}


def polls_of(
    body: dict[str, Any],
) -> list[tuple[int, int, float, float, float, float, float, int, int | None, int | None]]:
    """A body's polls: (node, unix_ms, cpu_cores, memory_bytes, throttled, pressure, gpu, set,
    gpu memory, gpu busy), the figures as the floats they were, the GPU ones as their integers
    (None: not measured, or a body without them)."""
    times: list[int] = []
    unix_ms = 0
    for step in body["ms"]:
        unix_ms += step
        times.append(unix_ms)
    return list(
        zip(
            body["node"],
            times,
            map(float, body["cpu"]),
            map(float, body["memory"]),
            map(float, body["throttled"]),
            map(float, body["pressure"]),
            map(float, body["gpu"]),
            body["set"],
            body.get("gpu_memory", [None] * len(times)),
            body.get("gpu_busy", [None] * len(times)),
            strict=True,
        )
    )


def decode_index(raw: bytes, crc32: int, frame_bytes: int) -> Index | None:
    """The index in `raw` (the frame's bytes after its header, as long as the summary says), or None
    when it is not the one the summary names."""
    if zlib.crc32(raw) != crc32:
        return None
    try:
        index = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(index, list):
        return None
    for entry in index:
        if not (isinstance(entry, list) and len(entry) == 7 and entry[4] + entry[5] <= frame_bytes):
            return None
    return index


def decode_body(raw: bytes, crc32: int) -> dict[str, Any] | None:
    """A group's body (`polls_of` reads its polls), or None when `raw` is not the body the index
    names."""
    if zlib.crc32(raw) != crc32:
        return None
    try:
        body = msgspec.json.decode(zlib.decompress(raw))
    except (zlib.error, msgspec.DecodeError):
        return None
    return body if isinstance(body, dict) else None


def wanted(
    index: Index, kind: str, value: str, from_ms: int | None, to_ms: int | None
) -> tuple[list[list[Any]], list[list[Any]]]:
    """The groups of the subject (`kind` "container": ids starting with `value`; "cgroup": exactly
    that cgroup) whose rows reach into the window, and those whose rows all lie outside it."""
    inside: list[list[Any]] = []
    outside: list[list[Any]] = []
    for entry in index:
        container_id, cgroup, first_ms, last_ms = entry[:4]
        if kind == "container":
            if container_id is None or not container_id.startswith(value):
                continue
        elif cgroup != value:
            continue
        apart = (from_ms is not None and last_ms < from_ms) or (to_ms is not None and first_ms > to_ms)
        (outside if apart else inside).append(entry)
    return inside, outside
