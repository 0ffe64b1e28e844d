"""Counting what a reader skipped, so that bad input is never silent.

Four kinds of line are skipped: a torn last line (a file that ends without a newline, such as a
live file being written), a line too long to be a row (over 1 MiB; `croft.domain.dataset.lines`),
a line that is not JSON, and JSON that is not a row. A file whose zstd
data is truncated or corrupt is read up to the damage; the rest of it is skipped and the file named.
"""

from __future__ import annotations

from collections import Counter

TORN = "torn last line"
TOO_LONG = "too long"
NOT_JSON = "not JSON"
NOT_A_ROW = "not a row"
LINE_KINDS = (TORN, TOO_LONG, NOT_JSON, NOT_A_ROW)
MAX_LINE_BYTES = 1 << 20  # a longer line is skipped as TOO_LONG (no row comes near it: a row is about 1 KB)
JSON_WHITESPACE = b" \t\r\n"  # a line of nothing else is blank: it holds nothing, and is not skipped
_PLURAL = {TORN: "torn last lines", TOO_LONG: "too long", NOT_JSON: "not JSON", NOT_A_ROW: "not rows"}


class SkipTally:
    """Skipped lines per file and kind, and damaged files with what was wrong. Mergeable."""

    def __init__(self) -> None:
        self.lines: dict[str, Counter[str]] = {}
        self.files: dict[str, str] = {}
        self.unread: set[str] = set()  # files (or node directories) of which nothing could be read

    def line(self, path: str, kind: str, count: int = 1) -> None:
        """Count `count` skipped lines of `kind` (one of `LINE_KINDS`) in `path`."""
        if count:
            self.lines.setdefault(path, Counter())[kind] += count

    def damaged(self, path: str, reason: str, whole: bool = False) -> None:
        """Record that the rest of `path` (`whole`: all of it) was skipped because of `reason`."""
        if path not in self.files:
            self.files[path] = reason
            if whole:
                self.unread.add(path)

    def merge(self, other: SkipTally) -> None:
        for path, kinds in other.lines.items():
            self.lines.setdefault(path, Counter()).update(kinds)
        for path, reason in other.files.items():
            self.damaged(path, reason, path in other.unread)

    @property
    def total_lines(self) -> int:
        return sum(sum(kinds.values()) for kinds in self.lines.values())

    def report(self) -> tuple[str, ...]:
        """One sentence per damaged file, then one for all skipped lines; empty when nothing was
        skipped. Each sentence fits on one line."""
        sentences = [
            f"skipped {'' if path in self.unread else 'the rest of '}{path}: {reason}"
            for path, reason in sorted(self.files.items())
        ]
        total = self.total_lines
        if total:
            kinds: Counter[str] = Counter()
            for counts in self.lines.values():
                kinds.update(counts)
            how = ", ".join(
                f"{kinds[kind]} {kind if kinds[kind] == 1 else _PLURAL[kind]}"
                for kind in LINE_KINDS
                if kinds[kind]
            )
            where = ", ".join(f"{path} ({sum(c.values())})" for path, c in sorted(self.lines.items()))
            noun = "line" if total == 1 else "lines"
            sentences.append(f"skipped {total} {noun} ({how}) in {where}")
        return tuple(sentences)
