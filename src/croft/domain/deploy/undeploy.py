"""What `croft deploy kubernetes --delete` removes: a pure plan from the objects deploy applies and
what the cluster holds now.

Every object deploy applies is deleted, last applied first, when the cluster holds it with croft's
label (`app.kubernetes.io/part-of: croft`); one without the label is someone else's and is kept.
The namespace goes too, but only when croft labelled it, it is not one of Kubernetes' own, and no
pod but the collector's runs in it: deleting a namespace deletes everything in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

PART_OF = ("app.kubernetes.io/part-of", "croft")
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@attrs.frozen
class Step:
    """One object of the plan: `delete` it, or keep it (`why` says why: absent, not croft's, ...)."""

    manifest: Mapping[str, Any]
    delete: bool
    why: str = ""


def _croft_labelled(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(PART_OF[0]) == PART_OF[1])


def plan(
    manifests: Sequence[Mapping[str, Any]],
    live: Mapping[int, Mapping[str, Any] | None],
    other_pods: Sequence[str],
) -> tuple[Step, ...]:
    """The steps for `manifests` (deploy's apply order) given `live` (index in `manifests` -> the
    object the cluster holds, None when absent) and the names of pods in the namespace that are not
    the collector's."""
    steps = []
    for index in reversed(range(len(manifests))):
        manifest, held = manifests[index], live.get(index)
        kind = manifest.get("kind")
        if held is None:
            steps.append(Step(manifest, False, "not there"))
        elif (held.get("metadata") or {}).get("deletionTimestamp"):
            steps.append(Step(manifest, False, "being deleted already"))
        elif not _croft_labelled(held):
            steps.append(
                Step(manifest, False, "not croft's (no app.kubernetes.io/part-of=croft label): kept")
            )
        elif kind == "Namespace" and (manifest.get("metadata") or {}).get("name") in RESERVED_NAMESPACES:
            steps.append(Step(manifest, False, "one of Kubernetes' own namespaces: kept"))
        elif kind == "Namespace" and other_pods:
            shown = ", ".join(sorted(other_pods)[:3]) + (" ..." if len(other_pods) > 3 else "")
            steps.append(Step(manifest, False, f"other pods run in it ({shown}): kept"))
        else:
            steps.append(Step(manifest, True))
    return tuple(steps)
