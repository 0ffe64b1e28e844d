"""croft's syscall counts against bcc's own syscount-bpfcc, on the same process and window."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

import pytest

from croft.adapters.host.ebpf_source import EbpfKernelSource
from croft.domain.collector.kernel import KernelSelection
from tests.helpers.children import Child
from tests.helpers.loaders import open_source

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

SYSCOUNT = "syscount-bpfcc"


def parse_syscount(text: str) -> dict[str, int]:
    """The SYSCALL/COUNT table that syscount prints on SIGINT."""
    counts: dict[str, int] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if line.split()[:2] == ["SYSCALL", "COUNT"]:
            break
    for line in lines:
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit():
            counts[fields[0]] = int(fields[1])
    return counts


@pytest.fixture
def source(loader: str) -> Iterator[EbpfKernelSource]:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    if shutil.which(SYSCOUNT) is None:
        pytest.fail(f"{SYSCOUNT} is missing: run scripts/setup-bpf.sh as root (installs bpfcc-tools)")
    with open_source(loader) as loaded:
        yield loaded


def test_counts_agree_with_syscount_within_one_percent(source: EbpfKernelSource) -> None:
    child = Child()
    source.select(KernelSelection(tgids=frozenset({child.tgid})))
    syscount = subprocess.Popen(
        [SYSCOUNT, "-p", str(child.tgid), "-T", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert syscount.stdout is not None
        banner = syscount.stdout.readline()
        assert banner.startswith("Tracing syscalls"), banner + syscount.communicate(timeout=60)[1]
        source.read()
        child.do("getppid 200000")
        child.do("sendto 20000")
        ours = dict(source.read().syscalls.get(child.tgid, {}))
        syscount.send_signal(signal.SIGINT)
        out, err = syscount.communicate(timeout=60)
    finally:
        if syscount.poll() is None:
            syscount.kill()
        child.close()
    theirs = parse_syscount(out)
    print(f"\ncroft {sorted(ours.items())}\nsyscount {sorted(theirs.items())}")
    assert theirs, f"syscount printed no table: {out!r} {err!r}"
    for name in ("getppid", "sendto", "recvfrom"):
        assert ours[name] == pytest.approx(theirs[name], rel=0.01), name
    assert sum(ours.values()) == pytest.approx(sum(theirs.values()), rel=0.01)
