"""Pure readings of Kubernetes API objects (decoded JSON) into what croft scale needs.

The adapter fetches; these functions only look at dicts, so the same code runs on recorded objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from croft.domain.kube_json import dig
from croft.domain.scaling.decision import DeploymentView, PodView

_QUANTITY_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|([a-zA-Z]{0,2}))$")
_SUFFIXES = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_SCHEME_RE = re.compile(r"^[a-z0-9.+-]+://")


def parse_cpu_quantity(text: str) -> float:
    """A Kubernetes CPU quantity in cores: `500m` = 0.5, `1` = 1.0, `1.5` = 1.5, `2e-1` = 0.2.
    Raises ValueError naming the text when it is not a quantity."""
    match = _QUANTITY_RE.match(text.strip())
    if match is None or (match.group(3) or "") not in _SUFFIXES:
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 500m, 1 or 1.5")
    number = float(match.group(1))
    if match.group(2):
        return number * 10.0 ** int(match.group(2)[1:])
    return number * _SUFFIXES[match.group(3) or ""]


def container_id(raw: str) -> str:
    """`containerd://<id>` / `docker://<id>` / `cri-o://<id>` as the bare id croft's rows carry."""
    return _SCHEME_RE.sub("", raw)


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """A pod and the ids of its running containers (status.containerStatuses[] with a containerID and
    state.running); a Pending pod without statuses has none."""
    ids: list[str] = []
    statuses = dig(pod, "status", "containerStatuses") or []
    for status in statuses if isinstance(statuses, Sequence) else []:
        raw = dig(status, "containerID")
        if isinstance(raw, str) and raw and dig(status, "state", "running") is not None:
            ids.append(container_id(raw))
    return PodView(name=str(dig(pod, "metadata", "name") or "?"), container_ids=tuple(ids))


def template_cpu_limit(deployment: Mapping[str, Any]) -> float | None:
    """The summed resources.limits.cpu of the pod template's containers, in cores; None when no
    container sets one. Raises ValueError for a limit that is not a quantity."""
    containers = dig(deployment, "spec", "template", "spec", "containers") or []
    limits = [dig(c, "resources", "limits", "cpu") for c in containers]
    cores = [parse_cpu_quantity(str(limit)) for limit in limits if limit is not None]
    return sum(cores) if cores else None


def deployment_view(deployment: Mapping[str, Any]) -> DeploymentView:
    """The Deployment's name, spec.replicas (1 when unset, as the API defaults) and CPU limit."""
    replicas = dig(deployment, "spec", "replicas")
    return DeploymentView(
        namespace=str(dig(deployment, "metadata", "namespace") or ""),
        name=str(dig(deployment, "metadata", "name") or ""),
        replicas=int(replicas) if isinstance(replicas, int) else 1,
        cpu_limit_cores=template_cpu_limit(deployment),
    )


def label_selector(deployment: Mapping[str, Any]) -> str:
    """spec.selector as a label selector string (`a=b,c in (d,e)`); raises ValueError when empty."""
    selector = dig(deployment, "spec", "selector") or {}
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(expression.get("values") or [])
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    if not parts:
        raise ValueError("the Deployment has an empty selector")
    return ",".join(parts)
