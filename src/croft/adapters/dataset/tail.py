"""The end of a dataset, for croft top: the newest complete poll (and the 14 before it, where croft
top finds idle processes' latest rows, from the newest closed segment too when the live file was
rotated less than 15 polls ago), without reading the whole file.

The collector appends each poll as whole lines in one write, so the rows of the newest poll are the
last lines of the live file and share one `unix_ms`. `newest_poll` seeks back from the end in growing
blocks and decodes lines newest first until a row of an older poll shows the newest one is complete;
on a multi-GB file it reads a few blocks. A reader can meet a poll half written (a torn last line,
no newline yet): the torn line is skipped, and when its `unix_ms` shows it belongs to the newest
poll, that poll is not complete yet and the one before it is returned.

`read_newest` resolves what a user pointed at as every reader does (`files.find_files`), and shows
each node's newest poll: of its live file, else of its newest closed segment (a `.zst` one
decompressed as a stream, by the readers' one zstd reader). Lines are judged by the readers' one
definition of a row (`croft.domain.dataset.lines`); a line longer than a row can be is read past
(never held) and counted.
"""

from __future__ import annotations

import collections
import functools
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import attrs

from croft.adapters.dataset.files import Damaged, DatasetFile, find_files, shown, zstd_blocks
from croft.domain.dataset.lines import MAX_LINE_BYTES, last_line, verdict
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import TOO_LONG
from croft.domain.top.table import HELD_POLLS, NodePoll

LIVE_NAME = "croft-dataset.jsonl"
FIRST_BLOCK_BYTES = 64 << 10
MAX_BLOCK_BYTES = 8 << 20
MAX_BACK_BYTES = 256 << 20  # a poll of 250 000 processes; past this the file is not a dataset's
ZSTD_WINDOW_BYTES = 32 << 20
_TORN_MS = re.compile(rb'\s*\{\s*"unix_ms"\s*:\s*(\d+)\s*[,}]')


class SeekableBytes(Protocol):
    """The two calls the tail reader makes on an open binary file."""

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def read(self, size: int = -1, /) -> bytes: ...


@attrs.frozen
class PollTail:
    """The newest complete poll of one file. `rows` are in file order (empty when no complete poll
    was found); `skipped_lines` counts lines read that are not rows; `torn` is True when the file
    ends in a line still being written; `partial` when the poll's start was not in reach (it began
    more than `MAX_BACK_BYTES` back, or before a stream's kept window); `damaged` when a compressed
    segment stopped decompressing (truncated or corrupt) and the poll is the last one before that.
    `earlier` holds the rows of the polls before it that were asked for, in file order."""

    rows: tuple[Row, ...]
    skipped_lines: int = 0
    torn: bool = False
    partial: bool = False
    damaged: bool = False
    earlier: tuple[Row, ...] = ()


@attrs.frozen
class TopSnapshot:
    """What croft top shows: each node's newest complete poll (nodes with none are left out),
    lines skipped on the way, and notes for the header (a fallback to a closed segment, a node
    with no poll yet)."""

    polls: tuple[NodePoll, ...]
    skipped_lines: int
    notes: tuple[str, ...]


class NoDataset(Exception):
    """The path is a dataset file with nothing in it yet; the message says so."""


class _BackwardLines:
    """The lines of the bytes [0, size) of `f`, newest first, read in blocks that double from
    `first_block` up to `MAX_BLOCK_BYTES`; the first is what follows the last newline (b"" when
    the region ends with one). A line longer than `max_line` is given as `TOO_LONG`, read past
    without being held. `cut_short` is True when iteration stopped at `max_back` bytes (or at an
    origin that may fall inside a line) rather than at the start."""

    def __init__(
        self,
        f: SeekableBytes,
        size: int,
        first_block: int,
        max_back: int,
        origin_is_line_start: bool,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        self._f = f
        self._pos = size
        self._block = first_block
        self._stop = max(0, size - max_back)
        self._origin_is_line_start = origin_is_line_start
        self._max_line = max_line
        self.cut_short = False

    def _read_block(self) -> bytes:
        start = max(self._stop, self._pos - self._block)
        self._f.seek(start)
        want = self._pos - start
        parts = []
        while want > 0:
            part = self._f.read(want)
            if not part:  # the file shrank under us: what was read is all there is
                break
            parts.append(part)
            want -= len(part)
        self._pos = start
        self._block = min(self._block * 2, MAX_BLOCK_BYTES)
        return b"".join(parts)

    def __iter__(self) -> Iterator[bytes | str]:
        pieces: list[bytes] = []  # the line under way, its newest piece first
        held = 0
        while self._pos > self._stop:
            block = self._read_block()
            *older, newest = block.split(b"\n")
            held += len(newest)
            if held <= self._max_line:
                pieces.append(newest)
            if not older:
                continue  # the line goes on before this block
            yield self._line(pieces, held)
            yield from (line if len(line) <= self._max_line else TOO_LONG for line in reversed(older[1:]))
            pieces, held = [older[0]], len(older[0])
        if self._stop > 0 or not self._origin_is_line_start:
            self.cut_short = True  # the first line may have begun before what was read
            return
        yield self._line(pieces, held)

    def _line(self, pieces: list[bytes], held: int) -> bytes | str:
        return b"".join(reversed(pieces)) if held <= self._max_line else TOO_LONG


def _decodes(line: bytes | str) -> Row | str | None:
    """The row of `line`, else the kind of skip it is, or None for a blank line."""
    return line if isinstance(line, str) else verdict(line)


def newest_poll(
    f: SeekableBytes,
    size: int,
    *,
    first_block: int = FIRST_BLOCK_BYTES,
    max_back: int = MAX_BACK_BYTES,
    origin_is_line_start: bool = True,
    polls: int = 1,
) -> PollTail:
    """The newest complete poll among the first `size` bytes of `f`, reading back from the end.

    Reads about the poll's size plus one block, never the whole file unless the poll is that big
    (and never more than `max_back` bytes). Lines that are not rows are skipped and counted. An
    unterminated last line that is a whole row (a file written by hand) counts as a row; one that
    is not is torn, and a poll it belongs to is still being written, so skipped.
    `origin_is_line_start` is False when offset 0 of `f` may fall inside a line (a window kept
    from a stream). With `polls` > 1, the rows of up to `polls - 1` polls before the newest
    complete one come in `earlier` (croft top holds idle processes' rows from them)."""
    lines = _BackwardLines(f, size, first_block, max_back, origin_is_line_start)
    found = iter(lines)
    last = next(found, b"")
    judged = _decodes(last)
    torn_row = last_line(judged) if judged is not None else None
    torn = isinstance(torn_row, str)
    skipped = 1 if torn_row == TOO_LONG else 0
    being_written: int | None = None
    if torn and isinstance(last, bytes):
        sniffed = _TORN_MS.match(last)
        being_written = int(sniffed.group(1)) if sniffed else None
    rows: list[Row] = [torn_row] if isinstance(torn_row, Row) else []
    poll_ms = rows[0].unix_ms if rows else None
    complete = False
    earlier: list[Row] = []
    earlier_ms: int | None = None
    earlier_polls = 0
    for line in found:
        row = _decodes(line)
        if row is None:
            continue  # a blank line holds nothing
        if isinstance(row, str):
            skipped += 1
            continue
        if row.unix_ms == being_written:
            continue  # a row of the poll still being written
        if poll_ms is None:
            poll_ms = row.unix_ms
        elif complete or row.unix_ms != poll_ms:
            complete = True
            if row.unix_ms != earlier_ms:
                earlier_polls += 1
                earlier_ms = row.unix_ms
            if earlier_polls >= polls:
                break
            earlier.append(row)
            continue
        rows.append(row)
    rows.reverse()
    earlier.reverse()
    partial = bool(rows) and not complete and lines.cut_short
    torn_now = torn and torn_row != TOO_LONG
    return PollTail(tuple(rows), skipped, torn_now, partial, earlier=tuple(earlier))


def tail_zstd(path: Path, window_bytes: int = ZSTD_WINDOW_BYTES, polls: int = 1) -> PollTail:
    """The newest poll of a compressed segment: decompressed as a stream, keeping only the last
    `window_bytes` or so, then read back like a plain file. A truncated or corrupt segment gives
    the newest poll of what decompressed before the damage."""
    window: collections.deque[bytes] = collections.deque()
    kept = 0
    dropped_any = False
    damaged = False
    for block in zstd_blocks(path):
        if isinstance(block, Damaged):
            damaged = True
            break
        window.append(block)
        kept += len(block)
        while kept - len(window[0]) >= window_bytes:
            kept -= len(window.popleft())
            dropped_any = True
    data = b"".join(window)
    # Where damage cut the stream, the last line is torn, and its poll skipped as one being written.
    tail = newest_poll(io.BytesIO(data), len(data), origin_is_line_start=not dropped_any, polls=polls)
    return attrs.evolve(tail, damaged=damaged)


@functools.lru_cache(maxsize=8)
def _tail_zstd_once(path: Path, mtime_ns: int, size_bytes: int, polls: int) -> PollTail:
    # A closed segment does not change: croft top's refreshes decompress it once.
    return tail_zstd(path, polls=polls)


def tail_file(path: Path, polls: int = HELD_POLLS) -> PollTail:
    """The newest complete poll of one dataset file, plain or `.zst`, and up to `polls - 1`
    polls before it."""
    if path.name.endswith(".zst"):
        stat = path.stat()
        return _tail_zstd_once(path, stat.st_mtime_ns, stat.st_size, polls)
    with path.open("rb") as f:
        return tail_open(f, polls)


def tail_open(f: BinaryIO, polls: int = 1) -> PollTail:
    """The newest complete poll of an open plain file, read from its current end."""
    size = f.seek(0, io.SEEK_END)
    return newest_poll(f, size, polls=polls)


def _tail_node(files: list[DatasetFile]) -> tuple[PollTail, str | None]:
    """The newest poll of one node's files (in reading order): its live file's; without a live
    file, or with one that has no complete poll (just rotated), its newest closed segment's, with
    a note saying so."""
    last = files[-1]
    if last.problem is not None:
        return PollTail(()), f"skipped {shown(last.path)}: {last.problem}"
    live = None if last.segment else last
    tail = tail_file(live.path) if live is not None else PollTail(())
    segments = [f for f in files if f.segment and f.problem is None]
    if tail.rows:
        return _held_across(tail, segments[-1].path) if segments else tail, None
    if not segments:
        return tail, None
    segment = segments[-1].path
    why = "the live file has no complete poll" if live is not None else "no live file"
    how = " (decompressed whole)" if segment.name.endswith(".zst") else ""
    return tail_file(segment), f"{why}: showing closed segment {segment.name}{how}"


def _held_across(tail: PollTail, segment: Path) -> PollTail:
    """`tail` of a live file that holds fewer than `HELD_POLLS` polls (rotated not long ago), its
    `earlier` rows begun with those of the newest polls of the newest closed `segment`, so that an
    idle process whose latest row went into the segment is still held."""
    polls = 1 + len({row.unix_ms for row in tail.earlier})
    if polls >= HELD_POLLS:
        return tail
    before = tail_file(segment)
    rows = (*before.earlier, *before.rows)
    kept = sorted({row.unix_ms for row in rows})[-(HELD_POLLS - polls) :]
    older = tuple(row for row in rows if row.unix_ms >= kept[0]) if kept else ()
    return attrs.evolve(
        tail, earlier=older + tail.earlier, skipped_lines=tail.skipped_lines + before.skipped_lines
    )


def read_newest(path: Path, local_node: str) -> TopSnapshot:
    """The newest poll of each node under `path` (any path `files.find_files` takes), named by its
    rows' `node` key, as every reader names them; only rows of older collectors, without one, are
    named by their per-node directory, or, in a single file or dataset directory, `local_node`.
    Raises `UserError` when `path` holds no dataset, and `NoDataset` when it is a dataset file that
    is empty."""
    files = find_files(path, local_node)
    if len(files) == 1 and files[0].path == path and files[0].size_bytes == 0 and files[0].problem is None:
        raise NoDataset(f"{shown(path)} is empty: no poll has been written yet")
    nodes: dict[str, list[DatasetFile]] = {}
    for f in files:
        nodes.setdefault(f.node, []).append(f)
    return _snapshot([(node, *_tail_node(node_files)) for node, node_files in nodes.items()])


def _snapshot(tails: list[tuple[str, PollTail, str | None]]) -> TopSnapshot:
    polls = []
    notes = []
    for node, tail, note in tails:
        label = f"{node}: " if len(tails) > 1 else ""
        if note:
            notes.append(label + note)
        if tail.damaged:
            notes.append(
                label + "the segment is damaged (truncated or corrupt): showing its last poll before that"
            )
        if tail.partial:
            notes.append(label + "the newest poll began beyond what was read; showing its newest rows")
        if tail.rows:
            newest = tail.rows[-1]
            polls.append(NodePoll(newest.node or node, newest.unix_ms, tail.rows, tail.earlier))
        elif len(tails) > 1:
            notes.append(label + "no complete poll yet")
    return TopSnapshot(tuple(polls), sum(t.skipped_lines for _, t, _ in tails), tuple(notes))
