"""The Kubernetes names of a node's containers, from the API's pod objects, and the rows they tag
(pure: the shell lists and watches the pods, `croft.adapters.kube.pod_watch`).

The collector learns the pods of its own node (a list, then a watch, both with the field selector
`spec.nodeName=<node>`) and keeps a `PodDirectory`: each pod's namespace and name by its UID, and
each container's name by its id, from the pod's `status.containerStatuses` (and init and ephemeral
containers'), whose `containerID` is `<runtime>://<id>` (containerd, CRI-O, docker). A row is
tagged by its container id; a row whose container the status does not list (the pod's sandbox,
the pause process, or a container started since the status was last written) by the pod UID its
cgroup path names, with no container name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import msgspec

from croft.domain.collector.container import pod_uid
from croft.domain.dataset import Pod, Row
from croft.domain.kube_json import dig

STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


@attrs.frozen
class PodEntry:
    """One pod of the node: its UID, namespace and name, and its containers as (id, name) pairs."""

    uid: str
    namespace: str
    name: str
    containers: tuple[tuple[str, str], ...] = ()


def pod_entry(obj: Any) -> PodEntry | None:
    """The entry of one pod object (decoded JSON), or None when it lacks a UID, namespace or name.
    Container ids are the part after `://` of each status's `containerID`, lower-case; a status
    without one (a container not started yet) is left out."""
    uid, namespace, name = (dig(obj, "metadata", key) for key in ("uid", "namespace", "name"))
    if not (isinstance(uid, str) and isinstance(namespace, str) and isinstance(name, str)):
        return None
    if not (uid and namespace and name):
        return None
    containers = []
    for field in STATUS_LISTS:
        statuses = dig(obj, "status", field)
        for status in statuses if isinstance(statuses, list) else ():
            cid, cname = dig(status, "containerID"), dig(status, "name")
            if isinstance(cid, str) and isinstance(cname, str) and "://" in cid and cname:
                containers.append((cid.split("://", 1)[1].lower(), cname))
    return PodEntry(uid, namespace, name, tuple(containers))


@attrs.frozen
class PodDirectory:
    """The node's pods: `pods` by UID. `by_container` and `by_uid` are derived, for lookups."""

    pods: Mapping[str, PodEntry] = attrs.field(factory=dict)
    by_container: Mapping[str, Pod] = attrs.field(init=False, repr=False)
    by_uid: Mapping[str, Pod] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        by_container: dict[str, Pod] = {}
        by_uid: dict[str, Pod] = {}
        for entry in self.pods.values():
            by_uid[entry.uid] = Pod(namespace=entry.namespace, name=entry.name)
            for cid, cname in entry.containers:
                by_container[cid] = Pod(namespace=entry.namespace, name=entry.name, container=cname)
        object.__setattr__(self, "by_container", by_container)
        object.__setattr__(self, "by_uid", by_uid)

    @classmethod
    def of(cls, objects: Iterable[Any]) -> PodDirectory:
        """The directory of a pod list's items."""
        entries = (pod_entry(obj) for obj in objects)
        return cls({e.uid: e for e in entries if e is not None})

    def applied(self, kind: str, obj: Any) -> PodDirectory:
        """The directory after one watch event: ADDED or MODIFIED puts the pod (as it is now),
        DELETED removes it; any other kind (BOOKMARK) changes nothing."""
        entry = pod_entry(obj)
        if entry is None or kind not in ("ADDED", "MODIFIED", "DELETED"):
            return self
        pods = dict(self.pods)
        if kind == "DELETED":
            pods.pop(entry.uid, None)
        else:
            pods[entry.uid] = entry
        return PodDirectory(pods)

    def pod_of(self, row: Row) -> Pod | None:
        """The names of `row`'s container: by its id, else by the pod UID of its cgroup path."""
        cid = row.process.container_id
        if cid is None:
            return None
        return self.by_container.get(cid) or self.by_uid.get(pod_uid(row.process.cgroup))


def named(rows: tuple[Row, ...], directory: PodDirectory) -> tuple[Row, ...]:
    """`rows` with their `pod` set where `directory` names their container (others unchanged)."""
    if not directory.pods:
        return rows
    out = []
    for row in rows:
        pod = directory.pod_of(row)
        out.append(row if pod is None or pod == row.pod else msgspec.structs.replace(row, pod=pod))
    return tuple(out)
