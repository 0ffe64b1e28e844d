"""The Kubernetes names of the node's containers: pod objects (as the API server answers them) to a
directory, watch events applied to it, and the rows it tags."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.pods import PodDirectory, named, pod_entry
from croft.domain.dataset.row import Pod
from tests.helpers.rows import make_row

UID = "904f341f-15dc-47c0-bce2-167b5d41bb35"
WEB = "abd70765cd741b352b86f73dcf7649a2ac90506e591ef522cb9ebe1ae6fdd69b"
SIDECAR = "032b73284bb57b5cd3e89d320bb662a8c979cb061b943cfc46f57327e5920673"
INIT = "c85f0d46903715c8fcaf4a5acfa6cf3e53e6d093db87872d336b1a45282ee0bc"
SANDBOX = "1e2feb89414c343c1027c4d1c386bbc4cd613e30d8f16adf91b7584a2265b1f5"


def pod(uid: str = UID, name: str = "web-7d9f", namespace: str = "shop", **status: Any) -> dict[str, Any]:
    """A pod object as the API server writes it (the fields read, and some that are not)."""
    return {
        "kind": "Pod",
        "metadata": {"uid": uid, "name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"nodeName": "gpu-a", "containers": [{"name": "web"}, {"name": "proxy"}]},
        "status": status
        or {
            "phase": "Running",
            "containerStatuses": [
                {"name": "web", "containerID": f"containerd://{WEB}", "ready": True},
                {"name": "proxy", "containerID": f"cri-o://{SIDECAR.upper()}", "ready": True},
            ],
            "initContainerStatuses": [{"name": "migrate", "containerID": f"docker://{INIT}"}],
        },
    }


def cgroup(cid: str, uid: str = UID) -> str:
    return f"/kubepods/besteffort/pod{uid}/{cid}"


def test_a_pod_names_each_of_its_containers_and_its_sandbox_by_uid() -> None:
    entry = pod_entry(pod())
    assert entry is not None and (entry.uid, entry.namespace, entry.name) == (UID, "shop", "web-7d9f")
    assert dict(entry.containers) == {WEB: "web", SIDECAR: "proxy", INIT: "migrate"}
    directory = PodDirectory.of([pod()])
    rows = (
        make_row(1, container_id=WEB, cgroup=cgroup(WEB)),
        make_row(2, container_id=SIDECAR, cgroup=cgroup(SIDECAR)),
        make_row(3, container_id=SANDBOX, cgroup=cgroup(SANDBOX), comm="pause"),
        make_row(4, container_id=None, cgroup="/system.slice/kubelet.service"),
        make_row(5, container_id="ee" * 32, cgroup="/system.slice/docker-" + "ee" * 32 + ".scope"),
    )
    tagged = named(rows, directory)
    assert [row.pod for row in tagged] == [
        Pod(namespace="shop", name="web-7d9f", container="web"),
        Pod(namespace="shop", name="web-7d9f", container="proxy"),
        Pod(namespace="shop", name="web-7d9f"),  # the sandbox: the pod, no container
        None,  # a host process
        None,  # a container of no pod of the node (docker run on the node)
    ]
    assert [row.tgid for row in tagged] == [1, 2, 3, 4, 5]
    assert tagged[3] is rows[3]


def test_the_systemd_drivers_pod_slice_names_the_sandbox_too() -> None:
    path = (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        + UID.replace("-", "_")
        + f".slice/cri-containerd-{SANDBOX}.scope"
    )
    (row,) = named((make_row(1, container_id=SANDBOX, cgroup=path),), PodDirectory.of([pod()]))
    assert row.pod == Pod(namespace="shop", name="web-7d9f")


def test_watch_events_add_change_and_remove_pods() -> None:
    directory = PodDirectory.of([])
    starting = pod(phase="Pending", containerStatuses=[{"name": "web", "state": {"waiting": {}}}])
    directory = directory.applied("ADDED", starting)
    row = make_row(1, container_id=WEB, cgroup=cgroup(WEB))
    assert directory.pod_of(row) == Pod(namespace="shop", name="web-7d9f")  # by UID until started
    directory = directory.applied("MODIFIED", pod())
    assert directory.pod_of(row) == Pod(namespace="shop", name="web-7d9f", container="web")
    assert directory.applied("BOOKMARK", {"metadata": {"resourceVersion": "9"}}) is directory
    db = pod(
        uid="11111111-2222-3333-4444-555555555555",
        name="db-0",
        containerStatuses=[{"name": "db", "containerID": f"containerd://{'dd' * 32}"}],
    )
    other = directory.applied("ADDED", db)
    assert len(other.pods) == 2 and len(directory.pods) == 1  # a directory never changes
    assert other.applied("DELETED", pod()).pod_of(row) is None


@given(st.sampled_from([None, {}, {"metadata": {}}, {"metadata": {"uid": 7, "name": "x", "namespace": "y"}}]))
def test_an_object_that_is_no_pod_changes_nothing(obj: Any) -> None:
    assert pod_entry(obj) is None
    directory = PodDirectory.of([pod()])
    assert directory.applied("ADDED", obj) is directory and PodDirectory.of([obj]).pods == {}


def test_names_already_there_are_kept_and_an_empty_directory_tags_nothing() -> None:
    rows = (make_row(1, container_id=WEB, cgroup=cgroup(WEB)),)
    assert named(rows, PodDirectory()) is rows
    once = named(rows, PodDirectory.of([pod()]))
    assert named(once, PodDirectory.of([pod()]))[0] is once[0]
