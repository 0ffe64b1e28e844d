"""Syscall names by number, from the kernel's own table: the `unistd_64.h` that the kernel build
generates from `arch/x86/entry/syscalls/syscall_64.tbl` and ships with its headers.

Syscall numbers never change once assigned, so headers older than the running kernel name every
syscall they know correctly; a newer syscall they lack is named `syscall_<nr>`. The raw
`sys_enter` tracepoint reports a 32-bit (ia32) process's syscalls by their ia32 numbers; croft
names them with the 64-bit table (32-bit processes are rare on GPU hosts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import attrs

# Where the table lies: in the headers BCC compiles against, then the C library's copy.
HEADER_TREE_TABLES = (
    "arch/x86/include/generated/uapi/asm/unistd_64.h",
    "include/generated/uapi/asm/unistd_64.h",
)
SYSTEM_TABLES = (
    Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    Path("/usr/include/asm/unistd_64.h"),
)

_DEFINE = re.compile(r"^#define\s+__NR_(\w+)\s+(\d+)\s*$", re.MULTILINE)


def parse_unistd(text: str) -> dict[int, str]:
    """`#define __NR_<name> <nr>` lines of a unistd header as {nr: name}; other lines are ignored."""
    return {int(nr): name for name, nr in _DEFINE.findall(text)}


def syscall_table_paths(release: str, modules_root: Path = Path("/lib/modules")) -> tuple[Path, ...]:
    """Candidate tables for kernel `release`, most specific first."""
    build = modules_root / release / "build"
    return (*(build / rel for rel in HEADER_TREE_TABLES), *SYSTEM_TABLES)


@attrs.frozen
class SyscallNames:
    """Names syscall numbers as reported by `sys_enter` (an unsigned 32-bit id; -1 for a syscall
    entered through ptrace with no number)."""

    by_nr: Mapping[int, str]
    source: str = ""

    @classmethod
    def load(cls, paths: tuple[Path, ...]) -> SyscallNames | None:
        """The first readable table among `paths` that names at least one syscall, else None."""
        for path in paths:
            try:
                table = parse_unistd(path.read_text(errors="replace"))
            except OSError:
                continue
            if table:
                return cls(by_nr=table, source=str(path))
        return None

    def name(self, nr: int) -> str:
        signed = nr - (1 << 32) if nr >= (1 << 31) else nr
        return self.by_nr.get(signed) or f"syscall_{signed}"
