"""DrmFdinfo, the reader of processes' DRM clients: on a /proc tree holding the kernel's documented
fdinfo examples (fixtures/drm/), and on this host's real /proc, whose files of a live process are
read the same way (this machine has no DRM device, so a real process's non-DRM files stand in)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from croft.adapters.host.drm import DrmFdinfo
from croft.domain.collector.drm import parse_fdinfo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "drm"


def documented(name: str) -> dict[str, str]:
    return tomllib.loads((FIXTURES / f"{name}.toml").read_text())


def open_file(proc: Path, pid: int, fd: int, target: str, fdinfo: str | None) -> None:
    """An open file of `pid` in the tree: its fd link, and its fdinfo unless it was closed."""
    (proc / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "fdinfo").mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "fd" / str(fd)).symlink_to(target)
    if fdinfo is not None:
        (proc / str(pid) / "fdinfo" / str(fd)).write_text(fdinfo)


def test_a_tree_of_documented_clients(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    amdgpu, xe = documented("amdgpu"), documented("xe")
    open_file(proc, 41, 0, "/dev/pts/0", "pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t3\n")
    open_file(proc, 41, 7, amdgpu["device"], amdgpu["fdinfo"])
    open_file(proc, 41, 12, amdgpu["device"], amdgpu["fdinfo"])  # a dup: the same client
    open_file(proc, 41, 13, "/dev/dri/card0", None)  # closed between the listing and the read
    open_file(proc, 52, 3, "socket:[8812]", "pos:\t0\nflags:\t02\n")
    open_file(proc, 63, 4, "/dev/dri/renderD129", xe["fdinfo"])
    (proc / "74").mkdir()  # no fd directory: a process that is gone, or not ours to read
    read = DrmFdinfo(proc).read([41, 52, 63, 74, 85])
    assert list(read) == [41, 63]
    assert [(c.fd, c.driver, c.client_id, c.device) for c in read[41]] == [
        (7, "amdgpu", 30, "/dev/dri/renderD128"),
        (12, "amdgpu", 30, "/dev/dri/renderD128"),
    ]
    assert read[41][0] == parse_fdinfo(amdgpu["fdinfo"], amdgpu["device"], 7)
    (xe_client,) = read[63]
    assert (xe_client.driver, xe_client.device, xe_client.pdev) == (
        "xe",
        "/dev/dri/renderD129",
        "0000:03:00.0",
    )


def test_this_hosts_proc_is_read_the_same_way(tmp_path: Path) -> None:
    """A real child holds a file open under a directory given as the DRM devices': its real fd
    link and fdinfo are there to read, and a file whose fdinfo names no DRM driver is no client;
    nor is any file of this process, and a process gone holds none."""
    devices = tmp_path / "dri"
    devices.mkdir()
    node = devices / "renderD128"
    node.write_text("")
    script = f"import time; f = open({str(node)!r}); print(f.fileno(), flush=True); time.sleep(30)"
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            fd = int(child.stdout.readline())
            assert Path(f"/proc/{child.pid}/fd/{fd}").readlink() == node
            assert "flags:" in Path(f"/proc/{child.pid}/fdinfo/{fd}").read_text()
            reader = DrmFdinfo(Path("/proc"), devices=f"{devices}/")
            assert reader.read([child.pid, os.getpid()]) == {}
            assert DrmFdinfo().read([child.pid]) == {}
        finally:
            child.kill()
    assert DrmFdinfo().read([child.pid]) == {}  # gone
