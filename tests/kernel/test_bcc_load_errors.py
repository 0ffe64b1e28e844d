"""Loading failures of the real BCC adapter: one sentence naming the cause and the fix, and the raw
compiler or verifier output only when verbose."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from croft.adapters.host.bcc_loader import program_dir
from croft.adapters.host.bcc_source import BccKernelSource
from croft.errors import UserError

pytestmark = [pytest.mark.root, pytest.mark.bpf]

# Compiles, but dereferences a map lookup without checking it for NULL: the verifier says no.
UNCHECKED_LOOKUP = """
struct syscall_key { u32 tgid; u32 nr; };
struct ioctl_key { u32 tgid; u32 fd; };
struct ioctl_value { u64 count; u64 last_ns; };
BPF_HASH(syscall_counts, struct syscall_key, u64, 1024);
BPF_HASH(ioctl_counts, struct ioctl_key, struct ioctl_value, 1024);
BPF_PERCPU_ARRAY(syscalls_dropped, u64, 1);
static __always_inline int croft_watched(u32 tgid, u64 *group) { return 1; }  // net.c calls it
static __always_inline u32 croft_drain_parity(void) { return 0; }  // net.c and ingress.c call it
RAW_TRACEPOINT_PROBE(sys_enter) {
    struct syscall_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .nr = (u32)ctx->args[1]};
    u64 *count = syscall_counts.lookup(&key);
    *count += 1;
    return 0;
}
"""


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")


def programs_with(tmp_path: Path, syscalls_c: str) -> Path:
    shutil.copy(program_dir() / "net.c", tmp_path / "net.c")
    shutil.copy(program_dir() / "oncpu.c", tmp_path / "oncpu.c")
    shutil.copy(program_dir() / "ingress.c", tmp_path / "ingress.c")
    (tmp_path / "syscalls.c").write_text(syscalls_c)
    return tmp_path


def one_sentence(message: str) -> None:
    assert "\n" not in message
    assert message.count(": ") >= 1  # the cause, then the fix


def test_a_compile_error_names_the_programs_and_hides_clang(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    programs = programs_with(tmp_path, "this is not C;\n")
    with pytest.raises(UserError) as caught:
        BccKernelSource(programs=programs)
    message = str(caught.value)
    assert f"the eBPF programs in {programs} do not compile" in message
    assert "--verbose" in message
    assert caught.value.exit_code == 1
    one_sentence(message)
    assert "error:" not in capfd.readouterr().err


def test_verbose_shows_the_compilers_errors(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UserError) as caught:
        BccKernelSource(programs=programs_with(tmp_path, "this is not C;\n"), verbose=True)
    assert "--verbose" not in str(caught.value)
    assert "is above" in str(caught.value)
    assert "error:" in capfd.readouterr().err


def test_a_verifier_rejection_names_the_program(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UserError) as caught:
        BccKernelSource(programs=programs_with(tmp_path, UNCHECKED_LOOKUP))
    message = str(caught.value)
    assert "verifier rejected croft's eBPF program raw_tracepoint__sys_enter" in message
    one_sentence(message)
    assert "map_value_or_null" not in capfd.readouterr().err

    with pytest.raises(UserError):
        BccKernelSource(programs=programs_with(tmp_path, UNCHECKED_LOOKUP), verbose=True)
    assert "map_value_or_null" in capfd.readouterr().err


def test_missing_kernel_headers_say_which_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        BccKernelSource(modules_root=tmp_path)
    release = os.uname().release
    assert f"no kernel headers for Linux {release} at {tmp_path / release / 'build'}" in str(caught.value)
    assert "scripts/setup-bpf.sh" in str(caught.value)


def test_a_missing_bcc_module_points_at_the_setup_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bcc", None)
    with pytest.raises(UserError) as caught:
        BccKernelSource()
    assert "the bcc Python module is not importable" in str(caught.value)
    assert "scripts/setup-bpf.sh" in str(caught.value)


def test_without_root_it_says_root_is_needed() -> None:
    os.seteuid(65534)  # the real uid stays root, so the test can take it back
    try:
        with pytest.raises(UserError) as caught:
            BccKernelSource()
    finally:
        os.seteuid(0)
    assert str(caught.value) == "loading eBPF programs needs root: run croft run as root (e.g. with sudo)"
