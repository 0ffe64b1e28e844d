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

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from croft.adapters.dataset.zstd_frames import ends_on_a_frame
from croft.domain.dataset.rotation import Naming
from croft.errors import UserError

PLAIN_READ_BYTES = 256 << 10  # bytes per read of a plain file (cache-sized)
ZSTD_READ_BYTES = 16 << 10  # compressed bytes per read of a zstd file (about 200 KB out, cache-sized)
ZSTD_BLOCK_BYTES = 1 << 20  # room for what one read decompresses to (more comes as further blocks)

_SEGMENT = re.compile(r"(?P<stem>.+)-\w{16}(?:_\d{3,})?\.jsonl(?:\.zst)?")
_DATA = (".jsonl", ".jsonl.zst")


@attrs.frozen
class DatasetFile:
    """One file of a dataset: where it is, which node wrote it, whether it is zstd, its size."""

    path: Path
    node: str
    compressed: bool
    size_bytes: int


@attrs.frozen
class Part:
    """A unit of reading: the lines of `file` that start in bytes [start, stop) (stop None: to the
    end as it is when read). Only plain files are split; a zstd segment is always one part."""

    file: DatasetFile
    start: int = 0
    stop: int | None = None


@attrs.frozen
class Torn:
    """The part ended with bytes after its last newline: a line still being written (or cut)."""


@attrs.frozen
class Damaged:
    """The rest of the file could not be read, for `reason`."""

    reason: str


def find_files(path: Path, host: str | None = None) -> tuple[DatasetFile, ...]:
    """The files of the dataset at `path`, node by node (nodes in name order), each node's in time
    order. Raises `UserError` when `path` does not exist or holds no dataset files."""
    host = host or socket.gethostname()
    if path.is_dir():
        own = _files_in(path, host)
        if own:
            return own
        nodes = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        found = tuple(f for node in nodes for f in _files_in(node, node.name))
        if found:
            return found
        raise UserError(
            f"{path} holds no dataset files (*.jsonl or *.jsonl.zst, or per-node directories of them); "
            "give a dataset file or directory"
        )
    if path.name.endswith(".jsonl") and path.parent.is_dir():
        heads = _files_in(path.parent, host, stem=path.name.removesuffix(".jsonl"))
        if any(f.path.name != path.name for f in heads):
            return heads
    if path.is_file():
        return (_file(path, host),)
    raise UserError(f"{path} does not exist; give a dataset file or directory, or set DATASET_PATH")


def _file(path: Path, node: str) -> DatasetFile:
    return DatasetFile(path, node, path.name.endswith(".zst"), path.stat().st_size)


def _files_in(directory: Path, node: str, stem: str | None = None) -> tuple[DatasetFile, ...]:
    """The dataset files directly in `directory` (only those of `stem` when given), sorted so
    that each stem's segments come in time order followed by its live file. When a segment is
    there both plain and compressed (a compression was just renamed into place), the plain one,
    the original, is read."""
    keyed: dict[tuple[str, int, str], Path] = {}
    for entry in directory.iterdir():
        name = entry.name
        if name.startswith(".") or not name.endswith(_DATA) or not entry.is_file():
            continue
        match = _SEGMENT.fullmatch(name)
        segment = match is not None and Naming(match["stem"]).parse(name) is not None
        own_stem = match["stem"] if match is not None and segment else name.split(".jsonl")[0]
        if stem is not None and own_stem != stem:
            continue
        base = name.removesuffix(".zst")
        key = (own_stem, 0 if segment else 1, base)
        if key not in keyed or not name.endswith(".zst"):
            keyed[key] = entry
    return tuple(_file(keyed[key], node) for key in sorted(keyed))


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
    part: Part, plain_bytes: int = PLAIN_READ_BYTES, zstd_bytes: int = ZSTD_BLOCK_BYTES
) -> Iterator[Lines | Torn | Damaged]:
    """The lines of `part`, in order, as `Lines` of about a block each, then `Torn` if bytes
    followed the last newline, then `Damaged` if the file could not be read to its end. A block is
    `plain_bytes` of a plain file or what one read of a zstd file decompresses to (at most
    `zstd_bytes`); memory stays
    within a few blocks whatever the file's size."""
    if part.file.compressed:
        blocks = _zstd_blocks(part.file.path, zstd_bytes)
    else:
        blocks = _plain_blocks(part, plain_bytes)
    carry = b""  # the start of a line that continues in the next block
    for block in blocks:
        if isinstance(block, Damaged):
            yield from _tail(carry)
            yield block
            return
        last = block.rfind(b"\n")
        if last < 0:
            carry += block
            continue
        start = 0
        if carry:
            start = block.find(b"\n") + 1
            seam = carry + block[:start]
            yield Lines(seam, 0, len(seam))
        if last + 1 > start:
            yield Lines(block, start, last + 1)
        carry = block[last + 1 :]
    yield from _tail(carry)


def _tail(carry: bytes) -> Iterator[Lines | Torn]:
    cut = carry.rfind(b"\n") + 1
    if cut:
        yield Lines(carry, 0, cut)
    if carry[cut:].strip():
        yield Torn()


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


def _zstd_blocks(path: Path, block_bytes: int) -> Iterator[bytes | Damaged]:
    import zstandard  # heavy for `croft --help`; only readers need it

    decompressor = zstandard.ZstdDecompressor()
    try:
        with path.open("rb") as f:
            # Concatenated frames are one stream (zstd -dc reads them so too). Each read1 decodes
            # one read of the file into a new block, with no output pieces to join; on damage,
            # what that read decoded is lost, and everything before it was yielded.
            reader = decompressor.stream_reader(f, read_size=ZSTD_READ_BYTES, read_across_frames=True)
            while block := reader.read1(block_bytes):
                yield block
            f.seek(0)
            if not ends_on_a_frame(f):  # the reader stops quietly where a cut frame ends
                yield Damaged("truncated zstd data (the file ends inside a frame)")
    except zstandard.ZstdError as exc:
        # zstandard words its prefix differently per API ("zstd decompress error: ..."); the
        # reason after it is zstd's own.
        yield Damaged(f"corrupt zstd data ({str(exc).rpartition(': ')[2]})")
    except OSError as exc:
        yield Damaged(f"cannot read it ({exc.strerror or exc})")
