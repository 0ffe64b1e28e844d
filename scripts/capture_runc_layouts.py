"""Capture real /proc/<pid>/cgroup files written by runc (the runtime docker and containerd call)
with its cgroupfs manager on this host, for fixtures/cgroup-layouts/ (root; needs runc and a static
busybox).

    sudo .venv/bin/python scripts/capture_runc_layouts.py

For each case, a busybox `sleep` runs as a runc container whose cgroupsPath is what a caller passes:
docker's cgroupfs driver `/docker/<id>`; containerd CRI under the kubelet's cgroupfs driver
`/kubepods/besteffort/pod<uid>/<id>`; containerd with SystemdCgroup handing its systemd form
`<pod slice>:cri-containerd:<id>` to a cgroupfs-managed runc started from containerd.service's
cgroup (the v1 colon form croft must read). The container's cgroup file is copied, the container and
the cgroups made for it removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "cgroup-layouts"
CGROUP = Path("/sys/fs/cgroup")
CASES = (
    (
        "runc-docker-cgroupfs-hybrid.txt",
        "/docker/5f1c0a9e3b7d4c2a8e6f1b0d9c8a7e6f5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a",
        None,
    ),
    (
        "runc-kubepods-cgroupfs-hybrid-besteffort.txt",
        "/kubepods/besteffort/pod74c13223-5a00-11e9-b385-42010a80018d/"
        "34dc0b5e626f2c5c4c5170e34b10e7654ce36f0fcd532739f4445baabea03376",
        None,
    ),
    (
        "runc-colon-under-containerd-service-hybrid.txt",
        "kubepods-besteffort-pod214f3ba8_4b69_4bdb_a7d5_5ecc73f04ae9.slice:cri-containerd:"
        "d4e8e05a546c86b6443f101966c618e47753ed01fa9929cae00d3b692f7a9f80",
        "system.slice/containerd.service",
    ),
)


def _hierarchies() -> list[Path]:
    return [h for h in sorted(CGROUP.iterdir()) if (h / "cgroup.procs").exists()]


def _remove_tree(relative: str) -> None:
    """rmdir `relative` and its parents in every hierarchy, deepest first, where empty."""
    parts = Path(relative.strip("/")).parts
    for depth in range(len(parts), 0, -1):
        for hierarchy in _hierarchies():
            with contextlib.suppress(OSError):
                (hierarchy / Path(*parts[:depth])).rmdir()


def capture(bundle: Path, name: str, cgroups_path: str, parent: str | None) -> str:
    spec = json.loads((bundle / "config.json").read_text())
    spec["linux"]["cgroupsPath"] = cgroups_path
    (bundle / "config.json").write_text(json.dumps(spec))
    cid = name.split(".")[0][:30]
    prefix = ""
    if parent is not None:
        for hierarchy in _hierarchies():
            (hierarchy / parent).mkdir(parents=True, exist_ok=True)
        # join parent wherever the kernel lets us (v1 cpuset refuses a cgroup without cpus), then run runc
        prefix = f'for h in {CGROUP}/*/{parent}; do echo $$ > "$h/cgroup.procs" 2>/dev/null; done; '
    runner = subprocess.Popen(
        ["sh", "-c", f"{prefix}exec runc run {cid}"],
        cwd=bundle,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(100):
            state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=False)
            if state.returncode == 0 and json.loads(state.stdout)["status"] == "running":
                break
            time.sleep(0.1)
        pid = json.loads(state.stdout)["pid"]
        return Path(f"/proc/{pid}/cgroup").read_text()
    finally:
        subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False)
        runner.wait(timeout=30)
        subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)
        _remove_tree(cgroups_path if cgroups_path.startswith("/") else "")
        if parent is not None:
            _remove_tree(parent)


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("capture_runc_layouts.py needs root: runc creates cgroups")
    busybox = shutil.which("busybox")
    if shutil.which("runc") is None or busybox is None:
        raise SystemExit("capture_runc_layouts.py needs runc and a static busybox")
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp)
        (bundle / "rootfs" / "bin").mkdir(parents=True)
        shutil.copy(busybox, bundle / "rootfs" / "bin" / "busybox")
        (bundle / "rootfs" / "bin" / "sleep").symlink_to("busybox")
        subprocess.run(["runc", "spec"], cwd=bundle, check=True)
        spec = json.loads((bundle / "config.json").read_text())
        spec["process"]["terminal"] = False
        spec["process"]["args"] = ["/bin/sleep", "60"]
        spec["root"]["readonly"] = True
        (bundle / "config.json").write_text(json.dumps(spec))
        for name, cgroups_path, parent in CASES:
            text = capture(bundle, name, cgroups_path, parent)
            (OUT / name).write_text(text)
            print(f"{name}:\n{text}")


if __name__ == "__main__":
    main()
