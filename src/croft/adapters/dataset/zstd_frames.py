"""Whether a zstd file ends where a frame ends, found from its frame and block headers alone.

A streaming decompressor that reads across frames returns what it could decode and stops quietly
when the file ends inside a frame; this walk tells a whole file from a cut one without decoding
anything: it reads each frame's header, skips its blocks by the sizes in their 3-byte headers, and
skips skippable frames by their length field (RFC 8878, sections 3.1.1 and 3.1.2). Corrupt
*contents* are the decompressor's to find; the walk only checks that the framing is whole.
"""

from __future__ import annotations

from typing import BinaryIO

_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_FCS_BYTES = (0, 2, 4, 8)  # by Frame_Content_Size_flag; flag 0 with Single_Segment means 1 byte
_DICT_ID_BYTES = (0, 1, 2, 4)
_RLE = 1  # Block_Type: an RLE block holds one byte, repeated Block_Size times


def ends_on_a_frame(f: BinaryIO) -> bool:
    """True when the file read by `f` (from its current position) is a sequence of whole zstd
    or skippable frames, or empty; False when it ends inside one or its framing is not zstd's."""
    while True:
        magic_bytes = f.read(4)
        if not magic_bytes:
            return True
        if len(magic_bytes) < 4:
            return False
        magic = int.from_bytes(magic_bytes, "little")
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            size = f.read(4)
            if len(size) < 4 or not _skip(f, int.from_bytes(size, "little")):
                return False
            continue
        if magic != _ZSTD_MAGIC or not _frame(f):
            return False


def _frame(f: BinaryIO) -> bool:
    """Past one zstd frame after its magic number; False if the file ends inside it."""
    descriptor = f.read(1)
    if not descriptor:
        return False
    flags = descriptor[0]
    single_segment = bool(flags & 0x20)
    fcs_flag = flags >> 6
    header = (
        (0 if single_segment else 1)
        + _DICT_ID_BYTES[flags & 0x03]
        + (1 if fcs_flag == 0 and single_segment else _FCS_BYTES[fcs_flag])
    )
    if not _skip(f, header):
        return False
    while True:
        block = f.read(3)
        if len(block) < 3:
            return False
        value = int.from_bytes(block, "little")
        kind, size = (value >> 1) & 0x03, value >> 3
        if not _skip(f, 1 if kind == _RLE else size):
            return False
        if value & 1:  # Last_Block
            break
    return _skip(f, 4) if flags & 0x04 else True  # Content_Checksum


def _skip(f: BinaryIO, size: int) -> bool:
    """Past `size` bytes; False if fewer are left."""
    if size == 0:
        return True
    f.seek(size - 1, 1)
    return len(f.read(1)) == 1
