"""The committed CO-RE objects and syscall tables are those `make bpf` builds from the sources in the
tree (src/croft/bpf/objects.sha256 records what they were built from: a source changed without
rebuilding fails here, on any clone, without clang), they rebuild byte for byte where the same
clang is installed (for x86-64 and arm64 both), and what user space unpacks from their maps matches
the structs their BTF declares."""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from croft.adapters.host import ebpf_source
from croft.adapters.host.core_loader import OBJECT_ARCH, SETTINGS
from croft.adapters.host.ebpf_programs import program_dir
from tests.helpers.btf import offsets, section, structs

REPO = Path(__file__).resolve().parents[2]
RECORD = program_dir() / "objects.sha256"
OUTPUTS = {
    "src/croft/bpf/croft.x86.bpf.o",
    "src/croft/bpf/croft.arm64.bpf.o",
    "src/croft/adapters/host/syscalls/x86_64.tbl",
    "src/croft/adapters/host/syscalls/aarch64.tbl",
}
# The layouts user space reads or writes, by the C struct they mirror.
LAYOUTS = {
    "syscall_key": ebpf_source.SYSCALL_KEY.format,
    "ioctl_key": ebpf_source.IOCTL_KEY.format,
    "ioctl_value": ebpf_source.IOCTL_VALUE.format,
    "net_key": ebpf_source.NET_KEY.format,
    "endpoint_key": ebpf_source.ENDPOINT_KEY.format,
    "endpoint_value": ebpf_source.ENDPOINT_VALUE.format,
    "croft_settings": SETTINGS.format,
}


def recorded() -> dict[str, str]:
    """{repository path: sha256} of objects.sha256 (comment lines skipped)."""
    lines = [line for line in RECORD.read_text().splitlines() if line and not line.startswith("#")]
    return {path: digest for digest, path in (line.split("  ", 1) for line in lines)}


def test_the_objects_were_built_from_the_sources_in_the_tree() -> None:
    record = recorded()
    inputs = {
        *(str(p.relative_to(REPO)) for p in (*program_dir().glob("*.c"), *program_dir().glob("*.h"))),
        "scripts/build-bpf.sh",
        "scripts/syscall_tables.py",
    }
    assert set(record) == inputs | OUTPUTS, "objects.sha256 names other files: run make bpf"
    stale = [p for p in sorted(record) if hashlib.sha256((REPO / p).read_bytes()).hexdigest() != record[p]]
    assert not stale, f"{', '.join(stale)} changed since the objects were built: run make bpf and commit"


def test_make_bpf_rebuilds_the_committed_objects_byte_for_byte(tmp_path: Path) -> None:
    """Both architectures' objects are compiled (x86-64 and arm64), and the tables made again."""
    for tool in ("clang", "llvm-strip"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}: scripts/system-deps.sh installs the build tools")
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        pytest.skip("no libbpf-dev: scripts/system-deps.sh installs it")
    version = subprocess.run(["clang", "--version"], capture_output=True, text=True, check=True).stdout
    built_with = re.search(r"clang version (\d+)", RECORD.read_text())
    here = re.search(r"clang version (\d+)", version)
    assert built_with is not None and here is not None
    if built_with.group(1) != here.group(1):
        pytest.skip(
            f"clang {here.group(1)} here, the objects are clang {built_with.group(1)}'s: bytes differ"
        )
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-bpf.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for output in sorted(OUTPUTS):
        rebuilt = tmp_path / Path(output).name
        assert rebuilt.read_bytes() == (REPO / output).read_bytes(), f"{output} differs: run make bpf"


@pytest.mark.parametrize("arch", sorted(set(OBJECT_ARCH.values())))
def test_user_space_reads_the_maps_as_the_objects_btf_lays_them_out(arch: str) -> None:
    declared = structs(program_dir() / f"croft.{arch}.bpf.o")
    for name, layout in LAYOUTS.items():
        size, members = declared[name]
        assert struct.calcsize(layout) == size, name
        assert offsets(layout) == [offset for _, offset in members], name


def test_only_the_pt_regs_access_tells_the_architectures_objects_apart() -> None:
    """The objects read a syscall's first argument where each architecture keeps it (CO-RE-relocated
    %rdi, or arm64's orig_x0); syscall numbers are settings the loader takes from the table."""
    x86 = structs(program_dir() / "croft.x86.bpf.o")
    arm64 = structs(program_dir() / "croft.arm64.bpf.o")
    assert x86["pt_regs"][1] == [("di", 0)]
    assert "pt_regs___arm64" not in x86
    assert [member for member, _ in arm64["pt_regs___arm64"][1]] == ["orig_x0"]
    assert {k: v for k, v in x86.items() if "pt_regs" not in k} == {
        k: v for k, v in arm64.items() if "pt_regs" not in k
    }
    for arch in ("x86", "arm64"):
        text = section(program_dir() / f"croft.{arch}.bpf.o", "raw_tp/sys_enter")
        assert text  # a program, whose ioctl number is read from .rodata, not compiled in
        assert section(program_dir() / f"croft.{arch}.bpf.o", ".rodata") == bytes(SETTINGS.size)
