"""Syscall names from croft's own per-machine tables, and the GPU device patterns."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.host.ebpf_source import GpuDeviceMatcher
from croft.adapters.host.syscall_table import SyscallNames, parse_table

EXCERPT = """\
# x86_64 syscall numbers
0 read
1 write
16 ioctl
110 getppid
"""

names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)


def test_parse_table_reads_the_lines_and_nothing_else() -> None:
    assert parse_table(EXCERPT + "\nnot a line\n7\n") == {0: "read", 1: "write", 16: "ioctl", 110: "getppid"}


@given(st.dictionaries(st.integers(0, 1023), names, max_size=40))
def test_parse_table_round_trips_any_table(table: dict[int, str]) -> None:
    text = "\n".join(f"{nr} {name}" for nr, name in table.items())
    assert parse_table(f"# header\n{text}\n") == table


def test_unknown_and_negative_numbers_get_a_stable_name() -> None:
    table = SyscallNames(by_nr=parse_table(EXCERPT))
    assert table.name(110) == "getppid"
    assert table.name(462) == "syscall_462"
    assert table.name((1 << 32) - 1) == "syscall_-1"  # sys_enter's id -1, as an unsigned u32
    assert table.number("ioctl") == 16
    assert table.number("no_such_call") is None


@pytest.mark.parametrize(
    ("machine", "numbers"),
    [
        # arch/x86/entry/syscalls/syscall_64.tbl
        (
            "x86_64",
            {
                "read": 0,
                "write": 1,
                "ioctl": 16,
                "getpid": 39,
                "sendto": 44,
                "getppid": 110,
                "membarrier": 324,
            },
        ),
        # include/uapi/asm-generic/unistd.h, which arm64 uses
        (
            "aarch64",
            {
                "ioctl": 29,
                "read": 63,
                "write": 64,
                "getpid": 172,
                "getppid": 173,
                "sendto": 206,
                "membarrier": 283,
            },
        ),
    ],
)
def test_croft_ships_a_table_for_each_machine_it_has_objects_for(
    machine: str, numbers: dict[str, int]
) -> None:
    table = SyscallNames.for_machine(machine)
    assert table is not None
    assert {name: table.number(name) for name in numbers} == numbers
    assert len(table.by_nr) > 300
    assert len(set(table.by_nr.values())) == len(table.by_nr)  # one number a name


def test_a_machine_without_a_table_has_none() -> None:
    assert SyscallNames.for_machine("sparc64") is None


def test_this_machines_table_is_the_one_loaded_by_default() -> None:
    table = SyscallNames.for_machine()
    assert table is not None
    assert table.source.endswith(f"{os.uname().machine}.tbl")


@pytest.mark.parametrize(
    ("path", "is_gpu"),
    [
        ("/dev/nvidia0", True),
        ("/dev/nvidiactl", True),
        ("/dev/nvidia-uvm", True),
        ("/dev/dri/renderD128", True),
        ("/dev/kfd", True),
        ("/dev/accel/accel0", True),
        ("/dev/dri/card0", False),
        ("/dev/null", False),
        ("/dev/pts/3", False),
        ("socket:[12345]", False),
    ],
)
def test_default_gpu_devices(path: str, is_gpu: bool) -> None:
    assert GpuDeviceMatcher()(path) is is_gpu


def test_gpu_devices_are_configurable() -> None:
    matcher = GpuDeviceMatcher(("/tmp/croft-*/gpu0",))
    assert matcher("/tmp/croft-abc/gpu0")
    assert not matcher("/dev/nvidia0")
