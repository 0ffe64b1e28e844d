"""What `croft collect` copies from one node, as a pure plan: the node's index against what
`<out>/<node>/` already holds.

Local layout of one node's directory (the collector's names, so croft stats reads it as it is):

    croft-dataset.jsonl                          the live file's copy: whole lines, a prefix of the node's
    croft-dataset-20261020T130000Z.jsonl.zst     closed segments, landed whole by rename
    croft-dataset-20261020T120000Z.saved.jsonl   an earlier live copy whose rows no segment holds
    .croft-dataset-20261020T130000Z.jsonl.zst.part   a copy in progress (resumed by the next collect)

Laws: only names the index lists, that are plain safe names and the dataset's own files, are ever
written; a complete local segment of the node's size is never fetched again; the live copy is
continued from its size and copied again from the start only when the node's file is smaller or no
longer begins with the local copy (checked on the `overlap_bytes` before the continuation); a local
copy that is replaced is first found in a segment or kept under a saved name, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from croft.domain.dataset.http import Index, is_safe_name
from croft.domain.dataset.naming import Naming
from croft.domain.utc import stamp

OVERLAP_BYTES = 4096  # bytes before a continuation fetched again to prove it continues the same file


def part_name(name: str) -> str:
    """The hidden name a copy of `name` is written under until it is complete."""
    return f".{name}.part"


@attrs.frozen
class LocalFile:
    """One file in the node's local directory: name, size in bytes, mtime in unix ms."""

    name: str
    size_bytes: int
    mtime_ms: int


@attrs.frozen
class Fetch:
    """Copy bytes `have_bytes`.. `size_bytes` of `name` (size and mtime as the index listed them).

    `into_part`: continue the hidden part file (of `have_bytes` bytes) and rename it to `name` when
    complete; otherwise append to the landed live copy, whole lines at a time, so that it stays a
    prefix of the node's file at every instant and an interrupted collect just continues it.
    `replaces` names the landed copy the new one replaces (it is found in a segment or saved aside
    first). `supersedes` is a plain segment whose compressed copy this is: removed once this one
    has landed."""

    name: str
    size_bytes: int
    mtime_ms: int
    have_bytes: int = 0
    into_part: bool = True
    live: bool = False
    replaces: str | None = None
    supersedes: str | None = None
    why: str = "new"

    @property
    def overlap_bytes(self) -> int:
        """Bytes before `have_bytes` fetched again and compared with the local copy's last ones."""
        return min(self.have_bytes, OVERLAP_BYTES)

    @property
    def wanted_bytes(self) -> int:
        """Bytes this fetch asks for, the overlap included."""
        return self.size_bytes - self.have_bytes + self.overlap_bytes


@attrs.frozen
class NodePlan:
    """Fetches in order (segments oldest first, the live file last); names skipped as already
    complete; names refused, each with its reason; stale part files to remove."""

    fetches: tuple[Fetch, ...]
    unchanged: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    stale_parts: tuple[str, ...]


def refusal(name: str, naming: Naming) -> str | None:
    """Why the index entry `name` is not copied, or None when it is one of the dataset's files."""
    if not is_safe_name(name):
        return "not a plain safe file name"
    if name == naming.live:
        return None
    parsed = naming.parse(name)
    if parsed is None or parsed[1] not in ("plain", "compressed"):
        return f"not one of the files of the dataset {naming.live}"
    return None


def index_problem(index: Index) -> str | None:
    """Why a whole index is refused (its live file name is not a safe `*.jsonl` name), or None."""
    if not is_safe_name(index.live) or not index.live.endswith(".jsonl") or index.live == ".jsonl":
        return f"its live file name {index.live!r:.80} is not a plain safe *.jsonl name"
    return None


def plan_node(index: Index, local: Iterable[LocalFile]) -> NodePlan:
    """The plan for one node; see the module docstring for its laws. `index` must have passed
    `index_problem`."""
    naming = index.naming
    here: Mapping[str, LocalFile] = {f.name: f for f in local}
    fetches: list[Fetch] = []
    unchanged: list[str] = []
    refused: list[tuple[str, str]] = []
    listed = set()
    live_entry = None
    for entry in index.files:
        reason = refusal(entry.name, naming)
        if reason is not None:
            refused.append((entry.name, reason))
            continue
        if entry.name in listed:
            refused.append((entry.name, "listed twice"))
            continue
        listed.add(entry.name)
        if entry.name == naming.live:
            live_entry = entry
            continue
        parsed = naming.parse(entry.name)
        assert parsed is not None
        segment, kind = parsed
        compressed = naming.compressed(segment)
        if kind == "plain" and compressed in here:
            unchanged.append(entry.name)  # its compressed copy is already here
            continue
        supersedes = naming.plain(segment) if kind == "compressed" and naming.plain(segment) in here else None
        landed = here.get(entry.name)
        if landed is not None and landed.size_bytes == entry.size_bytes:
            if supersedes is None:
                unchanged.append(entry.name)
            else:
                fetches.append(Fetch(entry.name, entry.size_bytes, entry.mtime_ms, entry.size_bytes,
                                     supersedes=supersedes, why="its plain copy is left"))  # fmt: skip
            continue
        replaces = entry.name if landed is not None else None
        why = "its local copy has another size" if replaces else "new"
        fetches.append(
            _resumed(entry.name, entry.size_bytes, entry.mtime_ms, here, replaces, supersedes, why)
        )
    if live_entry is not None:
        live = _live(live_entry.name, live_entry.size_bytes, live_entry.mtime_ms, here)
        if live is None:
            unchanged.append(live_entry.name)
        else:
            fetches.append(live)
    wanted = {part_name(f.name) for f in fetches if f.into_part}
    hidden = (n for n in here if n.startswith(".") and n.endswith(".part"))
    stale = tuple(sorted(n for n in hidden if n not in wanted))
    return NodePlan(tuple(fetches), tuple(unchanged), tuple(refused), stale)


def _resumed(
    name: str,
    size: int,
    mtime_ms: int,
    here: Mapping[str, LocalFile],
    replaces: str | None,
    supersedes: str | None,
    why: str,
) -> Fetch:
    part = here.get(part_name(name))
    have = part.size_bytes if part is not None and part.size_bytes <= size else 0
    if have:
        why = f"resumed at {have} bytes"
    return Fetch(name, size, mtime_ms, have, replaces=replaces, supersedes=supersedes, why=why)


def _live(name: str, size: int, mtime_ms: int, here: Mapping[str, LocalFile]) -> Fetch | None:
    landed = here.get(name)
    if landed is None:
        return attrs.evolve(_resumed(name, size, mtime_ms, here, None, None, "new"), live=True)
    if size < landed.size_bytes:
        why = f"the node's live file ({size} bytes) is smaller than the local copy: the collector restarted"
        return Fetch(name, size, mtime_ms, 0, live=True, replaces=name, why=why)
    if size == landed.size_bytes and mtime_ms == landed.mtime_ms:
        return None  # the last copy recorded this size and mtime: nothing new
    return Fetch(name, size, mtime_ms, landed.size_bytes, into_part=False, live=True, why="grew")


def segment_candidates(first_row_ms: int, names: Iterable[str], naming: Naming) -> tuple[str, ...]:
    """The local segments that can hold a replaced live copy whose first row is at `first_row_ms`,
    in the order to look in them (the caller matches by content, never by name): the segments
    named by that row's second first (the collector names the segment it rotates a live file into
    so), then every other one, newest first (after a wall clock stepped back, the collector names
    it after the newest name it has, `<that name>_001`)."""
    second = first_row_ms // 1000 * 1000
    segments = []
    for name in names:
        parsed = naming.parse(name)
        if parsed is not None and parsed[1] in ("plain", "compressed"):
            segment = parsed[0]
            segments.append((segment.start_ms != second, -segment.start_ms, -segment.clash, name))
    return tuple(name for *_, name in sorted(segments))


def saved_name(naming: Naming, first_row_ms: int, taken: Iterable[str]) -> str:
    """A name for a replaced live copy that no segment holds: `<stem>-<stamp>.saved.jsonl`
    (`.saved-2.jsonl`, ... when taken). Not a segment name, so it never clashes with the node's
    files, and croft stats reads it like any plain dataset file."""
    taken = set(taken)
    base = f"{naming.stem}-{stamp(first_row_ms)}.saved"
    name, n = f"{base}.jsonl", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.jsonl"
    return name
