"""croft stats' totals of plain files (live files) it read before, remembered so that a repeated
question does not read an unchanged one again.

A plain file has no summary; its totals (`StatsAccumulator`, syscall sums included) are kept
beside the summaries' remembered trust checks (`croft.adapters.dataset.summaries.CheckMemory`,
whose rule this follows): by the file's node, device, inode, size, mtime and ctime, and only for
a file last changed over `CheckMemory.RACY_NS` before it was read. Any write to a file gives it a
new ctime, which no one can set back, so the totals of a file that has changed since (a live file
the collector appends to) are never used: it is read again. A file with skipped lines or damage
is not remembered (its skips name it), nor one that changed while it was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from croft.adapters.dataset.files import DatasetFile
from croft.adapters.dataset.summaries import CheckMemory, replace_quietly
from croft.domain.dataset.segments import SegmentSummary, stats_state
from croft.domain.dataset.summary import StatsAccumulator

FILE_NAME = "live-stats.json"


class LiveMemory:
    """Totals of whole plain files by `key`, kept in one small file (`LIMIT` newest entries)."""

    LIMIT = 256

    def __init__(self, path: Path, now_ns: int) -> None:
        self.path = path
        self.now_ns = now_ns  # before any file of this process was read
        self.states: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}
        self.added = False
        try:
            import orjson

            for node, *facts, at, state in orjson.loads(path.read_bytes()):
                self.states[(str(node), *(int(n) for n in facts))] = (int(at), dict(state))
        except (OSError, ValueError, TypeError):
            self.states = {}  # none yet, or unreadable: every file is read

    @staticmethod
    def key(f: DatasetFile) -> tuple[Any, ...] | None:
        """What identifies the bytes of `f` now; None when it cannot be told."""
        try:
            facts = f.path.stat()
        except OSError:
            return None
        return (f.node, facts.st_dev, facts.st_ino, facts.st_size, facts.st_mtime_ns, facts.st_ctime_ns)

    def totals(self, key: tuple[Any, ...], syscalls: bool) -> StatsAccumulator | None:
        """The remembered totals of the file of `key`, or None; without syscall sums unless `syscalls`."""
        found = self.states.get(key)
        if found is None:
            return None
        try:
            state = {
                **found[1],
                "syscalls": {name: int(total) for name, total in found[1]["syscalls"].items()},
            }
            return SegmentSummary(0, 0, {"stats": state, "skips": {}}).stats(
                key[0], "", StatsAccumulator(syscalls)
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def remember(self, key: tuple[Any, ...], after: tuple[Any, ...] | None, acc: StatsAccumulator) -> None:
        """Keep `acc`, read from the file of `key` (`after`: its key once read), when it holds
        every syscall sum and no skip, the file did not change meanwhile and was last changed
        long enough before."""
        if after != key or not acc.syscalls or acc.skips.lines or acc.skips.files or acc.skips.unread:
            return
        if key[5] >= self.now_ns - CheckMemory.RACY_NS:
            return
        self.states[key] = (self.now_ns, stats_state(acc))
        self.added = True

    def save(self) -> None:
        if not self.added:
            return
        import orjson

        newest = sorted(self.states.items(), key=lambda item: item[1][0])[-self.LIMIT :]
        body = orjson.dumps([[*key, at, state] for key, (at, state) in newest])
        replace_quietly(self.path, body)
        self.added = False
