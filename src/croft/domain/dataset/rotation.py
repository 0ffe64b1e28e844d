"""Rotation and retention of the dataset as pure decisions (docs/dataset.md, "Rotation and retention").

The files of one dataset directory, for a live file named `croft-dataset.jsonl` (the stem is the live
file's name less `.jsonl`):

    croft-dataset.jsonl                               the live file, appended once per poll
    croft-dataset-20261020T130000Z.jsonl              a closed segment not compressed yet
    croft-dataset-20261020T130000Z.jsonl.zst          a closed, compressed segment
    croft-dataset-20261020T130000Z_001.jsonl.zst      a second segment that started in the same second
    .croft-dataset-20261020T130000Z.jsonl.zst.tmp     a compression in progress, or cut short by a crash

The stamp is the UTC time of the segment's first row, `%Y%m%dT%H%M%SZ`. A clash gets `_NNN` (three
digits, counting up from the newest clash of that second): `_` sorts after `.`, so plain byte order of
the names is time order. Time order is the order segments were written in: when the wall clock has
stepped back below the newest name on disk, a new segment takes that name's second, one clash up.

The shell gathers facts (sizes, names, first-row times) and the clock, calls these functions, and
carries out what they return.

Clocks: rows and names carry wall time, which can step back or forward (NTP, a resumed VM). Ages
within a run are measured on the monotonic clock: the live file's age
(`LiveFile.first_row_monotonic_ns`) and the age of the segments this run closed (`plan_retention`'s
`ages_ms`); only segments of earlier runs are aged by wall time, and the segment this run closed
last is never deleted (`plan_retention`'s `keep`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

# The names live in croft.domain.dataset.naming (croft collect needs them, not the rest of this
# module); they are this module's too.
from croft.domain.dataset.naming import Naming as Naming
from croft.domain.dataset.naming import SegmentName as SegmentName
from croft.domain.dataset.naming import next_name as next_name

MS_PER_DAY = 86_400_000


@attrs.frozen
class Limits:
    """The `--rotate-*`/`--retain-*` options: seconds, bytes, days, bytes (docs/commands.md defaults)."""

    rotate_secs: int = 3600
    rotate_bytes: int = 1 << 30
    retain_days: int = 30
    retain_bytes: int = 10 << 30


def limit_errors(limits: Limits) -> tuple[str, ...]:
    """One sentence per thing wrong with `limits` (empty when they are usable): a zero or negative
    limit, or a retention that would not hold even one rotation."""
    errors = [
        f"{option} must be a positive number of {unit}, got {value}; set {option} or {env} to 1 or more"
        for option, env, unit, value in (
            ("--rotate-secs", "CROFT_ROTATE_SECS", "seconds", limits.rotate_secs),
            ("--rotate-bytes", "CROFT_ROTATE_BYTES", "bytes", limits.rotate_bytes),
            ("--retain-days", "CROFT_RETAIN_DAYS", "days", limits.retain_days),
            ("--retain-bytes", "CROFT_RETAIN_BYTES", "bytes", limits.retain_bytes),
        )
        if value <= 0
    ]
    if errors:
        return tuple(errors)
    if limits.retain_bytes < limits.rotate_bytes:
        errors.append(
            f"--retain-bytes {limits.retain_bytes} is smaller than one rotation (--rotate-bytes "
            f"{limits.rotate_bytes}); raise --retain-bytes or lower --rotate-bytes"
        )
    if limits.retain_days * 86_400 < limits.rotate_secs:
        errors.append(
            f"--retain-days {limits.retain_days} is shorter than one rotation (--rotate-secs "
            f"{limits.rotate_secs}); raise --retain-days or lower --rotate-secs"
        )
    return tuple(errors)


# --- rotation ----------------------------------------------------------------------------------


@attrs.frozen
class LiveFile:
    """Facts about the live file. `first_row_ms` is the time of its first row (None when empty);
    `left_by_earlier_run` is True for a file found on disk at start (an older collector's, or one
    a crash left), whose rows must never be mixed with this run's. `first_row_monotonic_ns` is the
    monotonic time of its first row when this run wrote it (None for a file found at start)."""

    size_bytes: int
    first_row_ms: int | None
    left_by_earlier_run: bool = False
    first_row_monotonic_ns: int | None = None


@attrs.frozen
class Rotation:
    """Close the live file by renaming it to `segment`'s plain name, then compress it."""

    segment: SegmentName
    reason: str


def plan_rotation(
    live: LiveFile,
    now_ms: int,
    limits: Limits,
    taken: Iterable[SegmentName] = (),
    now_monotonic_ns: int | None = None,
) -> Rotation | None:
    """Whether to close the live file before this poll's rows are appended: when an earlier run left
    it, when its first row is `rotate_secs` old or more, or when it holds `rotate_bytes` or more. An
    empty live file is never closed. `taken` are the segments already on disk (any kind). The age
    is monotonic (`now_monotonic_ns` less the first row's) when both are known, else wall time."""
    if live.size_bytes <= 0:
        return None
    start_ms = now_ms if live.first_row_ms is None else live.first_row_ms
    if live.first_row_monotonic_ns is not None and now_monotonic_ns is not None:
        age_ms = (now_monotonic_ns - live.first_row_monotonic_ns) // 1_000_000
    else:
        age_ms = now_ms - start_ms
    if live.left_by_earlier_run:
        reason = "the live file was left by an earlier run"
    elif age_ms >= limits.rotate_secs * 1000:
        reason = f"its first row is {limits.rotate_secs} s old or more"
    elif live.size_bytes >= limits.rotate_bytes:
        reason = f"it holds {live.size_bytes} bytes, at least --rotate-bytes {limits.rotate_bytes}"
    else:
        return None
    return Rotation(next_name(start_ms, taken), reason)


# --- retention ---------------------------------------------------------------------------------


@attrs.frozen
class Segment:
    """Facts about one closed segment. `files` are its names on disk (plain, compressed or a
    temporary), `size_bytes` all of them together, `last_write_ms` the time of its newest row as far
    as the shell knows (the files' mtime, which compression preserves); `busy` while it is being
    compressed, when it is never deleted."""

    name: SegmentName
    files: tuple[str, ...]
    size_bytes: int
    last_write_ms: int
    busy: bool = False
    kinds: frozenset[str] = frozenset()

    @property
    def waiting(self) -> bool:
        """A plain segment with no compressed copy yet: compression still has to run."""
        return "plain" in self.kinds and "compressed" not in self.kinds


@attrs.frozen
class FileFact:
    """One directory entry as the shell saw it: name, size in bytes, mtime in unix ms."""

    name: str
    size_bytes: int
    mtime_ms: int


def segments_on_disk(
    files: Iterable[FileFact], naming: Naming, busy: SegmentName | None = None
) -> tuple[Segment, ...]:
    """The segments among a directory listing, oldest first; files that are not this dataset's
    segments (the live file, anything else) are ignored and so never deleted."""
    groups: dict[SegmentName, list[tuple[str, FileFact]]] = {}
    for fact in files:
        parsed = naming.parse(fact.name)
        if parsed is not None:
            groups.setdefault(parsed[0], []).append((parsed[1], fact))
    segments = []
    for name, members in sorted(groups.items()):
        durable = [fact.mtime_ms for kind, fact in members if kind != "temporary"]
        segments.append(
            Segment(
                name=name,
                files=tuple(sorted(fact.name for _, fact in members)),
                size_bytes=sum(fact.size_bytes for _, fact in members),
                last_write_ms=max(durable or [fact.mtime_ms for _, fact in members]),
                busy=name == busy,
                kinds=frozenset(kind for kind, _ in members),
            )
        )
    return tuple(segments)


@attrs.frozen
class Deletion:
    segment: SegmentName
    files: tuple[str, ...]
    reason: str


@attrs.frozen
class RetentionPlan:
    """Segments to delete, oldest first, and the bytes the dataset holds afterwards (live included)."""

    delete: tuple[Deletion, ...]
    kept_bytes: int


def plan_retention(
    segments: Iterable[Segment],
    now_ms: int,
    limits: Limits,
    live_bytes: int = 0,
    ages_ms: Mapping[SegmentName, int] | None = None,
    keep: SegmentName | None = None,
) -> RetentionPlan:
    """Which segments to delete: oldest first, those whose newest row is more than `retain_days`
    old, then the oldest while the dataset (the live file's `live_bytes` and every segment) holds
    more than `retain_bytes`. A segment's age is `ages_ms[name]` when given (this run's segments,
    measured on the monotonic clock), else `now_ms` less its newest row's wall time.

    Laws: the live file is never named; `keep` (the segment just written) is never deleted, whatever
    the wall clock says; deletions are always the oldest segments, so nothing younger than a kept
    segment is deleted; the walk stops at a busy segment (a later plan, once it is compressed, goes
    on) and at `keep`, so afterwards the total is within `retain_bytes` unless the oldest segment
    left is busy or `keep`, or no segment is left."""
    ordered = sorted(segments, key=lambda seg: seg.name)
    total = live_bytes + sum(seg.size_bytes for seg in ordered)
    retain_ms = limits.retain_days * MS_PER_DAY
    ages = ages_ms or {}
    delete: list[Deletion] = []
    for seg in ordered:
        if seg.busy or seg.name == keep:
            break
        age_ms = ages.get(seg.name, now_ms - max(seg.last_write_ms, seg.name.start_ms))
        if age_ms > retain_ms:
            reason = f"its newest row is more than {limits.retain_days} days old"
        elif total > limits.retain_bytes:
            reason = f"the dataset holds {total} bytes, more than --retain-bytes {limits.retain_bytes}"
        else:
            break
        delete.append(Deletion(seg.name, seg.files, reason))
        total -= seg.size_bytes
    return RetentionPlan(tuple(delete), total)


# --- recovery at start -------------------------------------------------------------------------


@attrs.frozen
class Recovery:
    """What start-up does with leftovers of an interrupted run: files to `remove` (name, reason),
    plain segments to `compress`, and files it leaves alone because they are the only copy."""

    remove: tuple[tuple[str, str], ...]
    compress: tuple[SegmentName, ...]
    left_alone: tuple[tuple[str, str], ...]


def plan_recovery(segments: Iterable[Segment], naming: Naming, complete: frozenset[SegmentName]) -> Recovery:
    """Finish or redo what a crash cut short. `complete` holds the segments whose compressed file
    the shell checked against the plain copy beside it. Compression writes a temporary, syncs it,
    renames it to the compressed name and only then removes the plain copy, so: a temporary beside a
    plain copy is redone; a checked compressed file beside a plain copy is finished by removing the
    plain copy; an unchecked one is removed and redone. Nothing that is the only copy of its rows is
    removed."""
    remove: list[tuple[str, str]] = []
    compress: list[SegmentName] = []
    alone: list[tuple[str, str]] = []
    for seg in sorted(segments, key=lambda s: s.name):
        has, name = seg.kinds, seg.name
        if "temporary" in has:
            if has & {"plain", "compressed"}:
                remove.append((naming.temporary(name), "a compression cut short; it is done again"))
            else:
                alone.append((naming.temporary(name), "a partial compression whose plain copy is gone"))
        if "plain" in has and "compressed" in has:
            if name in complete:
                remove.append((naming.plain(name), "its compressed copy is complete"))
                continue
            remove.append((naming.compressed(name), "an incomplete compressed copy; it is done again"))
        if "plain" in has:
            compress.append(name)
    return Recovery(tuple(remove), tuple(compress), tuple(alone))
