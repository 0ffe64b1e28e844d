"""The Kubernetes objects behind `croft run --auth kubernetes` (`croft.domain.access`), as pure values.

- the collector's ServiceAccount may create TokenReviews and SubjectAccessReviews: a
  ClusterRoleBinding to Kubernetes' own ClusterRole `system:auth-delegator`, as kube-rbac-proxy's
  deployments bind it;
- two ClusterRoles, one per route, granting `get` on the non-resource URL `/metrics` or `/dataset`
  and nothing else, so /metrics and /dataset are granted apart (a Prometheus whose ClusterRole
  already grants `/metrics`, as most do, reads /metrics as it is);
- two ServiceAccounts in the collector's namespace, `croft-dataset-reader` and
  `croft-metrics-reader`, bound to them: `croft collect` and `croft scale` ask for 10-minute tokens
  of these (TokenRequest), which may do nothing else;
- the Roles `croft-collect` and `croft-metrics` let their users list the collector pods, get
  pods/proxy and create a token of their reader (and only that reader).

Cluster-scoped names carry the namespace (`croft:croft-metrics-reader`), so two deployments
(another --namespace) share none and `croft deploy kubernetes --delete` removes only its own.
"""

from __future__ import annotations

from typing import Any

from croft.domain.access import DATASET_READER, METRICS_READER
from croft.domain.deploy.labels import SELECTOR

Manifest = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"
ROUTE_ROLES = ((DATASET_READER, "/dataset"), (METRICS_READER, "/metrics"))


def _labels() -> dict[str, str]:
    return {**SELECTOR, "app.kubernetes.io/part-of": "croft"}


def route_role(namespace: str, reader: str) -> str:
    """The ClusterRole of a reader's route, e.g. `croft:croft-metrics-reader` (bind a Prometheus'
    ServiceAccount to it where its own ClusterRole does not grant the non-resource URL /metrics)."""
    return f"{namespace}:{reader}"


def _binding(name: str, role: str, account: str, namespace: str) -> Manifest:
    return {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": _labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def reader_role(name: str, namespace: str, reader: str) -> Manifest:
    """A Role of `namespace` for a reader of the collectors through the API server: list their
    pods, get pods/proxy, and create a token of the ServiceAccount `reader`."""
    return {
        "apiVersion": RBAC,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels()},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]},
            {
                "apiGroups": [""],
                "resources": ["serviceaccounts/token"],
                "resourceNames": [reader],
                "verbs": ["create"],
            },
        ],
    }


def reader_manifests(namespace: str, collector_account: str) -> tuple[Manifest, ...]:
    """The objects above, in apply order (after the namespace and the collector's ServiceAccount)."""
    out: list[Manifest] = [
        _binding(f"{namespace}:{collector_account}:auth-delegator", "system:auth-delegator",
                 collector_account, namespace),
    ]  # fmt: skip
    for reader, route in ROUTE_ROLES:
        out.append(
            {
                "apiVersion": RBAC,
                "kind": "ClusterRole",
                "metadata": {"name": route_role(namespace, reader), "labels": _labels()},
                "rules": [{"nonResourceURLs": [route], "verbs": ["get"]}],
            }
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": reader, "namespace": namespace, "labels": _labels()},
                "automountServiceAccountToken": False,
            }
        )
        out.append(_binding(route_role(namespace, reader), route_role(namespace, reader), reader, namespace))
    out.append(reader_role("croft-metrics", namespace, METRICS_READER))
    return tuple(out)
