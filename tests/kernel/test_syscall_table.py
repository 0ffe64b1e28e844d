"""Syscall names from the kernel's unistd_64.h, and the GPU device patterns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.host.bcc_source import GpuDeviceMatcher
from croft.adapters.host.syscall_table import SyscallNames, parse_unistd, syscall_table_paths

EXCERPT = """\
#ifndef _ASM_UNISTD_64_H
#define _ASM_UNISTD_64_H

#define __NR_read 0
#define __NR_write 1
#define __NR_ioctl 16
#define __NR_getppid 110

#endif /* _ASM_UNISTD_64_H */
"""

names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)


def test_parse_unistd_reads_the_defines_and_nothing_else() -> None:
    assert parse_unistd(EXCERPT) == {0: "read", 1: "write", 16: "ioctl", 110: "getppid"}


@given(st.dictionaries(st.integers(0, 1023), names, max_size=40))
def test_parse_unistd_round_trips_any_table(table: dict[int, str]) -> None:
    text = "\n".join(f"#define __NR_{name} {nr}" for nr, name in table.items())
    assert parse_unistd(f"/* header */\n{text}\n#define __NR_syscalls 1024x\n") == table


def test_unknown_and_negative_numbers_get_a_stable_name() -> None:
    table = SyscallNames(by_nr=parse_unistd(EXCERPT))
    assert table.name(110) == "getppid"
    assert table.name(462) == "syscall_462"
    assert table.name((1 << 32) - 1) == "syscall_-1"  # sys_enter's id -1, as an unsigned u32


def test_load_takes_the_first_table_that_names_syscalls(tmp_path: Path) -> None:
    empty, real = tmp_path / "empty.h", tmp_path / "unistd_64.h"
    empty.write_text("/* nothing */\n")
    real.write_text(EXCERPT)
    loaded = SyscallNames.load((tmp_path / "missing.h", empty, real))
    assert loaded is not None
    assert loaded.source == str(real)
    assert SyscallNames.load((tmp_path / "missing.h", empty)) is None


def test_the_running_kernels_table_names_common_syscalls() -> None:
    loaded = SyscallNames.load(syscall_table_paths(os.uname().release))
    if loaded is None:
        pytest.skip("no kernel headers or C library headers with unistd_64.h on this host")
    assert [loaded.name(nr) for nr in (0, 1, 16, 39, 44, 110)] == [
        "read",
        "write",
        "ioctl",
        "getpid",
        "sendto",
        "getppid",
    ]
    assert len(loaded.by_nr) > 300


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
