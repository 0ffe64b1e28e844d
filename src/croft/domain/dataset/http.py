"""The collector's read-only dataset endpoint, as pure decisions: which names it serves, what an
HTTP Range asks for, and the index it lists.

The endpoint serves one directory's own dataset files and nothing else: the live file and the closed
segments (plain or compressed) of its naming. A name is looked up, never joined as a path: anything
with a slash, a leading dot (temporaries such as `.croft-dataset-….jsonl.zst.tmp`), a NUL or
another stem is not a dataset file and is answered 404, so `..`, absolute paths and encoded slashes
cannot reach outside the directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs
import msgspec

from croft.domain.dataset.naming import Naming

INDEX_VERSION = 1
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def is_safe_name(name: str) -> bool:
    """A plain file or node name: ASCII letters, digits, `.`, `_`, `-`; not starting with a dot or a
    dash; at most 255 characters; no `..`. Such a name is one path component and never leaves the
    directory it is joined to."""
    return _SAFE.fullmatch(name) is not None and ".." not in name


def is_served(name: str, naming: Naming) -> bool:
    """Whether the endpoint serves `name`: the live file or a plain or compressed segment."""
    if not is_safe_name(name):
        return False
    if name == naming.live:
        return True
    parsed = naming.parse(name)
    return parsed is not None and parsed[1] in ("plain", "compressed")


@attrs.frozen
class ByteRange:
    """Bytes `start` up to and including `end` of a file (both >= 0, start <= end)."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size_bytes: int) -> str:
        return f"bytes {self.start}-{self.end}/{size_bytes}"


@attrs.frozen
class Unsatisfiable:
    """A Range no byte of the file satisfies: answered 416 with `bytes */<size>`."""


def parse_range(header: str | None, size_bytes: int) -> ByteRange | Unsatisfiable | None:
    """What a `Range` header asks of a file of `size_bytes` (RFC 9110 §14): None for the whole file
    (no header, a unit other than bytes, several ranges or a malformed one, which a server may
    ignore); a `ByteRange` clipped to the file; `Unsatisfiable` when it starts at or past the end.
    `bytes=a-b`, `bytes=a-` and the suffix form `bytes=-n` are understood."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # the last n bytes
        suffix = _offset(last)
        if suffix == 0 or size_bytes == 0:
            return Unsatisfiable()
        return ByteRange(max(size_bytes - suffix, 0), size_bytes - 1)
    start = _offset(first)
    if last and _offset(last) < start:
        return None  # invalid: ignored, the whole file
    if start >= size_bytes:
        return Unsatisfiable()
    return ByteRange(start, min(_offset(last), size_bytes - 1) if last else size_bytes - 1)


_BEYOND_ANY_FILE = 1 << 64


def _offset(digits: str) -> int:
    """A byte offset of a Range header; one of more than 19 digits is past any file (and is not
    converted: Python refuses to turn more than 4300 digits into an int)."""
    stripped = digits.lstrip("0") or "0"
    return int(stripped) if len(stripped) <= 19 else _BEYOND_ANY_FILE


@attrs.frozen
class IndexEntry:
    """One served file: its name, size in bytes and mtime in unix ms, as the collector saw them."""

    name: str
    size_bytes: int
    mtime_ms: int


@attrs.frozen
class Index:
    """The endpoint's listing: the live file's name (which names the dataset's segments too) and the
    served files in name order (time order for segments)."""

    live: str
    files: tuple[IndexEntry, ...]

    @property
    def naming(self) -> Naming:
        return Naming.for_live(self.live)


def make_index(live: str, entries: Iterable[IndexEntry]) -> Index:
    """The index of the served ones among `entries` (a directory listing)."""
    naming = Naming.for_live(live)
    served = sorted((e for e in entries if is_served(e.name, naming)), key=lambda e: e.name)
    return Index(live, tuple(served))


def encode_index(index: Index) -> bytes:
    """The index as JSON: `{"version": 1, "live": ..., "files": [{"name", "size_bytes", "mtime_ms"}]}`."""
    return msgspec.json.encode(
        {
            "version": INDEX_VERSION,
            "live": index.live,
            "files": [attrs.asdict(entry) for entry in index.files],
        }
    )


class BadIndex(ValueError):
    """An index that is not one the endpoint writes; the message says what is wrong."""


def decode_index(data: bytes) -> Index:
    """The index a collector answered, checked field by field; raises `BadIndex`. Names are not
    judged here (see `croft.domain.dataset.transfer`): a hostile collector's names are refused file
    by file."""
    try:
        body = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise BadIndex(f"the dataset index is not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("version") != INDEX_VERSION:
        raise BadIndex(f"the dataset index is not version {INDEX_VERSION} of croft's index")
    live, files = body.get("live"), body.get("files")
    if not isinstance(live, str) or not isinstance(files, list):
        raise BadIndex("the dataset index lacks its live file name or its file list")
    entries = []
    for item in files:
        if not isinstance(item, dict):
            raise BadIndex("a dataset index entry is not an object")
        name, size, mtime = item.get("name"), item.get("size_bytes"), item.get("mtime_ms")
        if not isinstance(name, str) or type(size) is not int or type(mtime) is not int or size < 0:
            raise BadIndex(f"the dataset index entry {item!r:.80} lacks a name, size or mtime")
        entries.append(IndexEntry(name, size, mtime))
    return Index(live, tuple(entries))
