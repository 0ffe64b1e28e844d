"""Where the eBPF programs live, how BCC is given them, and the host set-up for each loader."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from croft.adapters.host.bcc_loader import bcc_dialect, program_text
from croft.adapters.host.ebpf_programs import Features, MapSizes, program_dir

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["croft.bpf.c", "ingress.c", "net.c", "oncpu.c", "syscalls.c"]


def test_programs_and_objects_are_in_the_package_and_the_repositorys_bpf_dir() -> None:
    """The wheel ships the whole directory (tests/packaging checks every tracked file is in it)."""
    directory = program_dir()
    assert sorted(p.name for p in directory.glob("*.c")) == SOURCES
    assert sorted(p.name for p in directory.glob("*.bpf.o")) == ["croft.arm64.bpf.o", "croft.x86.bpf.o"]
    assert (REPO / "bpf").resolve() == directory.resolve()


def test_bcc_is_given_the_named_programs_only_in_its_own_dialect() -> None:
    text = program_text(program_dir(), ("syscalls",))
    assert "RAW_TRACEPOINT_PROBE(sys_enter)" in text
    assert "TRACEPOINT_PROBE(task, task_newtask)" in text
    assert (
        'BPF_TABLE("lru_hash", u64, struct cgroup_verdict, cgroup_verdicts, CROFT_VERDICT_ENTRIES);' in text
    )
    assert "syscall_counts_odd.lookup_or_try_init(key, &zero)" in text
    assert "watched_tgids.update(&child, &value)" in text
    assert "sock_send_length" not in text
    assert "SEC(" not in text and "bpf_map_" not in text


def test_the_dialect_rewrite_keeps_what_it_does_not_rewrite() -> None:
    libbpf = """struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 4);
    __type(key, u32);
    __type(value, struct pair);
} pairs SEC(".maps");

SEC("tp/sched/sched_process_free")
int freed(struct trace_event_raw_sched_process_template *args) {
    u64 *v = bpf_map_lookup_elem(&pairs, &slot);
    if (bpf_map_update_elem(&pairs, &slot, &one, BPF_NOEXIST) != 0 || bpf_map_delete_elem(&pairs, &slot))
        return args->pid;
    return 0;
}
"""
    assert (
        bcc_dialect(libbpf)
        == """BPF_TABLE("percpu_array", u32, struct pair, pairs, 4);

TRACEPOINT_PROBE(sched, sched_process_free) {
    u64 *v = pairs.lookup(&slot);
    if (pairs.insert(&slot, &one) != 0 || pairs.delete(&slot))
        return args->pid;
    return 0;
}
"""
    )


@pytest.mark.parametrize(
    "form",
    [
        'SEC("kprobe/do_sys_open")\nint open(struct pt_regs *ctx) {',
        "bpf_map_update_elem(&m, &k, &v, BPF_EXIST);",
        "bpf_map_lookup_elem(map, &k);",
        'struct {\n    __uint(type, BPF_MAP_TYPE_RINGBUF);\n} events SEC(".maps");',
    ],
)
def test_a_form_the_rewrite_does_not_know_is_refused_with_its_line(form: str) -> None:
    with pytest.raises(ValueError, match=r"^line [234]: BCC cannot take "):
        bcc_dialect("// one\n" + form + "\n")


def test_map_sizes_reach_bcc_as_defines_and_libbpf_by_map_name() -> None:
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
    sources = "".join((program_dir() / name).read_text() for name in SOURCES)
    for flag in flags:
        assert f"#ifndef {flag[2:].split('=')[0]}" in sources
    maps = {
        name: define
        for define, name in re.findall(r"__uint\(max_entries, (\w+)\);[^}]*\} (\w+) SEC", sources)
    }
    defines = sizes.defines()
    for name, entries in sizes.by_map().items():
        assert defines[maps[name]] == entries, name  # the map libbpf resizes is the one BCC's define sizes
    assert {n for n, d in maps.items() if d in defines} == set(sizes.by_map())


def test_every_program_of_the_object_belongs_to_one_part() -> None:
    sources = "".join((program_dir() / name).read_text() for name in SOURCES)
    programs = set(re.findall(r'SEC\("(?:raw_tp|tp)/[\w/]+"\)\nint (\w+)\(', sources))
    assert programs == set(Features().programs())
    assert Features(net=False, ingress=False, oncpu=False, moves=False).programs() == {
        name: name in ("sys_enter", "task_newtask") for name in programs
    }


@pytest.mark.root
def test_setup_bpf_for_bcc_is_idempotent_and_gives_the_venv_bcc_alone() -> None:
    if os.geteuid() != 0:
        pytest.skip("the set-up installs packages as root")
    venv = Path(sys.prefix)
    for _ in range(2):
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / "setup-bpf.sh"), "--bcc", str(venv)],
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


@pytest.mark.root
def test_setup_bpf_for_core_links_no_kernel_headers(tmp_path: Path) -> None:
    """Without --bcc the script wants libbpf1 and tracefs only: on a host whose /lib/modules is
    empty (an empty tmpfs over it, in a mount namespace of its own) it leaves it empty."""
    if os.geteuid() != 0:
        pytest.skip("the set-up runs as root")
    script = REPO / "scripts" / "setup-bpf.sh"
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs none /lib/modules && bash {script} {tmp_path / 'no-venv'} && ls -A /lib/modules",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
    assert (
        Path("/usr/lib/x86_64-linux-gnu/libbpf.so.1").exists()
        or Path("/usr/lib/aarch64-linux-gnu/libbpf.so.1").exists()
    )
