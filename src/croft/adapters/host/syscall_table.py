"""Syscall names by number, from croft's own table for the machine it runs on
(`croft/adapters/host/syscalls/<machine>.tbl`, written by scripts/syscall_tables.py from the
kernel's UAPI headers), so that no kernel headers are needed on the host.

Syscall numbers never change once assigned, so a table older than the running kernel names every
syscall it knows correctly; a newer syscall it lacks is named `syscall_<nr>`. The raw `sys_enter`
tracepoint reports a 32-bit (compat) process's syscalls by their 32-bit numbers; croft names them
with the 64-bit table (32-bit processes are rare on GPU hosts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

TABLES = Path(__file__).with_name("syscalls")  # package data: a wheel installs it beside this module


def parse_table(text: str) -> dict[int, str]:
    """`<nr> <name>` lines as {nr: name}; `#` comments and blank lines are skipped."""
    table: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) == 2 and fields[0].isdigit():
            table[int(fields[0])] = fields[1]
    return table


@attrs.frozen
class SyscallNames:
    """Names syscall numbers as reported by `sys_enter` (an unsigned 32-bit id; -1 for a syscall
    entered through ptrace with no number), and numbers names (what the programs compare against)."""

    by_nr: Mapping[int, str]
    source: str = ""

    @classmethod
    def for_machine(cls, machine: str | None = None) -> SyscallNames | None:
        """croft's table for `machine` (`os.uname().machine` by default), None for a machine it has
        no table for."""
        machine = machine or os.uname().machine
        resource = TABLES / f"{machine}.tbl"
        try:
            text = resource.read_text()
        except FileNotFoundError:
            return None
        return cls(by_nr=parse_table(text), source=str(resource))

    def name(self, nr: int) -> str:
        signed = nr - (1 << 32) if nr >= (1 << 31) else nr
        return self.by_nr.get(signed) or f"syscall_{signed}"

    def number(self, name: str) -> int | None:
        return next((nr for nr, known in self.by_nr.items() if known == name), None)
