"""A reference model of reading a dataset, the obvious way, for the readers' agreement tests.

Every file is read whole, split on newlines, and each line judged by the codec itself
(`croft.domain.dataset.codec.decode_row`, msgspec): a row, blank (nothing), too long (over
`MAX_LINE_BYTES`), not JSON or not a row; a last line without its newline that is not a row is
torn. A zstd file is decompressed by the readers' one zstd reader (its damage semantics are tested
on their own in test_readers_files), so the model's lines after the damage are the readers' too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import attrs

from croft.adapters.dataset.files import Damaged, shown, zstd_blocks
from croft.domain.dataset import codec
from croft.domain.dataset.lines import MAX_LINE_BYTES
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TOO_LONG, TORN, SkipTally

WHITESPACE = b" \t\r\n"


def judge(line: bytes) -> Row | str | None:
    """What one line (without its newline) is, by the codec."""
    if len(line) > MAX_LINE_BYTES:
        return TOO_LONG
    if not line.strip(WHITESPACE):
        return None
    try:
        return codec.decode_row(line)
    except codec.NotARow:
        return NOT_A_ROW
    except codec.NotJSON:
        return NOT_JSON


@attrs.frozen
class FileModel:
    """One file as the model reads it: its judged lines in order (blank ones left out), and why
    the rest of it could not be read (whole: none of it)."""

    path: Path
    node: str
    lines: tuple[tuple[bytes, Row | str], ...]
    damaged: str | None = None
    whole: bool = False

    @property
    def rows(self) -> list[Row]:
        return [found for _, found in self.lines if isinstance(found, Row)]

    def skipped(self, needle: bytes | None = None) -> Counter[str]:
        """Skipped lines by kind; with `needle`, as croft profile sees them: only the lines that
        contain it are judged (a too-long line is counted wherever it is)."""
        return Counter(
            found
            for line, found in self.lines
            if isinstance(found, str) and (needle is None or found == TOO_LONG or needle in line)
        )


def model_file(path: Path, node: str, *, problem: str | None = None) -> FileModel:
    if problem is not None:
        return FileModel(path, node, (), problem, whole=True)
    damaged = None
    if path.name.endswith(".zst"):
        pieces = []
        for block in zstd_blocks(path):
            if isinstance(block, Damaged):
                damaged = block.reason
                break
            pieces.append(block)
        data = b"".join(pieces)
    else:
        data = path.read_bytes()
    *whole_lines, tail = data.split(b"\n")
    judged: list[tuple[bytes, Row | str]] = []
    for line in whole_lines:
        found = judge(line)
        if found is not None:
            judged.append((line, found))
    last = judge(tail)
    if last is not None:
        judged.append((tail, last if isinstance(last, Row) or last == TOO_LONG else TORN))
    return FileModel(path, node, tuple(judged), damaged)


def skip_report(files: Iterable[FileModel], needle: bytes | None = None) -> tuple[str, ...]:
    """The skip sentences a reader of `files` must give (with `needle`: croft profile's)."""
    tally = SkipTally()
    for f in files:
        for kind, count in f.skipped(needle).items():
            tally.line(shown(f.path), kind, count)
        if f.damaged is not None:
            tally.damaged(shown(f.path), f.damaged, f.whole)
    return tally.report()


def newest_poll(f: FileModel, polls: int = 1) -> tuple[list[Row], int]:
    """croft top's reading of one file: the rows of its newest complete poll (a torn last line's
    poll, being written, does not count) and the lines skipped on the way back to the `polls`-th
    poll before it (the torn line among them)."""
    lines = list(f.lines)
    skipped, being_written = 0, None
    if lines and lines[-1][1] == TORN:
        tail = lines.pop()[0]
        skipped += 1
        sniffed = re.match(rb'\s*\{\s*"unix_ms"\s*:\s*(\d+)\s*[,}]', tail)
        being_written = int(sniffed.group(1)) if sniffed else None
    rows: list[Row] = []
    earlier: list[int] = []
    for _, found in reversed(lines):
        if isinstance(found, str):
            skipped += 1
            continue
        if found.unix_ms == being_written:
            continue
        if earlier or (rows and found.unix_ms != rows[0].unix_ms):
            if not earlier or earlier[-1] != found.unix_ms:
                earlier.append(found.unix_ms)
            if len(earlier) >= polls:
                break
            continue
        rows.insert(0, found)
    return rows, skipped
