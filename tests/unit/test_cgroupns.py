"""Host cgroup paths from paths read inside a container's cgroup namespace: tables of the shapes
containerd and CRI-O produce on cgroup v2, and the laws of joining and normalizing."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.cgroupns import (
    host_membership,
    host_path,
    lists_pid,
    namespace_root,
    normalized,
    outside_namespace,
)
from croft.domain.collector.container import membership_container_id
from croft.domain.collector.selection import parse_watch, watched
from croft.domain.collector.snapshot import CgroupMembership

COLLECTOR = "5e0c4b1a9d8f7e6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e"
WORKLOAD = "9f3a7c2e1d0b4a5968776655443322110ffeeddccbbaa9988776655443322110"
POD_A = "3f1c9b2e_7a4d_4f0e_9c61_2b8d5e0a1f47"
POD_B = "b6a2d8e4_1c3f_4e5a_8b7d_9f0e1a2b3c4d"
UID_A = POD_A.replace("_", "-")
UID_B = POD_B.replace("_", "-")

# (runtime and driver, collector's namespace root on the host, path as read in it, host path)
CASES = [
    (
        "containerd, systemd driver, besteffort collector, burstable workload",
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_A}.slice"
        f"/cri-containerd-{COLLECTOR}.scope",
        f"/../../../kubepods-burstable.slice/kubepods-burstable-pod{POD_B}.slice"
        f"/cri-containerd-{WORKLOAD}.scope",
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_B}.slice"
        f"/cri-containerd-{WORKLOAD}.scope",
    ),
    (
        "containerd, cgroupfs driver, guaranteed collector, besteffort workload",
        f"/kubepods/pod{UID_A}/{COLLECTOR}",
        f"/../../besteffort/pod{UID_B}/{WORKLOAD}",
        f"/kubepods/besteffort/pod{UID_B}/{WORKLOAD}",
    ),
    (
        "containerd, the workload in the collector's own pod (a sibling container)",
        f"/kubepods/besteffort/pod{UID_A}/{COLLECTOR}",
        f"/../{WORKLOAD}",
        f"/kubepods/besteffort/pod{UID_A}/{WORKLOAD}",
    ),
    (
        "CRI-O, systemd driver, guaranteed pods",
        f"/kubepods.slice/kubepods-pod{POD_A}.slice/crio-{COLLECTOR}.scope",
        f"/../../kubepods-pod{POD_B}.slice/crio-{WORKLOAD}.scope",
        f"/kubepods.slice/kubepods-pod{POD_B}.slice/crio-{WORKLOAD}.scope",
    ),
    (
        "CRI-O, the workload's conmon",
        f"/kubepods.slice/kubepods-pod{POD_A}.slice/crio-{COLLECTOR}.scope",
        f"/../../kubepods-pod{POD_B}.slice/crio-conmon-{WORKLOAD}.scope",
        f"/kubepods.slice/kubepods-pod{POD_B}.slice/crio-conmon-{WORKLOAD}.scope",
    ),
    (
        "the collector itself, at its namespace root",
        f"/kubepods/besteffort/pod{UID_A}/{COLLECTOR}",
        "/",
        f"/kubepods/besteffort/pod{UID_A}/{COLLECTOR}",
    ),
    (
        "a cgroup below the collector's root",
        f"/kubepods/besteffort/pod{UID_A}/{COLLECTOR}",
        "/helper",
        f"/kubepods/besteffort/pod{UID_A}/{COLLECTOR}/helper",
    ),
    (
        "a host service, from a systemd-driver pod",
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_A}.slice"
        f"/cri-containerd-{COLLECTOR}.scope",
        "/../../../../system.slice/containerd.service",
        "/system.slice/containerd.service",
    ),
    (
        "host init",
        f"/kubepods/pod{UID_A}/{COLLECTOR}",
        "/../../..",
        "/",
    ),
]


@pytest.mark.parametrize(("root", "as_read", "host"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_paths_read_in_a_namespace_become_host_paths(root: str, as_read: str, host: str) -> None:
    assert host_path(as_read, root) == host


@pytest.mark.parametrize(("root", "as_read", "host"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_container_id_and_watch_prefix_come_back(root: str, as_read: str, host: str) -> None:
    raw = CgroupMembership(unified=as_read)
    fixed = host_membership(raw, root)
    assert fixed.unified == host
    if WORKLOAD in as_read:
        assert membership_container_id(fixed) == WORKLOAD
        assert watched(fixed, parse_watch("kubepods"))
        assert not watched(raw, parse_watch("kubepods"))


def test_v1_paths_and_the_host_namespace_are_left_alone() -> None:
    membership = CgroupMembership(unified="/../x", controllers=(("memory", "/../y"),))
    assert host_membership(membership, None) is membership
    assert host_membership(membership, "/a/b").controllers == (("memory", "/../y"),)
    v1_only = CgroupMembership(unified=None, controllers=(("cpu", "/docker/abc"),))
    assert host_membership(v1_only, "/a") is v1_only


@pytest.mark.parametrize(
    ("own_host", "own_read", "root"),
    [
        (f"/kubepods/pod{UID_A}/{COLLECTOR}", "/", f"/kubepods/pod{UID_A}/{COLLECTOR}"),
        (f"/kubepods/pod{UID_A}/{COLLECTOR}/worker", "/worker", f"/kubepods/pod{UID_A}/{COLLECTOR}"),
        ("/system.slice/croft.service", "/system.slice/croft.service", "/"),
        ("/a/b/c", "/x", None),  # the cgroup found is not where the collector says it is
        ("/a/bc", "/c", None),  # a suffix of a name is not a component
        ("/a/b", "/../b", None),  # moved out of its namespace: the root's name is lost
    ],
)
def test_the_namespace_root_from_where_the_collector_sits(
    own_host: str, own_read: str, root: str | None
) -> None:
    assert namespace_root(own_host, own_read) == root


def test_cgroup_procs_listing() -> None:
    assert lists_pid(b"1\n4242\n17\n", 4242)
    assert not lists_pid(b"14242\n42420\n", 4242)
    assert not lists_pid(b"", 1)


def test_outside_the_namespace_is_a_leading_dotdot() -> None:
    assert outside_namespace("/../../besteffort")
    assert outside_namespace("/..")
    assert not outside_namespace("/")
    assert not outside_namespace("/..foo/bar")
    assert not outside_namespace("/kubepods/..")


# --- laws ---

names = st.text(alphabet="abcdefgh0123456789-_.:@", min_size=1, max_size=8).filter(
    lambda s: s not in {".", ".."}
)
components = st.lists(names, max_size=6)
raw_paths = st.lists(st.one_of(names, st.sampled_from(["..", ".", ""])), max_size=10).map(
    lambda parts: "/" + "/".join(parts)
)


def absolute(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def kernel_view(target: list[str], root: list[str]) -> str:
    """How the kernel shows cgroup `target` to a reader whose namespace root is `root`: from the
    root up to their common ancestor with `..`, then down (kernfs_path_from_node)."""
    common = 0
    while common < min(len(target), len(root)) and target[common] == root[common]:
        common += 1
    return absolute([".."] * (len(root) - common) + target[common:])


@given(raw_paths)
def test_identity_outside_a_namespace(path: str) -> None:
    assert host_path(path, None) == path


@given(raw_paths, components)
def test_never_escapes_above_the_root(path: str, root: list[str]) -> None:
    result = host_path(path, absolute(root))
    assert result.startswith("/")
    assert result == "/" or not result.endswith("/")
    assert all(part not in ("", ".", "..") for part in result.split("/")[1:] if result != "/")


@given(raw_paths, components)
def test_joining_then_normalizing(path: str, root: list[str]) -> None:
    joined = posixpath.normpath(posixpath.join(absolute(root), path.lstrip("/")))
    assert host_path(path, absolute(root)) == joined


@given(components, components)
def test_inverts_the_kernels_view(target: list[str], root: list[str]) -> None:
    assert host_path(kernel_view(target, root), absolute(root)) == absolute(target)


@given(components, components)
def test_the_root_is_recovered_from_the_collectors_own_cgroup(root: list[str], own: list[str]) -> None:
    assert namespace_root(absolute(root + own), absolute(own)) == absolute(root)


@given(raw_paths)
def test_normalizing_is_idempotent(path: str) -> None:
    once = normalized(path)
    assert normalized(once) == once
