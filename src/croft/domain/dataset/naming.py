"""The file names of one dataset directory (see croft.domain.dataset.rotation, whose names these
are): the live file `<stem>.jsonl`, and closed segments `<stem>-<stamp>[_NNN].jsonl[.zst]` named by
their first row's second and clash number. Kept apart from rotation's plans so that `croft collect`
imports only these."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import attrs

from croft.domain.utc import MAX_MS, parse_stamp, stamp


@attrs.frozen(order=True)
class SegmentName:
    """One closed segment's identity: its first row's second and its clash number (0: no suffix).
    Ordering is time order, and equals the byte order of the file names."""

    start_ms: int
    clash: int = 0

    def key(self, stem: str) -> str:
        """The name without `.jsonl`/`.jsonl.zst`: `<stem>-<stamp>[_NNN]`."""
        suffix = f"_{self.clash:03d}" if self.clash else ""
        return f"{stem}-{stamp(self.start_ms)}{suffix}"


@attrs.frozen
class Naming:
    """The file names of a dataset whose live file is `<stem>.jsonl`."""

    stem: str

    @classmethod
    def for_live(cls, live_name: str) -> Naming:
        return cls(live_name.removesuffix(".jsonl"))

    @property
    def live(self) -> str:
        return f"{self.stem}.jsonl"

    def plain(self, seg: SegmentName) -> str:
        return f"{seg.key(self.stem)}.jsonl"

    def compressed(self, seg: SegmentName) -> str:
        return f"{seg.key(self.stem)}.jsonl.zst"

    def temporary(self, seg: SegmentName) -> str:
        return f".{seg.key(self.stem)}.jsonl.zst.tmp"

    def parse(self, file_name: str) -> tuple[SegmentName, str] | None:
        """(segment, kind) for one of this dataset's segment files, kind being "plain",
        "compressed" or "temporary"; None for the live file and for anything else."""
        match = _pattern(self.stem).fullmatch(file_name)
        if match is None:
            return None
        dot, when, clash, ext = match.groups()
        start_ms = parse_stamp(when)
        kind = {(False, None): "plain", (False, ".zst"): "compressed", (True, ".zst.tmp"): "temporary"}
        found = kind.get((bool(dot), ext))
        if start_ms is None or found is None or (clash is not None and int(clash) == 0):
            return None
        return SegmentName(start_ms, int(clash or 0)), found


@functools.lru_cache(maxsize=64)
def _pattern(stem: str) -> re.Pattern[str]:
    """The names `Naming(stem).parse` reads (compiled once per stem: a dataset lists many)."""
    return re.compile(rf"(\.?){re.escape(stem)}-(\w{{16}})(?:_(\d{{3,}}))?\.jsonl(\.zst(?:\.tmp)?)?")


def next_name(start_ms: int, taken: Iterable[SegmentName]) -> SegmentName:
    """The name for a segment whose first row is at `start_ms`: the bare stamp when that second is
    free, otherwise one clash number above the highest already taken for that second, so the new
    segment sorts after every earlier one of its second and no file is ever overwritten. A start
    below the newest name taken (a wall clock stepped back) takes the newest's second: the new name
    sorts after every name taken."""
    taken = tuple(taken)
    second_ms = min(max(start_ms, 0), MAX_MS) // 1000 * 1000
    if taken:
        second_ms = max(second_ms, max(taken).start_ms)
    clashes = [seg.clash for seg in taken if seg.start_ms == second_ms]
    return SegmentName(second_ms, max(clashes) + 1 if clashes else 0)
