"""Container ids from real cgroup paths of every runtime and layout; host processes have none."""

from __future__ import annotations

import pytest

from croft.domain.collector.container import container_id, display_path, membership_container_id
from croft.domain.collector.snapshot import CgroupMembership

ID = "33813f5d7a8d2b1e9c0f4a6b5d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e"
POD = "4f1c9a2e-7b3d-4e8a-9c6f-0d2b5a7e1c3f"
POD_SYSTEMD = POD.replace("-", "_")

LAYOUTS = [
    # (layout, path as /proc/<pid>/cgroup shows it, expected id)
    ("docker, systemd driver, v2", f"/system.slice/docker-{ID}.scope", ID),
    ("docker, cgroupfs driver, v1", f"/docker/{ID}", ID),
    ("docker-in-docker, v1: the inner container", f"/docker/{ID[::-1]}/docker/{ID}", ID),
    (
        "containerd CRI, systemd driver, v2",
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_SYSTEMD}.slice/cri-containerd-{ID}.scope",
        ID,
    ),
    ("kubepods, cgroupfs driver, v1 burstable", f"/kubepods/burstable/pod{POD}/{ID}", ID),
    ("kubepods, cgroupfs driver, v1 guaranteed", f"/kubepods/pod{POD}/{ID}", ID),
    ("kubepods, cgroupfs driver, v2 besteffort", f"/kubepods/besteffort/pod{POD}/{ID}", ID),
    (
        "kubepods, systemd driver, v2 guaranteed, containerd",
        f"/kubepods.slice/kubepods-pod{POD_SYSTEMD}.slice/cri-containerd-{ID}.scope",
        ID,
    ),
    (
        "CRI-O, systemd driver, v2",
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_SYSTEMD}.slice/crio-{ID}.scope",
        ID,
    ),
    ("CRI-O conmon", f"/machine.slice/crio-conmon-{ID}.scope", ID),
    ("podman rootful, systemd", f"/machine.slice/libpod-{ID}.scope", ID),
    (
        "podman rootless, v2",
        f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container",
        ID,
    ),
    ("podman, cgroupfs manager", f"/libpod_parent/libpod-{ID}", ID),
    (
        "kind node, nested kubelet",
        f"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{POD_SYSTEMD}.slice/cri-containerd-{ID}.scope",
        ID,
    ),
    (
        "containerd, systemd driver on v1, colon form under containerd.service",
        f"/system.slice/containerd.service/kubepods-burstable-pod{POD_SYSTEMD}.slice:cri-containerd:{ID}",
        ID,
    ),
    ("CRI-O, systemd driver on v1, colon form", f"/kubepods-besteffort-pod{POD_SYSTEMD}.slice:crio:{ID}", ID),
    ("docker, systemd driver on v1, colon form", f"/kubepods-pod{POD_SYSTEMD}.slice:docker:{ID}", ID),
    (
        "kind: the pod's container, not the node's",
        f"/docker/{ID[::-1]}/kubepods/besteffort/pod{POD}/{ID}",
        ID,
    ),
    ("host: login session", "/user.slice/user-1000.slice/session-3.scope", None),
    ("host: a system service", "/system.slice/ssh.service", None),
    ("host: docker daemon itself", "/system.slice/docker.service", None),
    ("host: root", "/", None),
    ("host: init", "/init.scope", None),
    ("host: kubepods slice, no container", "/kubepods.slice/kubepods-burstable.slice", None),
]


@pytest.mark.parametrize(("layout", "path", "expected"), LAYOUTS, ids=[row[0] for row in LAYOUTS])
def test_container_id_of_each_layout(layout: str, path: str, expected: str | None) -> None:
    assert container_id(path) == expected


def test_hybrid_host_finds_the_id_in_a_v1_controller_when_v2_is_root() -> None:
    membership = CgroupMembership(
        unified="/",
        controllers=(("cpu", f"/docker/{ID}"), ("memory", f"/docker/{ID}"), ("name=systemd", "/")),
    )
    assert membership_container_id(membership) == ID
    assert display_path(membership) == f"/docker/{ID}"


def test_display_path_prefers_v2_then_v1_then_root() -> None:
    assert display_path(CgroupMembership(unified="/a.slice", controllers=(("cpu", "/b"),))) == "/a.slice"
    assert display_path(CgroupMembership(unified="/", controllers=(("cpu", "/"), ("memory", "/m")))) == "/m"
    assert display_path(CgroupMembership(unified="/", controllers=(("cpu", "/"),))) == "/"
