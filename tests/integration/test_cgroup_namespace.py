"""The collector in a cgroup namespace of its own (a pod on a cgroup-v2 node): the start-up search
for its namespace root's host path on fixture trees, and for real, with a child unsharing its
cgroup namespace on this host and reading another process's cgroup."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.cgroupns import find_namespace_root
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.container import membership_container_id
from croft.domain.collector.selection import parse_watch, watched

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "procfs" / "v2" / "proc"
COLLECTOR_ID = "5e0c4b1a9d8f7e6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e"
WORKLOAD_ID = "9f3a7c2e1d0b4a5968776655443322110ffeeddccbbaa9988776655443322110"
COLLECTOR_POD = "pod3f1c9b2e-7a4d-4f0e-9c61-2b8d5e0a1f47"
WORKLOAD_POD = "podb6a2d8e4-1c3f-4e5a-8b7d-9f0e1a2b3c4d"
COLLECTOR_CGROUP = f"/kubepods/{COLLECTOR_POD}/{COLLECTOR_ID}"  # guaranteed QoS, cgroupfs driver
WORKLOAD_CGROUP = f"/kubepods/besteffort/{WORKLOAD_POD}/{WORKLOAD_ID}"


def _cgroup_dir(root: Path, path: str, procs: str = "") -> Path:
    directory = root / path.lstrip("/")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cgroup.procs").write_text(procs)
    return directory


def _node(tmp_path: Path, init_line: str, collector_line: str) -> tuple[Path, Path, int, int]:
    """A captured /proc whose first pid plays the collector (reading `collector_line` for itself)
    and the others a pod's workload as seen from inside the collector's namespace, plus a host
    cgroup2 tree where the collector's pid is listed at COLLECTOR_CGROUP."""
    proc = tmp_path / "proc"
    shutil.copytree(FIXTURE, proc, symlinks=True)
    pids = sorted(int(p.name) for p in proc.iterdir())
    collector, workload = pids[0], pids[1:]
    shutil.copytree(proc / str(workload[0]), proc / "1", symlinks=True)
    (proc / "1" / "cgroup").write_text(init_line + "\n")
    (proc / str(collector) / "cgroup").write_text(collector_line + "\n")
    for pid in workload:
        (proc / str(pid) / "cgroup").write_text(f"0::/../../besteffort/{WORKLOAD_POD}/{WORKLOAD_ID}\n")
    cgroup = tmp_path / "cgroup"
    _cgroup_dir(cgroup, "/", "1\n")
    (cgroup / "cgroup.controllers").write_text("cpu io memory pids\n")
    _cgroup_dir(cgroup, "/kubepods/besteffort")
    _cgroup_dir(cgroup, COLLECTOR_CGROUP, f"{collector}\n")
    workload_dir = _cgroup_dir(cgroup, WORKLOAD_CGROUP, "".join(f"{pid}\n" for pid in workload))
    (workload_dir / "cpu.pressure").write_text("some avg10=12.50 avg60=3.00 avg300=1.00 total=99\n")
    return proc, cgroup, collector, workload[0]


def test_a_namespaced_collector_recovers_host_paths_on_a_fixture_node(tmp_path: Path) -> None:
    proc, cgroup, collector, workload = _node(tmp_path, "0::/../../..", "0::/")
    namespace = find_namespace_root(proc, str(cgroup), pid=collector)
    assert namespace.root == COLLECTOR_CGROUP
    assert not namespace.unresolved
    assert COLLECTOR_CGROUP in namespace.summary
    samples, dropped = ProcFS(proc, cgroup_namespace_root=namespace.root).scan(lambda _, __: True)
    assert dropped == 0
    by_pid = {s.tgid: s for s in samples}
    membership = by_pid[workload].cgroups
    assert membership.unified == WORKLOAD_CGROUP
    assert by_pid[collector].cgroups.unified == COLLECTOR_CGROUP
    assert membership_container_id(membership) == WORKLOAD_ID
    assert watched(membership, parse_watch("kubepods"))
    (read,) = CgroupFS(cgroup).read_all([membership])
    assert read.cpu_pressure_avg10 == 12.5


def test_without_the_root_the_paths_stay_broken(tmp_path: Path) -> None:
    """What the fix is for: as read, neither the watch prefix nor the cgroup files match."""
    proc, cgroup, _, workload = _node(tmp_path, "0::/../../..", "0::/")
    samples, _ = ProcFS(proc).scan(lambda _, __: True)
    membership = next(s.cgroups for s in samples if s.tgid == workload)
    assert membership.unified is not None and membership.unified.startswith("/../../")
    assert not watched(membership, parse_watch("kubepods"))
    (read,) = CgroupFS(cgroup).read_all([membership])
    assert read.cpu_pressure_avg10 is None


def test_in_the_hosts_namespace_paths_are_used_as_read(tmp_path: Path) -> None:
    proc, cgroup, collector, _ = _node(tmp_path, "0::/init.scope", f"0::{COLLECTOR_CGROUP}")
    namespace = find_namespace_root(proc, str(cgroup), pid=collector)
    assert namespace.root is None
    assert not namespace.unresolved
    assert "the host's" in namespace.summary


def test_a_namespace_whose_root_cannot_be_found_says_so(tmp_path: Path) -> None:
    proc, cgroup, collector, _ = _node(tmp_path, "0::/../../..", "0::/")
    (cgroup / COLLECTOR_CGROUP.lstrip("/") / "cgroup.procs").write_text("")  # not the host's tree
    namespace = find_namespace_root(proc, str(cgroup), pid=collector)
    assert namespace.root is None
    assert namespace.unresolved
    assert f"lists pid {collector}" in namespace.summary
    assert "left as read" in namespace.summary
    assert find_namespace_root(proc, None, pid=collector).unresolved


def _v2_mount() -> Path:
    for candidate in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (candidate / "cgroup.controllers").exists():
            return candidate
    pytest.skip("no cgroup v2 hierarchy on this host")


_COLLECTOR_CODE = """
import json, sys
from pathlib import Path
from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.cgroupns import find_namespace_root
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.container import membership_container_id
from croft.domain.collector.selection import parse_watch, watched

workload, watch = int(sys.argv[1]), sys.argv[2]
cgroupfs = CgroupFS(Path("/sys/fs/cgroup"))
namespace = find_namespace_root(Path("/proc"), cgroupfs.unified)
raw, _ = ProcFS().scan(lambda tgid, _: tgid == workload)
fixed, _ = ProcFS(cgroup_namespace_root=namespace.root).scan(lambda tgid, _: tgid == workload)
(cgroups,) = cgroupfs.read_all([fixed[0].cgroups])
(raw_cgroups,) = cgroupfs.read_all([raw[0].cgroups])
print(json.dumps({
    "own": Path("/proc/self/cgroup").read_text(),
    "root": namespace.root,
    "summary": namespace.summary,
    "raw": raw[0].cgroups.unified,
    "host": fixed[0].cgroups.unified,
    "container_id": membership_container_id(fixed[0].cgroups),
    "watched": watched(fixed[0].cgroups, parse_watch(watch)),
    "raw_watched": watched(raw[0].cgroups, parse_watch(watch)),
    "pressure": cgroups.cpu_pressure_avg10,
    "raw_pressure": raw_cgroups.cpu_pressure_avg10,
}))
"""


@pytest.mark.root
def test_a_real_cgroup_namespace_on_this_host() -> None:
    """A child joins a pod-shaped cgroup, unshares its cgroup namespace (util-linux `unshare
    --cgroup`) and acts as the collector, reading a sleeper in another pod's cgroup."""
    if os.geteuid() != 0:
        pytest.skip("creating cgroups and cgroup namespaces needs root")
    if shutil.which("unshare") is None:
        pytest.skip("util-linux unshare is not installed")
    mount = _v2_mount()
    top = f"/croft-ns-test-{os.getpid()}"
    collector_cgroup, workload_cgroup = top + COLLECTOR_CGROUP, top + WORKLOAD_CGROUP
    made = [mount / p.lstrip("/") for p in (collector_cgroup, workload_cgroup)]
    for directory in made:
        directory.mkdir(parents=True)
    sleeper = None
    try:
        sleeper = subprocess.Popen(
            ["sleep", "300"],
            preexec_fn=lambda: (made[1] / "cgroup.procs").write_text(str(os.getpid())),
        )
        collector = subprocess.run(
            [
                "unshare",
                "--cgroup",
                sys.executable,
                "-c",
                _COLLECTOR_CODE,
                str(sleeper.pid),
                top + "/kubepods",
            ],
            preexec_fn=lambda: (made[0] / "cgroup.procs").write_text(str(os.getpid())),
            capture_output=True,
            check=True,
            timeout=60,
        )
        seen = json.loads(collector.stdout)
    finally:
        if sleeper is not None:
            sleeper.send_signal(signal.SIGKILL)
            sleeper.wait()
        _remove(mount, top)
    assert "0::/" in seen["own"].splitlines()  # the child sits at its own namespace's root
    assert seen["raw"] == f"/../../besteffort/{WORKLOAD_POD}/{WORKLOAD_ID}"  # what the kernel showed
    assert seen["root"] == collector_cgroup
    assert collector_cgroup in seen["summary"]
    assert seen["host"] == workload_cgroup
    assert seen["container_id"] == WORKLOAD_ID
    assert seen["watched"] and not seen["raw_watched"]
    if (mount / "cpu.pressure").exists():  # PSI on: the v2 files of the host path were read
        assert seen["pressure"] is not None
        assert seen["raw_pressure"] is None


def _remove(mount: Path, top: str) -> None:
    """rmdir the test tree, deepest first (a cgroup is removable once its processes are gone)."""
    directories = sorted((p for p in (mount / top.lstrip("/")).rglob("*") if p.is_dir()), reverse=True)
    for directory in [*directories, mount / top.lstrip("/")]:
        for _ in range(50):
            try:
                directory.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
