"""The structs an eBPF object's BTF declares, read from its .BTF section with nothing but `struct`
(https://docs.kernel.org/bpf/btf.html): for checking that what user space unpacks matches the C."""

from __future__ import annotations

import struct
from pathlib import Path

ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
SECTION = struct.Struct("<IIQQQQIIQQ")
BTF_HEADER = struct.Struct("<HBBIIIII")
BTF_TYPE = struct.Struct("<III")
STRUCT_KIND, UNION_KIND = 4, 5
# Bytes after a btf_type, by kind: fixed, plus per-member (vlen) ones.
EXTRA = {
    1: (4, 0),
    3: (12, 0),
    4: (0, 12),
    5: (0, 12),
    6: (0, 8),
    13: (0, 8),
    14: (4, 0),
    15: (0, 12),
    17: (4, 0),
    19: (0, 12),
}


def section(path: Path, name: str) -> bytes:
    """The bytes of ELF section `name` of a little-endian 64-bit object."""
    data = path.read_bytes()
    header = ELF_HEADER.unpack_from(data)
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    headers = [SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    for entry in headers:
        start = names[4] + entry[0]
        if data[start : data.index(b"\0", start)].decode() == name:
            return data[entry[4] : entry[4] + entry[5]]
    raise KeyError(name)


def structs(path: Path) -> dict[str, tuple[int, list[tuple[str, int]]]]:
    """{struct name: (size in bytes, [(member, byte offset)])} of the object's BTF."""
    btf = section(path, ".BTF")
    _, _, _, hdr_len, type_off, type_len, str_off, _ = BTF_HEADER.unpack_from(btf)
    strings = btf[hdr_len + str_off :]

    def name(offset: int) -> str:
        return strings[offset : strings.index(b"\0", offset)].decode()

    found: dict[str, tuple[int, list[tuple[str, int]]]] = {}
    at, end = hdr_len + type_off, hdr_len + type_off + type_len
    while at < end:
        name_off, info, size = BTF_TYPE.unpack_from(btf, at)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        at += BTF_TYPE.size
        fixed, each = EXTRA.get(kind, (0, 0))
        if kind in (STRUCT_KIND, UNION_KIND) and name_off:
            members = []
            for index in range(vlen):
                member_name, _, offset = struct.unpack_from("<III", btf, at + index * 12)
                bits = offset & 0xFFFFFF if info >> 31 else offset  # kind_flag: bitfield size in the top byte
                members.append((name(member_name), bits // 8))
            found[name(name_off)] = (size, members)
        at += fixed + each * vlen
    return found


def offsets(layout: str) -> list[int]:
    """The byte offset of each field of a `struct` format without padding ("=IIQ" -> [0, 4, 8])."""
    out, at = [], 0
    order, fields = layout[0], layout[1:]
    count = ""
    for char in fields:
        if char.isdigit():
            count += char
            continue
        out.append(at)
        at += struct.calcsize(f"{order}{count}{char}")
        count = ""
    return out
