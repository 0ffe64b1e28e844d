"""The merged summaries of each dataset directory's trusted segments (`croft.domain.dataset.merged`),
remembered beside the summaries' remembered checks, so that a question about a dataset whose
segments have not changed reads one small file per directory instead of every segment's summary.

The rule is the remembered checks' (`croft.adapters.dataset.summaries.CheckMemory`): a segment
enters a directory's merged state only after its summary was trusted (its size and CRC-32 matched
the segment's bytes), and only while the segment's device, inode, size, mtime and ctime are what
they were then; any write to it gives it a new ctime, which no one can set back, and a segment
last changed within `CheckMemory.RACY_NS` of the check is never merged. A merged state is used
only when every segment it holds is in the directory now with those very facts: otherwise
(a segment changed, deleted by retention, replaced) it is ignored, every segment's summary is
loaded and checked as before, and a new merged state written. Segments it does not hold (a new
segment) are loaded one by one, and added to it.

One file per directory and node, `merged-summaries/<dev>-<ino>-<crc of node>` under the
remembered checks' folder: a JSON header line (the node, each segment's name, facts and skipped
lines, each section's size and CRC-32), then the sections (JSON), each decoded only when asked
(`croft stats` decodes no poll times unless another poll of the node falls among them).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from croft.adapters.dataset.files import DatasetFile, shown
from croft.adapters.dataset.summaries import CheckMemory, _memory, load_all, replace_quietly
from croft.domain.dataset.containers import ContainersAccumulator
from croft.domain.dataset.merged import (
    WHERE,
    add_profile,
    containers_section,
    empty_profile,
    merge_containers,
    merge_stats,
    profile_plans,
    stats_section,
    times_of,
)
from croft.domain.dataset.segments import ProfilePlan, SegmentSummary
from croft.domain.dataset.summary import StatsAccumulator

if TYPE_CHECKING:
    from croft.domain.dataset.profile import Subject

FOLDER = "merged-summaries"
LIMIT = 256  # merged states kept, the newest
VERSION = 1
SECTIONS = ("stats", "polls", "containers", "profile", "containers-at", "cgroups-at", "tgids-at")

Facts = tuple[int, int, int, int, int]  # device, inode, size, mtime ns, ctime ns


class MergedDamaged(Exception):
    """A merged state's section did not match its CRC-32 or its shape: the question is asked
    again without the merged states (`load_trusted(use_merged=False)`)."""


class Merged:
    """One directory's merged state (`path`), as read: its header and the sections' bytes."""

    def __init__(self, path: Path, header: dict[str, Any], body: memoryview) -> None:
        self.path = path
        self.header = header
        self.body = body
        self.positions: list[int] = []  # where each of its segments is in the files asked about
        self._polls: dict[str, list[int]] | None = None

    def section(self, name: str) -> Any:
        """The section `name`, decoded; `MergedDamaged` when it does not match its CRC-32."""
        offset = 0
        for other, size, crc32 in self.header["sections"]:
            if other == name:
                raw = self.body[offset : offset + size]
                if len(raw) != size or zlib.crc32(raw) != crc32:
                    raise MergedDamaged(f"{self.path}: section {name} damaged")
                return orjson.loads(raw)
            offset += size
        raise MergedDamaged(f"{self.path}: no section {name}")

    def times(self, node: str) -> Iterator[int]:
        """The poll times of `node` (the "polls" section, decoded once)."""
        if self._polls is None:
            self._polls = self.section("polls")
        return times_of(self._polls, node)

    def matches(self, names: dict[str, int], facts: dict[int, Facts | None]) -> bool:
        """Whether every segment it holds is among `names` (name -> position in the files) with
        the facts it had (`facts` by position); if so, `positions` says where."""
        positions = []
        for name, *held, _ in self.header["segments"]:
            at = names.get(name)
            if at is None or facts[at] != tuple(held):
                return False
            positions.append(at)
        self.positions = positions
        return True

    def skips(self, files: Sequence[DatasetFile]) -> list[tuple[str, str, int]]:
        """(file shown, kind, count) of the skipped lines of its segments."""
        return [
            (shown(files[at].path), kind, count)
            for at, record in zip(self.positions, self.header["segments"], strict=True)
            for kind, count in record[-1].items()
        ]


class Trusted:
    """What `load_trusted` found: the merged states that answer for some of the files, and the
    trusted summary of each other file (None: read it)."""

    def __init__(
        self, files: Sequence[DatasetFile], merged: list[Merged], summaries: list[SegmentSummary | None]
    ):
        self.files = files
        self.merged = merged
        self.summaries = summaries
        self.answered = {at for m in merged for at in m.positions}

    def stats_into(self, total: StatsAccumulator) -> None:
        """Merge the merged states' stats (and their segments' skipped lines) into `total`."""
        with _shape(self.merged):
            for m in self.merged:
                merge_stats(m.section("stats"), total, m.times)
                for path, kind, count in m.skips(self.files):
                    total.skips.line(path, kind, count)

    def containers_into(self, total: ContainersAccumulator) -> None:
        with _shape(self.merged):
            for m in self.merged:
                merge_containers(m.section("containers"), total)
                for path, kind, count in m.skips(self.files):
                    total.skips.line(path, kind, count)

    def plans(
        self, subject: Subject, from_ms: int | None, to_ms: int | None
    ) -> dict[int, tuple[ProfilePlan, SegmentSummary | None]]:
        """By position in the files, each answered segment's profile plan and, where it reads
        the per-poll figures, a summary naming its data and figures."""
        found: dict[int, tuple[ProfilePlan, SegmentSummary | None]] = {}
        where = WHERE[subject.kind]
        with _shape(self.merged):
            for m in self.merged:
                section = {"segments": m.section("profile"), where: m.section(f"{where}-at")}
                plans = profile_plans(section, subject, from_ms, to_ms)
                found.update(zip(m.positions, plans, strict=True))
        return found


@contextmanager
def _shape(merged: list[Merged]) -> Iterator[None]:
    """A section of a shape this version does not write (a damaged file) as `MergedDamaged`."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MergedDamaged(f"{[m.path for m in merged]}: {exc}") from None


def load_trusted(files: Sequence[DatasetFile], workers: int, use_merged: bool = True) -> Trusted:
    """The files' trusted summaries: from each directory's merged state where it holds them
    (unless not `use_merged`), else each one's own (`summaries.load_all`); the merged states
    brought up to date. Without remembered checks (`summaries.remembered_checks`), every summary
    is loaded on its own."""
    memory = _memory[0] if _memory else None
    if memory is None:
        return Trusted(files, [], load_all(files, workers))
    folder = memory.path.parent / FOLDER
    groups: dict[tuple[Path, str], list[int]] = {}
    for at, f in enumerate(files):
        if f.compressed and f.problem is None:
            groups.setdefault((f.path.parent, f.node), []).append(at)
    facts = {at: files[at].facts or _facts(files[at].path) for ats in groups.values() for at in ats}
    merged: list[Merged] = []
    wanted: list[tuple[Path | None, Merged | None, str, list[int]]] = []
    for (directory, node), ats in groups.items():
        path = _path_of(folder, directory, node)
        found = None if path is None or not use_merged else _read(path, node)
        if found is not None and found.matches({files[at].path.name: at for at in ats}, facts):
            merged.append(found)
        else:
            found = None
        wanted.append((path, found, node, ats))
    answered = {at for m in merged for at in m.positions}
    rest = [at for at in range(len(files)) if at not in answered]
    summaries: list[SegmentSummary | None] = [None] * len(files)
    for at, summary in zip(rest, load_all([files[at] for at in rest], workers), strict=True):
        summaries[at] = summary
    for path, found, node, ats in wanted:
        new = [
            at
            for at in ats
            if summaries[at] is not None
            and (held := facts[at]) is not None
            and held[4] < memory.now_ns - CheckMemory.RACY_NS
        ]
        if path is not None and new:
            _write(path, node, found, [(files[at], facts[at], summaries[at]) for at in new])
    return Trusted(files, merged, summaries)


def _facts(path: Path) -> Facts | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns)


def _path_of(folder: Path, directory: Path, node: str) -> Path | None:
    try:
        s = directory.stat()
    except OSError:
        return None
    return folder / f"{s.st_dev}-{s.st_ino}-{zlib.crc32(node.encode('utf-8', 'surrogateescape')):08x}"


def _read(path: Path, node: str) -> Merged | None:
    try:
        raw = path.read_bytes()
        end = raw.index(b"\n")
        header = orjson.loads(raw[:end])
        if header.get("version") != VERSION or header.get("node") != node:
            return None
        return Merged(path, header, memoryview(raw)[end + 1 :])
    except (OSError, ValueError, TypeError, AttributeError):
        return None  # none yet, or unreadable: every summary is loaded on its own


def _write(
    path: Path, node: str, base: Merged | None, new: list[tuple[DatasetFile, Any, SegmentSummary | None]]
) -> None:
    """Write the merged state of `base`'s segments (none: a new one) and the `new` ones (file,
    facts, trusted summary)."""
    stats, containers = StatsAccumulator(syscalls=True), ContainersAccumulator()
    profile = empty_profile()
    records: list[list[Any]] = []
    if base is not None:
        try:
            merge_stats(base.section("stats"), stats, base.times)
            merge_containers(base.section("containers"), containers)
            profile = {"segments": base.section("profile")}
            profile.update((name, base.section(f"{name}-at")) for name in WHERE.values())
            records = list(base.header["segments"])
        except (MergedDamaged, KeyError, TypeError, ValueError, AttributeError):
            base, stats, containers = None, StatsAccumulator(syscalls=True), ContainersAccumulator()
            profile, records = empty_profile(), []
    for f, facts, summary in new:
        assert summary is not None and facts is not None
        summary.stats(f.node, "", into=stats)
        containers.merge(summary.containers(f.node, ""))
        add_profile(profile, summary)
        records.append([f.path.name, *facts, dict(summary.state["skips"])])
    state, polls = stats_section(stats)
    at = [profile[name] for name in WHERE.values()]
    sections = [
        orjson.dumps(section)
        for section in (state, polls, containers_section(containers), profile["segments"], *at)
    ]
    header = {
        "version": VERSION,
        "node": node,
        "segments": records,
        "sections": [[name, len(raw), zlib.crc32(raw)] for name, raw in zip(SECTIONS, sections, strict=True)],
    }
    replace_quietly(path, orjson.dumps(header) + b"\n" + b"".join(sections))
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Keep the `LIMIT` newest merged states (directories long gone leave theirs behind)."""
    try:
        entries = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(folder)]
        for _, old in sorted(entries)[: max(len(entries) - LIMIT, 0)]:
            Path(old).unlink(missing_ok=True)
    except OSError:
        pass  # only a memory
