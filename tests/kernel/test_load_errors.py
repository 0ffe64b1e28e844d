"""Loading failures of both loaders: one sentence naming the program and the cause, and libbpf's or
the compiler's and verifier's own output only with `verbose`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from croft.adapters.host.core_loader import OBJECT_ARCH
from croft.adapters.host.ebpf_programs import program_dir
from croft.adapters.host.ebpf_source import load_kernel_source
from croft.errors import UserError
from tests.helpers.cli import CROFT
from tests.helpers.loaders import open_source, skip_unless_loadable

pytestmark = [pytest.mark.root, pytest.mark.bpf]

# sys_enter's count used without checking the map's answer for NULL: compiles, the verifier says no.
CHECKED = """    u64 *count = syscall_count(parity, &key);
    if (count) {
        __sync_fetch_and_add(count, 1);
        return 0;
    }
"""
UNCHECKED = """    u64 *count = syscall_count(parity, &key);
    __sync_fetch_and_add(count, 1);
    return 0;
"""
# What each loader calls the program.
SYS_ENTER = {"core": "sys_enter", "bcc": "raw_tracepoint__sys_enter"}


def programs_with(tmp_path: Path, loader: str, syscalls_c: str, leave_out: str = "") -> Path:
    """croft's sources with `syscalls_c` for syscalls.c, and for CO-RE their object (without the
    file `leave_out`), in `tmp_path`."""
    for source in (*program_dir().glob("*.c"), *program_dir().glob("*.h")):
        shutil.copy(source, tmp_path / source.name)
    (tmp_path / "syscalls.c").write_text(syscalls_c)
    whole = (tmp_path / "croft.bpf.c").read_text()
    (tmp_path / "croft.bpf.c").write_text(
        whole.replace(f'#include "{leave_out}"\n', "") if leave_out else whole
    )
    if loader == "core":
        if shutil.which("clang") is None or not Path("/usr/include/bpf/bpf_helpers.h").exists():
            pytest.skip("no clang or libbpf-dev to build a broken object: scripts/system-deps.sh")
        arch = OBJECT_ARCH[os.uname().machine]
        built = subprocess.run(
            [
                "clang",
                "-O2",
                "-g",
                "-target",
                "bpfel",
                f"-D__TARGET_ARCH_{arch}",
                f"-I{tmp_path}",
                "-c",
                str(tmp_path / "croft.bpf.c"),
                "-o",
                str(tmp_path / f"croft.{arch}.bpf.o"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:  # a compile error: BCC's to report, CO-RE objects are built ahead
            pytest.skip(f"clang: {built.stderr[-200:]}")
    return tmp_path


def one_sentence(message: str) -> None:
    assert "\n" not in message
    assert message.count(": ") >= 1  # the cause, then the fix


def test_a_verifier_rejection_names_the_program(
    loader: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    real = (program_dir() / "syscalls.c").read_text()
    assert CHECKED in real
    programs = programs_with(tmp_path, loader, real.replace(CHECKED, UNCHECKED))
    with pytest.raises(UserError) as caught:
        open_source(loader, programs=programs)
    message = str(caught.value)
    assert f"verifier rejected croft's eBPF program {SYS_ENTER[loader]}" in message
    assert "--verbose" in message
    one_sentence(message)
    assert "map_value_or_null" not in capfd.readouterr().err

    with pytest.raises(UserError) as caught:
        open_source(loader, programs=programs, verbose=True)
    assert "is above" in str(caught.value)
    assert "map_value_or_null" in capfd.readouterr().err  # the verifier's log, through libbpf or BCC


def test_without_cap_bpf_and_cap_perfmon_the_kernel_refuses_and_says_so(loader: str) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1): apt-get install util-linux")
    probe = (
        "import sys\nfrom croft.adapters.host.ebpf_source import load_kernel_source\n"
        "from croft.errors import UserError\n"
        "try:\n    load_kernel_source(sys.argv[1])\nexcept UserError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [
            "setpriv",
            "--inh-caps=-all",
            "--bounding-set=-bpf,-perfmon,-sys_admin",
            sys.executable,
            "-c",
            probe,
            loader,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() == (
        "the kernel refused to load croft's eBPF programs (Operation not permitted): run croft run as "
        "root, or in a container with CAP_BPF and CAP_PERFMON"
    ), done.stderr


def test_a_compile_error_names_the_programs_and_hides_clang_unless_verbose(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    skip_unless_loadable("bcc")
    programs = programs_with(tmp_path, "bcc", '#include "croft.h"\nthis is not C;\n')
    with pytest.raises(UserError) as caught:
        open_source("bcc", programs=programs)
    message = str(caught.value)
    assert f"the eBPF programs in {programs} do not compile" in message
    assert caught.value.exit_code == 1
    one_sentence(message)
    assert "error:" not in capfd.readouterr().err
    with pytest.raises(UserError) as caught:
        open_source("bcc", programs=programs, verbose=True)
    assert "is above" in str(caught.value)
    assert "error:" in capfd.readouterr().err


def test_a_form_bcc_does_not_know_is_named(tmp_path: Path) -> None:
    skip_unless_loadable("bcc")
    programs = programs_with(
        tmp_path, "bcc", '#include "croft.h"\nSEC("kprobe/do_sys_open")\nint x(void *ctx) { return 0; }\n'
    )
    with pytest.raises(UserError) as caught:
        open_source("bcc", programs=programs)
    assert str(caught.value) == (
        f"the eBPF program {programs / 'syscalls.c'} is not in croft's dialect: line 2: BCC cannot take "
        "'SEC(\"kprobe/do_sys_open\")'"
    )


def test_bcc_without_kernel_headers_says_which_package_to_install(tmp_path: Path) -> None:
    skip_unless_loadable("bcc")
    with pytest.raises(UserError) as caught:
        open_source("bcc", modules_root=tmp_path)
    release = os.uname().release
    assert f"no kernel headers for Linux {release} at {tmp_path / release / 'build'}" in str(caught.value)
    assert "scripts/setup-bpf.sh" in str(caught.value)


def test_bcc_without_its_python_module_points_at_the_setup_script(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_loadable("bcc")
    monkeypatch.setitem(sys.modules, "bcc", None)
    with pytest.raises(UserError) as caught:
        load_kernel_source("bcc")
    assert "the bcc Python module is not importable" in str(caught.value)
    assert "scripts/setup-bpf.sh bcc" in str(caught.value)


def test_without_root_it_says_root_is_needed(loader: str) -> None:
    os.seteuid(65534)  # the real uid stays root, so the test can take it back
    try:
        with pytest.raises(UserError) as caught:
            load_kernel_source("core" if loader == "core" else "bcc")
    finally:
        os.seteuid(0)
    assert str(caught.value) == "loading eBPF programs needs root: run croft run as root (e.g. with sudo)"


def test_croft_run_ebpf_core_without_btf_exits_1_saying_what_to_use(tmp_path: Path) -> None:
    """A loader asked for by name does not step down: no BTF is croft run's error, in one sentence."""
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    run = f"{CROFT} run --ebpf core --dataset {tmp_path / 'd.jsonl'}"
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount --bind /dev/null /sys/kernel/btf/vmlinux; exec {run}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(
        f"Linux {os.uname().release} has no BTF (/sys/kernel/btf/vmlinux), which croft's CO-RE eBPF "
        "programs are relocated against: run with --ebpf bcc (kernel headers and BCC) or --ebpf off"
    ), done.stderr
    assert "Traceback" not in done.stderr


def test_an_object_of_another_croft_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    skip_unless_loadable("core")
    programs = programs_with(tmp_path, "core", (program_dir() / "syscalls.c").read_text(), "ingress.c")
    with pytest.raises(UserError) as caught:
        open_source("core", programs=programs)
    message = str(caught.value)
    arch = OBJECT_ARCH[os.uname().machine]
    assert message.startswith(f"croft's eBPF object {programs / f'croft.{arch}.bpf.o'} is not the one")
    assert "inet_sock_set_state" in message and "tcp_probe" in message
    assert message.endswith("): reinstall croft")
    one_sentence(message)
