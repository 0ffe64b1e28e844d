"""Where the eBPF programs live, and the host set-up that lets BCC build them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from croft.adapters.host.bcc_loader import program_dir, program_text
from croft.adapters.host.bcc_source import MapSizes

REPO = Path(__file__).resolve().parents[2]


def test_programs_are_package_data_and_the_repositorys_bpf_dir() -> None:
    directory = program_dir()
    assert sorted(p.name for p in directory.glob("*.c")) == ["ingress.c", "net.c", "oncpu.c", "syscalls.c"]
    assert (REPO / "bpf").resolve() == directory.resolve()


def test_program_text_concatenates_the_named_programs_only() -> None:
    text = program_text(program_dir(), ("syscalls",))
    assert "RAW_TRACEPOINT_PROBE(sys_enter)" in text
    assert "sock_send_length" not in text


def test_map_sizes_reach_the_programs_as_defines() -> None:
    sizes = MapSizes(
        syscalls=10,
        overflow=11,
        ioctls=20,
        net=30,
        endpoints=35,
        tgids=40,
        cgroup_roots=50,
        verdicts=60,
        ran=70,
        moved=80,
    )
    flags = sizes.cflags()
    assert flags == (
        "-DCROFT_SYSCALL_ENTRIES=10",
        "-DCROFT_OVERFLOW_ENTRIES=11",
        "-DCROFT_IOCTL_ENTRIES=20",
        "-DCROFT_NET_ENTRIES=30",
        "-DCROFT_ENDPOINT_ENTRIES=35",
        "-DCROFT_TGID_ENTRIES=40",
        "-DCROFT_CGROUP_ROOTS=50",
        "-DCROFT_VERDICT_ENTRIES=60",
        "-DCROFT_RAN_ENTRIES=70",
        "-DCROFT_MOVED_ENTRIES=80",
    )
    text = program_text(program_dir(), ("oncpu", "syscalls", "net", "ingress"))
    for flag in flags:
        assert f"#ifndef {flag[2:].split('=')[0]}" in text


@pytest.mark.root
def test_setup_bpf_is_idempotent_and_gives_the_venv_bcc_alone() -> None:
    if os.geteuid() != 0:
        pytest.skip("the set-up installs packages as root")
    venv = Path(sys.prefix)
    for _ in range(2):
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / "setup-bpf.sh"), str(venv)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert "installing" not in done.stdout  # the second run finds everything in place
    release = os.uname().release
    assert (Path("/lib/modules") / release / "build" / "include").is_dir()
    assert Path("/sys/kernel/tracing/events/raw_syscalls").is_dir()
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, bcc; print(bcc.__file__); print(sys.path)"],
        capture_output=True,
        text=True,
        check=True,
    )
    bcc_file, path = probe.stdout.splitlines()
    assert bcc_file.startswith(str(venv / "bcc-site"))
    assert "/usr/lib/python3/dist-packages'" not in path
