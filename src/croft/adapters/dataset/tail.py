"""The end of a dataset, for croft top: the newest complete poll (and the 14 before it, where croft
top finds idle processes' latest rows), without reading the whole file.

The collector appends each poll as whole lines in one write, so the rows of the newest poll are the
last lines of the live file and share one `unix_ms`. `newest_poll` seeks back from the end in growing
blocks and decodes lines newest first until a row of an older poll shows the newest one is complete;
on a multi-GB file it reads a few blocks. A reader can meet a poll half written (a torn last line,
no newline yet): the torn line is skipped, and when its `unix_ms` shows it belongs to the newest
poll, that poll is not complete yet and the one before it is returned.

`read_newest` resolves what a user pointed at: a `.jsonl` file; a dataset directory (its live file
`croft-dataset.jsonl`, else its newest closed segment, a `.zst` one decompressed as a stream); or a
directory of per-node directories (the newest poll of each node, named after its directory).
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

from croft.domain.dataset.codec import decode_row
from croft.domain.dataset.rotation import Naming, SegmentName
from croft.domain.dataset.row import Row
from croft.domain.top.table import HELD_POLLS, NodePoll

LIVE_NAME = "croft-dataset.jsonl"
FIRST_BLOCK_BYTES = 64 << 10
MAX_BLOCK_BYTES = 8 << 20
MAX_BACK_BYTES = 256 << 20  # a poll of 250 000 processes; past this the file is not a dataset's
ZSTD_WINDOW_BYTES = 32 << 20
ZSTD_INPUT_BYTES = 16 << 10
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
    """The path holds no dataset at all (missing, empty, or no dataset files); the message says
    which and how to point croft at one."""


class _BackwardLines:
    """The lines of the bytes [0, size) of `f`, newest first, read in blocks that double from
    `first_block` up to `MAX_BLOCK_BYTES`. `find_end` must run first: it reads back to the last
    newline and keeps what follows it in `torn`. `cut_short` is True when iteration stopped at
    `max_back` bytes (or at an origin that may fall inside a line) rather than at the start."""

    def __init__(
        self, f: SeekableBytes, size: int, first_block: int, max_back: int, origin_is_line_start: bool
    ) -> None:
        self._f = f
        self._pos = size
        self._block = first_block
        self._stop = max(0, size - max_back)
        self._origin_is_line_start = origin_is_line_start
        self._carry = b""
        self.torn = b""
        self.cut_short = False

    def _at_origin(self) -> bool:
        return self._pos <= self._stop

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

    def find_end(self) -> None:
        """Read back to the last newline; the bytes after it (a line still being written, or the
        whole region when it has no newline) become `torn`."""
        data = b""
        while not self._at_origin():
            data = self._read_block() + data
            if b"\n" in data:
                break
        last_newline = data.rfind(b"\n")
        self.torn = data[last_newline + 1 :]
        self._carry = data[: last_newline + 1]

    def __iter__(self) -> Iterator[bytes]:
        data = self._carry
        while True:
            if self._at_origin():
                if self._stop > 0 or not self._origin_is_line_start:
                    self.cut_short = True
                    data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
                yield from reversed(data.splitlines())
                return
            first_newline = data.find(b"\n")
            if first_newline >= 0:
                # the first line may have begun before this block: completed by the next one
                yield from reversed(data[first_newline + 1 :].splitlines())
                data = data[: first_newline + 1]
            data = self._read_block() + data


def _decodes(line: bytes) -> Row | None:
    try:
        return decode_row(line)
    except ValueError:  # orjson.JSONDecodeError and NotARow are both ValueErrors
        return None


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
    (and never more than `max_back` bytes). Lines that do not decode as rows are skipped and
    counted. An unterminated last line that is a whole row (a file written by hand) counts as a
    line; one that is not is torn, and a poll it belongs to is still being written, so skipped.
    `origin_is_line_start` is False when offset 0 of `f` may fall inside a line (a window kept
    from a stream). With `polls` > 1, the rows of up to `polls - 1` polls before the newest
    complete one come in `earlier` (croft top holds idle processes' rows from them)."""
    lines = _BackwardLines(f, size, first_block, max_back, origin_is_line_start)
    lines.find_end()
    torn = lines.torn.strip()
    torn_row = _decodes(torn) if torn else None
    being_written: int | None = None
    if torn and torn_row is None:
        sniffed = _TORN_MS.match(torn)
        being_written = int(sniffed.group(1)) if sniffed else None
    rows: list[Row] = [torn_row] if torn_row is not None else []
    poll_ms = torn_row.unix_ms if torn_row is not None else None
    skipped = 0
    complete = False
    earlier: list[Row] = []
    earlier_ms: int | None = None
    earlier_polls = 0
    for line in lines:
        row = _decodes(line)
        if row is None:
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
    return PollTail(tuple(rows), skipped, bool(torn) and torn_row is None, partial, earlier=tuple(earlier))


def tail_zstd(path: Path, window_bytes: int = ZSTD_WINDOW_BYTES, polls: int = 1) -> PollTail:
    """The newest poll of a compressed segment: decompressed as a stream, keeping only the last
    `window_bytes` or so, then read back like a plain file. A truncated or corrupt segment gives
    the newest poll of what decompressed before the damage."""
    window: collections.deque[bytes] = collections.deque()
    kept = 0
    dropped_any = False
    for chunk in _decompressed(path):
        if chunk is None:
            damaged = True
            break
        window.append(chunk)
        kept += len(chunk)
        while kept - len(window[0]) >= window_bytes:
            kept -= len(window.popleft())
            dropped_any = True
    else:
        damaged = False
    data = b"".join(window)
    # Where damage cut the stream, the last line is torn, and its poll skipped as one being written.
    tail = newest_poll(io.BytesIO(data), len(data), origin_is_line_start=not dropped_any, polls=polls)
    return attrs.evolve(tail, damaged=damaged)


def _decompressed(path: Path) -> Iterator[bytes | None]:
    """The decompressed bytes of every zstd frame of `path` in pieces; a last None when the file
    is damaged: a corrupt block, or a frame cut short (a truncated file ends mid-frame). Input goes
    in small pieces, so a corrupt block loses little of what decompressed before it."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    frame = dctx.decompressobj()
    in_frame = False
    with path.open("rb") as raw:
        while packed := raw.read(ZSTD_INPUT_BYTES):
            while packed:
                try:
                    out = frame.decompress(packed)
                except zstandard.ZstdError:
                    yield None
                    return
                in_frame = True
                if out:
                    yield out
                if not frame.eof:
                    break
                packed = frame.unused_data  # a next frame begins in this piece
                frame = dctx.decompressobj()
                in_frame = False
    if in_frame:
        yield None


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


def is_dataset_dir(directory: Path) -> bool:
    """Whether `directory` holds a live file or closed segments of a `croft-dataset` dataset."""
    naming = Naming.for_live(LIVE_NAME)
    return any(
        entry.name == LIVE_NAME or (naming.parse(entry.name) or (None, ""))[1] in ("plain", "compressed")
        for entry in directory.iterdir()
        if entry.is_file()
    )


def newest_segment(directory: Path) -> Path | None:
    """The newest closed segment of a dataset directory; of a segment both plain and compressed
    (compression under way), the plain file, which is complete."""
    naming = Naming.for_live(LIVE_NAME)
    found: dict[SegmentName, dict[str, Path]] = {}
    for entry in directory.iterdir():
        parsed = naming.parse(entry.name)
        if parsed is not None and parsed[1] in ("plain", "compressed") and entry.is_file():
            found.setdefault(parsed[0], {})[parsed[1]] = entry
    if not found:
        return None
    kinds = found[max(found)]  # SegmentName orders by time
    return kinds.get("plain") or kinds["compressed"]


def _tail_dataset_dir(directory: Path) -> tuple[PollTail, str | None]:
    """The live file's newest poll; without a live file, or with one that has no complete poll
    (just rotated), the newest closed segment's, with a note saying so."""
    live = directory / LIVE_NAME
    tail = tail_file(live) if live.is_file() else PollTail(())
    if tail.rows:
        return tail, None
    segment = newest_segment(directory)
    if segment is None:
        return tail, None
    why = "the live file has no complete poll" if live.is_file() else "no live file"
    how = " (decompressed whole)" if segment.name.endswith(".zst") else ""
    return tail_file(segment), f"{why}: showing closed segment {segment.name}{how}"


def read_newest(path: Path, local_node: str) -> TopSnapshot:
    """The newest poll of each node under `path` (see the module docstring for what a path may
    be). A single file or dataset directory is node `local_node`. Raises `NoDataset` when `path`
    is missing, is an empty file, or is a directory with no dataset files."""
    if path.is_file():
        if path.stat().st_size == 0:
            raise NoDataset(f"{path} is empty: no poll has been written yet")
        return _snapshot([(local_node, tail_file(path), None)])
    if not path.is_dir():
        raise NoDataset(f"{path} does not exist")
    if is_dataset_dir(path):
        tail, note = _tail_dataset_dir(path)
        return _snapshot([(local_node, tail, note)])
    nodes = sorted(entry for entry in path.iterdir() if entry.is_dir() and is_dataset_dir(entry))
    if not nodes:
        raise NoDataset(
            f"{path} holds no {LIVE_NAME}, no closed segments and no per-node directories of them"
        )
    return _snapshot([(node.name, *_tail_dataset_dir(node)) for node in nodes])


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
            polls.append(NodePoll(node, tail.rows[-1].unix_ms, tail.rows, tail.earlier))
        elif len(tails) > 1:
            notes.append(label + "no complete poll yet")
    return TopSnapshot(tuple(polls), sum(t.skipped_lines for _, t, _ in tails), tuple(notes))
