"""The files of a dataset path, and their bytes as buffers of whole lines.

A path is one of:

- a plain `.jsonl` file or a `.jsonl.zst` segment;
- a live file `<stem>.jsonl` next to its segments: the whole dataset it heads (so the default
  path, the collector's live file, means the collector's dataset; segments alone are read when the
  live file is momentarily missing);
- a dataset directory: segments `<stem>-<UTC start>[_NNN].jsonl[.zst]` in name (= time) order, then
  the live file `<stem>.jsonl`; hidden files (compressions in progress) are not part of it;
- a directory of per-node dataset directories, `<dir>/<node>/...`.

The node of a file is its per-node directory's name, or `host` for a single local dataset.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import attrs
import msgspec

from croft.adapters.dataset.zstd_frames import ends_on_a_frame
from croft.domain.dataset.naming import Naming
from croft.domain.dataset.skips import JSON_WHITESPACE, MAX_LINE_BYTES, TOO_LONG, SkipTally
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.domain.dataset.row import Row

PLAIN_READ_BYTES = 256 << 10  # bytes per read of a plain file (cache-sized)
ZSTD_READ_BYTES = 16 << 10  # compressed bytes per read of a zstd file (about 200 KB out)
ZSTD_BLOCK_BYTES = 1 << 20  # room for what one read decompresses to (more comes as further reads)
# A reader's block of a zstd file holds what whole reads decode until it has this much (about four
# reads): fewer, larger blocks cost a reader less per byte (fewer calls, seams and per-block set
# additions: croft stats about 9% less CPU a segment), while what a damaged file yields stays what
# each read decoded before the damage.
ZSTD_FILL_BYTES = 768 << 10

_SEGMENT = re.compile(r"(?P<stem>.+)-\w{16}(?:_\d{3,})?\.jsonl(?:\.zst)?")
_DATA = (".jsonl", ".jsonl.zst")


@attrs.frozen
class DatasetFile:
    """One file of a dataset: where it is, which node wrote it, whether it is zstd, its size."""

    path: Path
    node: str
    compressed: bool
    size_bytes: int
    problem: str | None = None  # why it cannot be read at all (a FIFO, a node directory not listable)
    segment: bool = False  # a closed segment, not a live file
    # device, inode, size, mtime and ctime (ns) when it was listed; None: not taken
    facts: tuple[int, int, int, int, int] | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Part:
    """A unit of reading: the lines of `file` that start in bytes [start, stop) (stop None: to the
    end as it is when read). Only plain files are split; a zstd segment is always one part."""

    file: DatasetFile
    start: int = 0
    stop: int | None = None


@attrs.frozen
class Torn:
    """The part ended with bytes after its last newline: `line`, a line still being written (or
    cut), or a last line written without its newline; never blank, never too long."""

    line: bytes


@attrs.frozen
class TooLong:
    """A line longer than the longest a row may be (`skips.MAX_LINE_BYTES`), read past and dropped."""


@attrs.frozen
class Damaged:
    """The rest of the file could not be read, for `reason`; `whole` when none of it could."""

    reason: str
    whole: bool = False


def find_files(path: Path, host: str | None = None) -> tuple[DatasetFile, ...]:
    """The files of the dataset at `path`, node by node (nodes in name order), each node's in time
    order. A file or node directory that cannot be read is listed with its `problem`. Raises
    `UserError` when `path` is not there, is not a file or directory, cannot be listed, or holds no
    dataset files."""
    host = host or os.uname().nodename  # socket.gethostname()'s answer, without importing socket
    kind = _kind_of(path)
    if kind == "directory":
        own = _files_in(path, host)
        if isinstance(own, str):
            raise UserError(f"{shown(path)}: {own}; give a dataset file or directory that you can read")
        if own:
            return own
        found = tuple(f for node in _node_dirs(path) for f in _node_files(node))
        if found:
            return found
        raise UserError(
            f"{shown(path)} holds no dataset files (*.jsonl or *.jsonl.zst, or per-node directories of "
            "them); give a dataset file or directory"
        )
    if path.name.endswith(".jsonl") and kind in ("missing", "file") and _kind_of(path.parent) == "directory":
        heads = _files_in(path.parent, host, stem=path.name.removesuffix(".jsonl"))
        if not isinstance(heads, str) and any(f.path.name != path.name for f in heads):
            return heads
    if kind == "file":
        return (_file(path, host),)
    if kind == "missing":
        raise UserError(
            f"{shown(path)} does not exist; give a dataset file or directory, or set DATASET_PATH"
        )
    raise UserError(f"{shown(path)} {kind}; give a dataset file or directory")


def first_row_ms(path: Path) -> int | None:
    """`unix_ms` of the first line of the plain file `path`, or None when it is not a readable row
    (the dataset writer's rotation and croft collect's saved copies name files by it)."""
    try:
        with path.open("rb") as f:
            line = f.read(MAX_LINE_BYTES).split(b"\n", 1)[0]
        value = msgspec.json.decode(line).get("unix_ms")
    except (OSError, ValueError, AttributeError):
        return None
    return value if type(value) is int else None


def shown(path: Path | str) -> str:
    """`path` as text that prints anywhere: bytes that are not UTF-8 as backslash escapes."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _kind_of(path: Path) -> str:
    """ "file", "directory", "missing", or what else `path` is, as the end of a sentence."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "is a dangling symlink" if path.is_symlink() else "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        if exc.errno == errno.ENOTDIR:
            return "missing"
        return f"cannot be reached ({exc.strerror or exc})"
    return _mode_kind(mode)


def _mode_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a dataset file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a dataset file"
    return "is a device, not a dataset file"


def _node_dirs(path: Path) -> list[Path]:
    """The per-node directories in `path` (hidden ones are not nodes), in name order."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        why = exc.strerror or exc
        raise UserError(f"cannot list {shown(path)} ({why}); give a dataset you can read") from None
    return [
        Path(e.path) for e in entries if not e.name.startswith(".") and _kind_of(Path(e.path)) == "directory"
    ]


def _node_files(directory: Path) -> tuple[DatasetFile, ...]:
    node = shown(directory.name)  # a name that is not UTF-8 is still a node, with its bytes escaped
    files = _files_in(directory, node)
    if isinstance(files, str):
        return (DatasetFile(directory, node, False, 0, problem=files),)
    return files


def _file(path: Path, node: str) -> DatasetFile:
    try:
        size = path.stat().st_size
    except OSError as exc:
        return DatasetFile(path, node, path.name.endswith(".zst"), 0, problem=_cannot_read(exc))
    return DatasetFile(path, node, path.name.endswith(".zst"), size)


def _cannot_read(exc: OSError) -> str:
    return f"cannot read it ({exc.strerror or exc})"


def _files_in(directory: Path, node: str, stem: str | None = None) -> tuple[DatasetFile, ...] | str:
    """The dataset files directly in `directory` (only those of `stem` when given), sorted so
    that each stem's segments come in time order followed by its live file; or why the
    directory cannot be listed. When a segment is there both plain and compressed (a compression
    was just renamed into place), the plain one, the original, is read. An entry with a dataset
    file's name that is not a regular file is listed with its problem."""
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        return f"cannot list its files ({exc.strerror or exc})"
    keyed: dict[tuple[str, int, str], DatasetFile] = {}
    namings: dict[str, Naming] = {}
    for entry in entries:
        name = entry.name
        if name.startswith(".") or not name.endswith(_DATA):
            continue
        path = directory / name
        try:
            facts = (
                path.stat()
            )  # one stat: the kind, the size, and the identity the summaries' memories key on
        except OSError:
            facts = None
        kind = _kind_of(path) if facts is None else _mode_kind(facts.st_mode)
        if kind == "missing":  # gone since the listing (retention, a rename into place)
            continue
        match = _SEGMENT.fullmatch(name)
        if match is not None:
            naming = namings.get(match["stem"]) or namings.setdefault(match["stem"], Naming(match["stem"]))
        segment = match is not None and naming.parse(name) is not None
        own_stem = match["stem"] if match is not None and segment else name.split(".jsonl")[0]
        if stem is not None and own_stem != stem:
            continue
        key = (own_stem, 0 if segment else 1, name.removesuffix(".zst"))
        if key in keyed and name.endswith(".zst"):
            continue
        compressed = name.endswith(".zst")
        if kind == "file" and facts is not None:
            keyed[key] = DatasetFile(
                path, node, compressed, facts.st_size, segment=segment, facts=_identity(facts)
            )
        elif kind == "file":
            keyed[key] = attrs.evolve(_file(path, node), segment=segment)
        else:
            problem = "it is a directory, not a dataset file" if kind == "directory" else f"it {kind}"
            keyed[key] = DatasetFile(path, node, compressed, 0, problem=problem)
    return tuple(keyed[key] for key in sorted(keyed))


def _identity(facts: os.stat_result) -> tuple[int, int, int, int, int]:
    return (facts.st_dev, facts.st_ino, facts.st_size, facts.st_mtime_ns, facts.st_ctime_ns)


def split(files: tuple[DatasetFile, ...], part_bytes: int) -> tuple[Part, ...]:
    """Parts of at most about `part_bytes` for plain files, one part per zstd file, largest first
    (so that a pool of workers finishes together)."""
    parts: list[Part] = []
    for f in files:
        if f.compressed or f.size_bytes <= part_bytes:
            parts.append(Part(f))
            continue
        starts = range(0, f.size_bytes, part_bytes)
        parts.extend(
            Part(f, start, start + part_bytes if start + part_bytes < f.size_bytes else None)
            for start in starts
        )
    return tuple(sorted(parts, key=work_bytes, reverse=True))


# A zstd segment's size times this estimates its lines' size, to split work evenly; benchmarks/rotation.py
# measures 12.4x (the recorded fixture) to 14.6x (generated realistic rows) at level 3.
ZSTD_RATIO = 13


def work_bytes(part: Part) -> int:
    """About how many bytes of lines `part` holds (a zstd part's compressed size times ZSTD_RATIO)."""
    end = part.file.size_bytes if part.stop is None else part.stop
    return (end - part.start) * (ZSTD_RATIO if part.file.compressed else 1)


@attrs.frozen
class Lines:
    """Whole lines, each ending with a newline: `data[start:stop]` (kept as offsets into the block
    they were read in, so that no buffer is copied)."""

    data: bytes
    start: int
    stop: int

    def view(self) -> memoryview:
        return memoryview(self.data)[self.start : self.stop]


def read_part(
    part: Part,
    plain_bytes: int = PLAIN_READ_BYTES,
    zstd_bytes: int = ZSTD_BLOCK_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    zstd_fill: int = ZSTD_FILL_BYTES,
) -> Iterator[Lines | TooLong | Torn | Damaged]:
    """The lines of `part`, in order, as `Lines` of about a block each (a line longer than
    `max_line_bytes` as `TooLong` in its place), then `Torn` if bytes other than whitespace
    followed the last newline, then `Damaged` if the file could not be read to its end. A block is
    `plain_bytes` of a plain file (at most `max_line_bytes`) or what whole reads of a zstd file
    decompress to, at least `zstd_fill` bytes where the file holds them (`zstd_blocks`: each read's
    at most `zstd_bytes`). Time is linear in the part's size and memory stays within a few blocks
    and one line, whatever the file holds."""
    if part.file.problem is not None:
        yield Damaged(part.file.problem, whole=True)
        return
    if part.file.compressed:
        blocks = zstd_blocks(part.file.path, min(zstd_bytes, max_line_bytes), zstd_fill)
    else:
        blocks = _plain_blocks(part, min(plain_bytes, max_line_bytes))
    carry: list[bytes] = []  # the start of a line that continues in the next block
    carried = 0
    too_long = False  # the line under way is longer than max_line_bytes: read past, not kept
    for block in blocks:
        if isinstance(block, Damaged):
            yield from _tail(carry, too_long)
            yield block
            return
        first = block.find(b"\n")
        if first < 0:
            carried += len(block)
            if carried > max_line_bytes:
                too_long, carry = True, []
            elif not too_long:
                carry.append(block)
            continue
        start = 0
        if too_long or carried + first > max_line_bytes:
            yield TooLong()
            start = first + 1
        elif carry:
            carry.append(block[: first + 1])
            seam = b"".join(carry)
            yield Lines(seam, 0, len(seam))
            start = first + 1
        last = block.rfind(b"\n")
        if last - start > max_line_bytes:  # a line inside may be too long (a block of several reads)
            yield from _within(block, start, last + 1, max_line_bytes)
        elif last + 1 > start:
            yield Lines(block, start, last + 1)  # no line longer than max_line_bytes
        rest = block[last + 1 :]
        carried, too_long = len(rest), len(rest) > max_line_bytes
        carry = [rest] if rest and not too_long else []
    yield from _tail(carry, too_long)


def lines_of(part: Part, skips: SkipTally) -> Iterator[Lines | Torn]:
    """`read_part(part)` for a reader: too-long lines and damage counted in `skips`, under the
    file's name; the `Lines` and `Torn` left for the reader to judge (`croft.domain.dataset.lines`)."""
    name = shown(part.file.path)
    for item in read_part(part):
        if isinstance(item, TooLong):
            skips.line(name, TOO_LONG)
        elif isinstance(item, Damaged):
            skips.damaged(name, item.reason, item.whole)
        else:
            yield item


def row_batches(part: Part, skips: SkipTally, plain_bytes: int = PLAIN_READ_BYTES) -> Iterator[list[Row]]:
    """The rows of `part`, a block at a time, judged by the one rule (`croft.domain.dataset.lines`);
    every line skipped and the damage counted in `skips` under the file's name, the lines by kind
    once the part is read (`plain_bytes`: `read_part`'s)."""
    from croft.domain.dataset.lines import decode_block, last_line, verdict

    name = shown(part.file.path)
    skipped = Counter[str]()
    for item in read_part(part, plain_bytes=plain_bytes):
        if isinstance(item, TooLong):
            skips.line(name, TOO_LONG)
        elif isinstance(item, Damaged):
            skips.damaged(name, item.reason, item.whole)
        elif isinstance(item, Lines):
            yield decode_block(item.data, item.start, item.stop, skipped)
        else:
            found = last_line(verdict(item.line))
            if isinstance(found, str):
                skipped[found] += 1
            else:
                yield [found]
    for kind, count in skipped.items():
        skips.line(name, kind, count)


def _within(block: bytes, start: int, stop: int, max_line_bytes: int) -> Iterator[Lines | TooLong]:
    """The whole lines `block[start:stop]` as `Lines`, each one longer than `max_line_bytes` a
    `TooLong` in its place: a window of max_line_bytes + 1 bytes from a line's start that holds
    a newline ends that line and every one starting before that newline within the limit."""
    kept = at = start
    while stop - at > max_line_bytes + 1:
        newline = block.rfind(b"\n", at, at + max_line_bytes + 1)
        if newline >= 0:
            at = newline + 1
            continue
        if at > kept:
            yield Lines(block, kept, at)
        yield TooLong()
        kept = at = block.index(b"\n", at) + 1
    if stop > kept:
        yield Lines(block, kept, stop)


def _tail(carry: list[bytes], too_long: bool) -> Iterator[TooLong | Torn]:
    if too_long:
        yield TooLong()
        return
    line = b"".join(carry)
    if line.strip(JSON_WHITESPACE):
        yield Torn(line)


def _plain_blocks(part: Part, block_bytes: int) -> Iterator[bytes | Damaged]:
    try:
        with part.file.path.open("rb") as f:
            yield from _range_blocks(f, part.start, part.stop, block_bytes)
    except OSError as exc:
        yield Damaged(f"cannot read it ({exc.strerror or exc})")


def _range_blocks(f: BinaryIO, start: int, stop: int | None, block_bytes: int) -> Iterator[bytes]:
    """Blocks holding exactly the lines that start in [start, stop): a line that began before
    `start` belongs to the part before, the line that straddles `stop` to this one."""
    if start > 0:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            while block := f.read(block_bytes):
                newline = block.find(b"\n")
                if newline >= 0:
                    start += newline + 1
                    break
                start += len(block)
            f.seek(start)
    if stop is not None and start >= stop:
        return  # every line starting in [start, stop) began before it
    position = start
    while block := f.read(block_bytes):
        if stop is not None and position + len(block) >= stop:
            newline = block.find(b"\n", max(stop - 1 - position, 0))
            if newline >= 0:
                yield block[: newline + 1]
                return
            yield block
            position += len(block)
            stop = position + 1  # keep going until the straddling line's newline
            continue
        yield block
        position += len(block)


def zstd_blocks(
    path: Path, block_bytes: int = ZSTD_BLOCK_BYTES, fill_bytes: int = 0
) -> Iterator[bytes | Damaged]:
    """The decompressed content of the zstd file `path` (every frame), then `Damaged` if the file
    is truncated (as `zstd -t` finds: an empty file is too), corrupt or unreadable; everything
    decoded before the damage comes first. Each read of the file decodes to at most `block_bytes`
    (more comes as further reads); a block is what one read decoded or, with `fill_bytes`, what
    reads decoded until they make that many bytes (the last block may have fewer)."""
    import zstandard  # heavy for `croft --help`; only readers need it

    decompressor = zstandard.ZstdDecompressor()
    pieces: list[bytes] = []  # what the reads decoded since the last block
    try:
        with path.open("rb") as f:
            # Concatenated frames are one stream (zstd -dc reads them so too). Each read1 decodes
            # one read of the file; on damage, what that read decoded is lost, and what the reads
            # before it decoded comes first, whatever the blocks.
            reader = decompressor.stream_reader(f, read_size=ZSTD_READ_BYTES, read_across_frames=True)
            held = 0
            while piece := reader.read1(block_bytes):
                pieces.append(piece)
                held += len(piece)
                if held >= fill_bytes:
                    yield b"".join(pieces)
                    pieces, held = [], 0
            yield from _joined(pieces)
            if f.seek(0, os.SEEK_END) == 0:
                yield Damaged("truncated zstd data (the file is empty)")
                return
            f.seek(0)
            if not ends_on_a_frame(f):  # the reader stops quietly where a cut frame ends
                yield Damaged("truncated zstd data (the file ends inside a frame)")
    except zstandard.ZstdError as exc:
        yield from _joined(pieces)
        # zstandard words its prefix differently per API ("zstd decompress error: ..."); the
        # reason after it is zstd's own.
        yield Damaged(f"corrupt zstd data ({str(exc).rpartition(': ')[2]})")
    except OSError as exc:
        yield from _joined(pieces)
        yield Damaged(f"cannot read it ({exc.strerror or exc})")


def _joined(pieces: list[bytes]) -> Iterator[bytes]:
    """The pieces as one block, none when there are none; they are given up."""
    if pieces:
        block = b"".join(pieces)
        pieces.clear()
        yield block
