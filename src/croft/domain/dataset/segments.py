"""A closed segment's summary: what `croft stats` and `croft profile` need to know of a segment
without reading it, and how it is framed inside the segment file itself.

The summary is the state of the readers' own accumulators (`StatsAccumulator` with syscall sums,
`ContainersAccumulator`) over every line of the segment, plus the distinct cgroups and the skip
counts; so an answer merged from summaries is the answer a scan of the same bytes gives. Rows that
do not name their node are kept under a placeholder node, replaced by the file's node when read
(a per-node directory's name after `croft collect`, the host name locally).

It lives in a zstd skippable frame at the end of the segment (RFC 8878, 3.1.2): `zstd -dc`
skips it, and a decompressor that stops after the first frame never reaches it. The frame is

    magic 0x184D2A5E | payload size | JSON body | frame start (8) | body CRC-32 | b"CRSM"

(integers little-endian, 4 bytes unless said)

so a reader finds it from the file's last 16 bytes. The body names the size and CRC-32 of the data
before it; a summary is trusted only while both match the file (and its own CRC its body). Since
version 3, a second skippable frame may stand between the data and the summary frame: the
per-poll figures `croft profile` reads (`croft.domain.dataset.poll_groups`), which the body names
(`profile`: the frame's size, its index's size and CRC-32) and `croft stats` never reads. A
version 2 summary (none of those figures) is still read; older ones are not (the segment is
scanned, and `croft index` writes it a summary of this version). Since version 4, each container
names the pods its rows named (`[namespace, name, container]` each, docs/dataset.md `pod`): a
collector before it wrote none, so a version 2 or 3 summary's containers have none.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from croft.domain.dataset.containers import ContainersAccumulator
from croft.domain.dataset.poll_groups import FILE_NODE as FILE_NODE
from croft.domain.dataset.poll_groups import PROFILE_MAGIC, PollGroups, encode_frame
from croft.domain.dataset.summary import StatsAccumulator

if TYPE_CHECKING:
    from croft.domain.dataset.profile import Subject

VERSION = 4  # 2: syscall sums as exact integers (decimal strings); 3: per-poll figures for profile;
# 4: the containers' pod names (a reader before it would not know the ninth item: it scans instead)
READ_VERSIONS = (2, 3, 4)  # a version 1 summary is not read (its segment is scanned)
SKIPPABLE_MAGIC = 0x184D2A5E
FOOTER_MAGIC = b"CRSM"
FOOTER_BYTES = 16  # data size (8) + body CRC-32 (4) + FOOTER_MAGIC (4)
FRAME_HEADER_BYTES = 8


@attrs.frozen
class SegmentSummary:
    """One segment's summary: the size and CRC-32 of its data frame(s), and the accumulators'
    state over its lines (`state`, as `encode` writes it)."""

    data_bytes: int
    crc32: int
    state: dict[str, Any]

    @property
    def first_ms(self) -> int | None:
        value = self.state["stats"]["first_ms"]
        return value if isinstance(value, int) else None

    @property
    def last_ms(self) -> int | None:
        value = self.state["stats"]["last_ms"]
        return value if isinstance(value, int) else None

    @property
    def profile(self) -> tuple[int, int, int] | None:
        """The per-poll figures' frame, right after the data: (its bytes, its index's bytes and
        CRC-32); None when the summary has none (version 2, or figures not written exactly)."""
        value = self.state.get("profile")
        return None if value is None else (value[0], value[1], value[2])

    @property
    def skipped_lines(self) -> int:
        return int(sum(self.state["skips"].values()))

    def stats(self, node: str, path: str, into: StatsAccumulator | None = None) -> StatsAccumulator:
        """The stats accumulator of the segment's lines, as a scan of it read on `node` under the
        name `path` gives it; merged into `into` when given (as `into.merge` would, its syscall
        sums only if it keeps them), which is then returned, without building one of its own."""
        s = self.state["stats"]
        acc = StatsAccumulator(syscalls=True) if into is None else into
        acc.rows += s["rows"]
        for mine, theirs in ((acc.polls, s["polls"]), (acc.tgids, s["tgids"])):
            for own, values in theirs.items():
                mine.setdefault(node if own == FILE_NODE else own, set()).update(values)
        first, last = s["first_ms"], s["last_ms"]
        if first is not None:
            acc.first_ms = first if acc.first_ms is None else min(acc.first_ms, first)
        if last is not None:
            acc.last_ms = last if acc.last_ms is None else max(acc.last_ms, last)
        acc.processes.update((c, f) for c, f in s["processes"])
        acc.workloads.update(s["workloads"])
        if acc.syscalls:
            sums = acc.syscall_sums
            for name, total in s["syscalls"].items():
                sums[name] += total
        self._skips(acc, path)
        return acc

    def containers(self, node: str, path: str) -> ContainersAccumulator:
        """The containers accumulator of the segment's lines, read on `node` under `path`."""
        acc = ContainersAccumulator()
        for kind, value, cgroup, frameworks, nodes, first, last, rows, pods in self.state["containers"]:
            own = {node if n == FILE_NODE else n for n in nodes}
            named = {(p[0], p[1], p[2]) for p in pods}
            acc.entries[(kind, value)] = [cgroup, set(frameworks), own, first, last, rows, named]
        self._skips(acc, path)
        return acc

    def container_pods(self) -> dict[str, tuple[str, str, str | None]]:
        """The pod names of each container the summary names (by id; none before version 4)."""
        return {
            entry[1]: (entry[8][0][0], entry[8][0][1], entry[8][0][2])
            for entry in self.state["containers"]
            if entry[0] == "c" and entry[8]
        }

    def _skips(self, acc: StatsAccumulator | ContainersAccumulator, path: str) -> None:
        for kind, count in self.state["skips"].items():
            acc.skips.line(path, kind, count)

    def profile_plan(self, subject: Subject, from_ms: int | None, to_ms: int | None) -> ProfilePlan:
        """What `croft profile` of `subject` over [from_ms, to_ms] needs of this segment."""
        if self.skipped_lines:
            return ProfilePlan(scan=True)  # a skipped line may mention the subject: read it
        if subject.kind == "container":
            seen = tuple(
                (value, first, last)
                for kind, value, _, _, _, first, last, _, _ in self.state["containers"]
                if kind == "c" and value.startswith(subject.value)
            )
        elif subject.kind == "pod":  # scanned where its pod's containers are (no figures by pod)
            named = any(
                f"{pod[0]}/{pod[1]}" == subject.value
                for entry in self.state["containers"]
                for pod in entry[8]
            )
            return ProfilePlan(scan=named)
        elif subject.kind == "cgroup":
            seen = () if subject.value not in self.state["cgroups"] else (("", 0, 0),)
        else:
            pid = int(subject.value)
            tgids = self.state["stats"]["tgids"].values()
            seen = (("", 0, 0),) if any(pid in values for values in tgids) else ()
        return plan_of(subject, from_ms, to_ms, seen, self.first_ms, self.last_ms, self.profile is not None)


def plan_of(
    subject: Subject,
    from_ms: int | None,
    to_ms: int | None,
    seen: tuple[tuple[str, int, int], ...],
    first_ms: int | None,
    last_ms: int | None,
    figures: bool,
) -> ProfilePlan:
    """`SegmentSummary.profile_plan` of a segment without skipped lines that holds the subject's
    rows of `seen` (for a container, its ids with their first and last ms), whose rows span
    [first_ms, last_ms] and which has per-poll figures when `figures`."""
    if not seen:
        return ProfilePlan(scan=False)
    outside = (
        first_ms is None
        or last_ms is None
        or (from_ms is not None and last_ms < from_ms)
        or (to_ms is not None and first_ms > to_ms)
    )
    if outside and subject.kind == "container":
        return ProfilePlan(scan=False, spans=seen)
    if subject.kind != "pid" and figures:
        return ProfilePlan(scan=False, groups=True)
    return ProfilePlan(scan=True)


@attrs.frozen
class ProfilePlan:
    """Whether a segment must be read for a profile; if not, the (container id, first ms, last ms)
    of the subject's containers it holds (all outside the window), or whether its per-poll figures
    (`groups`, `croft.domain.dataset.poll_groups`) answer instead."""

    scan: bool
    spans: tuple[tuple[str, int, int], ...] = ()
    groups: bool = False


def state_of(
    stats: StatsAccumulator,
    containers: ContainersAccumulator,
    cgroups: set[str],
    groups: PollGroups | None = None,
) -> dict[str, Any] | None:
    """The summary state of accumulators read with node `FILE_NODE`; None when it cannot be
    written exactly (damage recorded). `groups` (the per-poll figures) are kept when exact."""
    if stats.skips.files or containers.skips.files:
        return None
    skips: Counter[str] = Counter()
    for kinds in stats.skips.lines.values():
        skips.update(kinds)
    return {
        "stats": stats_state(stats, text_sums=False),
        "containers": [
            [
                kind,
                value,
                e[0],
                sorted(e[1]),
                sorted(e[2]),
                e[3],
                e[4],
                e[5],
                [list(p) for p in sorted(e[6], key=str)],
            ]
            for (kind, value), e in containers.entries.items()
        ],
        "cgroups": sorted(cgroups),
        "skips": dict(skips),
        "profile": groups if groups is not None and groups.exact() else None,
    }


def stats_state(stats: StatsAccumulator, text_sums: bool = True) -> dict[str, Any]:
    """The state of `stats` as a summary keeps it (`SegmentSummary.stats` reads it back), its
    syscall sums as decimal strings (JSON's integers stop at 64 bits) unless not `text_sums`."""
    return {
        "rows": stats.rows,
        "first_ms": stats.first_ms,
        "last_ms": stats.last_ms,
        "polls": {node: sorted(times) for node, times in stats.polls.items()},
        "tgids": {node: sorted(v) for node, v in stats.tgids.items()},
        "processes": sorted(
            stats.processes, key=lambda p: (p[0] or "", p[0] is None, p[1] or "", p[1] is None)
        ),
        "workloads": dict(stats.workloads),
        "syscalls": {name: str(total) if text_sums else total for name, total in stats.syscall_sums.items()},
    }


def encode(summary: SegmentSummary) -> bytes:
    """The frames to append right after the summary's `data_bytes`: the per-poll figures' frame
    when its state holds them (a `PollGroups`, as `state_of` gives it), then the summary frame.
    Syscall sums, exact integers of any size, are written as decimal strings (JSON readers, msgspec
    among them, refuse or round integers past 64 bits)."""
    stats = summary.state["stats"]
    sums = {name: str(total) for name, total in stats["syscalls"].items()}
    groups = summary.state.get("profile")
    figures, profile = encode_frame(groups) if isinstance(groups, PollGroups) else (b"", None)
    state = {**summary.state, "stats": {**stats, "syscalls": sums}, "profile": profile}
    state.pop("version", None)  # a summary read is written anew as this version
    body = msgspec.json.encode(
        {"version": VERSION, "data_bytes": summary.data_bytes, "crc32": summary.crc32, **state}
    )
    start = summary.data_bytes + len(figures)
    footer = start.to_bytes(8, "little") + zlib.crc32(body).to_bytes(4, "little")
    payload = body + footer + FOOTER_MAGIC
    return figures + SKIPPABLE_MAGIC.to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def frame_start(footer: bytes) -> int | None:
    """Where the summary frame starts, from a file's last `FOOTER_BYTES`; None when the file
    ends with no summary."""
    if len(footer) != FOOTER_BYTES or footer[12:] != FOOTER_MAGIC:
        return None
    return int.from_bytes(footer[:8], "little")


def figures_frame_opens(header: bytes, summary: SegmentSummary) -> bool:
    """Whether `header`, the file's `FRAME_HEADER_BYTES` at `summary.data_bytes`, opens the per-poll
    figures' frame the summary names: its magic, and the size that ends it where the summary frame
    starts. A zstd reader takes anything else there for damage (an unknown frame, or a skippable one
    that runs past the summary) and a scan reports the rest of the file skipped, so the summary is
    not the scan's answer; the frame's payload, which readers skip, does not matter here. True when
    the summary names no such frame."""
    if summary.profile is None:
        return True
    return (
        len(header) == FRAME_HEADER_BYTES
        and int.from_bytes(header[:4], "little") == PROFILE_MAGIC
        and int.from_bytes(header[4:], "little") == summary.profile[0] - FRAME_HEADER_BYTES
    )


def decode(frame: bytes, start: int) -> SegmentSummary | None:
    """The summary in `frame` (the file's bytes from `frame_start` to its end), if it is one of
    `READ_VERSIONS` whose data (and per-poll figures' frame) end at `start`; else None."""
    if len(frame) < FRAME_HEADER_BYTES + FOOTER_BYTES:
        return None
    magic = int.from_bytes(frame[:4], "little")
    size = int.from_bytes(frame[4:8], "little")
    if magic != SKIPPABLE_MAGIC or size != len(frame) - FRAME_HEADER_BYTES:
        return None
    raw = frame[FRAME_HEADER_BYTES:-FOOTER_BYTES]
    if zlib.crc32(raw) != int.from_bytes(frame[-8:-4], "little"):
        return None
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(body, dict) or body.get("version") not in READ_VERSIONS:
        return None
    try:
        crc, data_bytes, version = int(body.pop("crc32")), body.pop("data_bytes"), body.pop("version")
        profile = body.get("profile") if version >= 3 else None
        if profile is not None and not (
            isinstance(profile, list)
            and len(profile) == 3
            and all(type(n) is int and n >= 0 for n in profile)
        ):
            return None
        if type(data_bytes) is not int or data_bytes + (profile[0] if profile else 0) != start:
            return None
        state = {key: body[key] for key in ("stats", "containers", "cgroups", "skips")}
        state["profile"], state["version"] = profile, version
        if version < 4:  # written before pods were named: none
            state["containers"] = [[*entry, []] for entry in state["containers"]]
        if not all(_container_entry(entry) for entry in state["containers"]):
            return None
        sums = state["stats"]["syscalls"]
        state["stats"]["syscalls"] = {
            name: int(total) for name, total in sums.items() if isinstance(total, str)
        }
        if len(state["stats"]["syscalls"]) != len(sums):
            return None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return SegmentSummary(data_bytes, crc, state)


def _container_entry(entry: Any) -> bool:
    """Whether a summary's container entry has the shape this version reads (its pods above all:
    lists of a namespace, a name and a container name or null)."""
    if not (isinstance(entry, list) and len(entry) == 9 and isinstance(entry[8], list)):
        return False
    return all(
        isinstance(pod, list)
        and len(pod) == 3
        and isinstance(pod[0], str)
        and isinstance(pod[1], str)
        and (pod[2] is None or isinstance(pod[2], str))
        for pod in entry[8]
    )
