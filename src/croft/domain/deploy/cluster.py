"""Pure readings of Kubernetes objects (decoded JSON) for croft deploy and croft collect: where an
object lives in the API, whether an apply changed it, how far a DaemonSet's rollout is, and which
collector pod to pull each node's dataset from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from croft.domain.dataset import is_safe_name
from croft.domain.kube_json import dig

# kind -> (API prefix, plural, namespaced), for the kinds croft deploy applies.
_KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
}
# Fields the API server keeps for itself: an apply that changes only these changed nothing.
_SERVER_FIELDS = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")


def object_path(manifest: Mapping[str, Any]) -> str:
    """The API path of the object `manifest` describes; ValueError for a kind croft does not apply."""
    kind, name = manifest.get("kind"), dig(manifest, "metadata", "name")
    if kind not in _KINDS or not isinstance(name, str):
        raise ValueError(f"croft deploy does not apply {kind!r} objects")
    prefix, plural, namespaced = _KINDS[kind]
    if namespaced:
        return f"{prefix}/namespaces/{dig(manifest, 'metadata', 'namespace')}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def describe(manifest: Mapping[str, Any]) -> str:
    """`DaemonSet croft/croft-collector`, `Namespace croft`."""
    meta = manifest.get("metadata") or {}
    where = f"{meta['namespace']}/" if "namespace" in meta else ""
    return f"{manifest.get('kind')} {where}{meta.get('name')}"


def comparable(obj: Mapping[str, Any] | None) -> Any:
    """The object less its status and the metadata the server keeps for itself."""
    if obj is None:
        return None
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def changed(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> bool:
    """Whether an apply turned `before` (None: absent) into something else."""
    return bool(comparable(before) != comparable(after))


@attrs.frozen
class Rollout:
    """A DaemonSet's rollout: nodes that should run a collector, those that have one, those whose
    pod runs the current template, and the pods ready. `done` once every node that should have an
    up-to-date pod has one (scheduled; readiness is reported, not waited for), on one node at
    least: a DaemonSet that runs nowhere is not deployed."""

    desired: int
    scheduled: int
    updated: int
    ready: int
    observed: bool

    @property
    def done(self) -> bool:
        return self.observed and self.desired > 0 and self.scheduled == self.updated == self.desired

    def line(self) -> str:
        if not self.observed:
            return "waiting for the DaemonSet controller to see the new template"
        return (
            f"{self.updated}/{self.desired} nodes with an up-to-date collector scheduled, "
            f"{self.scheduled} scheduled in all, {self.ready} ready"
        )


def rollout(daemonset: Mapping[str, Any]) -> Rollout:
    """The rollout of a DaemonSet object as the API server returned it."""
    status = daemonset.get("status") or {}
    generation = dig(daemonset, "metadata", "generation") or 0
    return Rollout(
        desired=int(status.get("desiredNumberScheduled") or 0),
        scheduled=int(status.get("currentNumberScheduled") or 0),
        updated=int(status.get("updatedNumberScheduled") or 0),
        ready=int(status.get("numberReady") or 0),
        observed=int(status.get("observedGeneration") or 0) >= int(generation),
    )


def why_not(state: Rollout, events: Iterable[Mapping[str, Any]]) -> str:
    """Why a rollout is not done, for the timeout message: the newest warning events (quota,
    admission, pod security), else what the counts say."""
    warnings = sorted(
        (e for e in events if e.get("type") == "Warning"),
        key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
    )
    messages = list(dict.fromkeys(f"{e.get('reason')}: {e.get('message')}" for e in warnings))
    if messages:
        return "; ".join(messages[-2:])
    if not state.observed:
        return "the DaemonSet controller has not seen the new template (is kube-controller-manager running?)"
    if state.desired == 0:
        return "no node matches the DaemonSet (no Linux nodes, or none that its node selector allows)"
    return f"{state.desired - state.updated} nodes still wait for an up-to-date collector pod"


@attrs.frozen
class Targets:
    """Collector pods to pull from, one per node (`(node, pod)` in node order), and pods skipped
    with the reason."""

    nodes: tuple[tuple[str, str], ...]
    skipped: tuple[tuple[str, str], ...]


def collector_targets(pods: Sequence[Mapping[str, Any]]) -> Targets:
    """One pod per node among `pods`: Running, on a node, with a pod IP; a node name that is not a
    plain safe name is refused; of several pods on one node (a rollout) the ready, newest one."""
    best: dict[str, tuple[tuple[bool, str], str]] = {}
    skipped: list[tuple[str, str]] = []
    for pod in pods:
        name = str(dig(pod, "metadata", "name") or "?")
        node = dig(pod, "spec", "nodeName")
        if not isinstance(node, str) or not node:
            skipped.append((name, "not scheduled on a node yet"))
            continue
        if not is_safe_name(node):
            skipped.append((name, f"its node name {node!r:.80} is not a plain safe name"))
            continue
        if dig(pod, "status", "phase") != "Running" or not dig(pod, "status", "podIP"):
            skipped.append((name, f"{dig(pod, 'status', 'phase') or 'Pending'} on {node}, not running"))
            continue
        conditions = dig(pod, "status", "conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        rank = (ready, str(dig(pod, "metadata", "creationTimestamp") or ""))
        if node in best:
            loser = min(best[node], (rank, name))
            skipped.append((loser[1], f"another collector pod on {node} is newer or ready"))
        if node not in best or rank > best[node][0]:
            best[node] = (rank, name)
    return Targets(tuple((node, best[node][1]) for node in sorted(best)), tuple(skipped))
