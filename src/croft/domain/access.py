"""Who may read the collector's endpoints, as `croft run --auth kubernetes` decides it (pure).

A reader sends a bearer token: in `Authorization` when it reaches the pod directly (Prometheus,
with its ServiceAccount's token), or in `X-Croft-Authorization` when it goes through the API
server's pod proxy (`croft collect`, `croft scale`), which authenticates the caller and then drops
its `Authorization` header before proxying (kubernetes/kubernetes#38775). The collector asks the
API server who the token is (a TokenReview) and whether that user may `get` the route as a
non-resource URL (a SubjectAccessReview on `/metrics` or `/dataset`), as kube-rbac-proxy does in
front of node_exporter: so /metrics and /dataset are granted apart, by ClusterRoles with
`nonResourceURLs: ["/metrics"]` or `["/dataset"]`. `/healthz` and `/` stay open (the kubelet's
probes carry no token; they say nothing of the dataset).

The readers croft ships get their token from the TokenRequest API, for a ServiceAccount that may
do nothing but read one route (`DATASET_READER`, `METRICS_READER`), valid `READER_TOKEN_S`: a token
a collector sees cannot be used for anything else, and not for long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

AUTH_MODES = ("none", "kubernetes")
FORWARDED_HEADER = "X-Croft-Authorization"
PROTECTED = ("/metrics", "/dataset")
DATASET_READER = "croft-dataset-reader"
METRICS_READER = "croft-metrics-reader"
READER_TOKEN_S = 600  # the shortest a TokenRequest may ask for


def protected_route(path: str) -> str | None:
    """The route a request path falls under when it needs a reader's token (`/metrics`, `/dataset`),
    or None for an open one."""
    for route in PROTECTED:
        if path == route or path.startswith(route + "/"):
            return route
    return None


def bearer_token(headers: Iterable[tuple[str, str]]) -> str | None:
    """The bearer token of `Authorization`, else of `FORWARDED_HEADER`; None when neither has one."""
    found: dict[str, str] = {}
    for name, value in headers:
        found.setdefault(name.lower(), value)
    for name in ("authorization", FORWARDED_HEADER.lower()):
        scheme, _, token = found.get(name, "").strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


@attrs.frozen
class Reader:
    """Who a token is, as the TokenReview answered."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview that asks who `token` is (audiences: the API server's own)."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


def reviewed_reader(answer: Any) -> Reader | str:
    """The reader a TokenReview answer names, or why the token is not one (a sentence)."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    if not isinstance(status, Mapping) or not status.get("authenticated"):
        error = status.get("error") if isinstance(status, Mapping) else None
        return f"the token is not valid ({error})" if error else "the token is not valid"
    user = status.get("user")
    if not isinstance(user, Mapping) or not isinstance(user.get("username"), str):
        return "the TokenReview named no user"
    extra = user.get("extra")
    if not isinstance(extra, Mapping):
        extra = {}
    return Reader(
        username=user["username"],
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in extra.items())),
    )


def access_review(reader: Reader, route: str, verb: str = "get") -> dict[str, Any]:
    """The SubjectAccessReview asking whether `reader` may `verb` the non-resource URL `route`."""
    spec: dict[str, Any] = {
        "user": reader.username,
        "groups": list(reader.groups),
        "nonResourceAttributes": {"path": route, "verb": verb},
    }
    if reader.uid:
        spec["uid"] = reader.uid
    if reader.extra:
        spec["extra"] = {key: list(values) for key, values in reader.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_allowed(answer: Any) -> bool:
    """Whether a SubjectAccessReview answer allows (anything unreadable denies)."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    return isinstance(status, Mapping) and status.get("allowed") is True


def token_request(seconds: int = READER_TOKEN_S) -> dict[str, Any]:
    """The TokenRequest for a reader ServiceAccount's token, valid `seconds`."""
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }


def issued_token(answer: Any) -> str | None:
    """The token of a TokenRequest answer, or None when it holds none."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    token = status.get("token") if isinstance(status, Mapping) else None
    return token if isinstance(token, str) and token else None


@attrs.frozen
class Refusal:
    """Why the collector refuses a request: 401 (no token, or not a valid one), 403 (the reader may
    not read the route) or 503 (the API server could not be asked), and the sentence it answers."""

    status: int
    text: str


def no_token(route: str) -> Refusal:
    return Refusal(
        401,
        f"croft: {route} needs a bearer token (Authorization, or {FORWARDED_HEADER} through the API "
        f"server's pod proxy) of a user allowed to get the non-resource URL {route}",
    )


def not_valid(route: str, why: str) -> Refusal:
    return Refusal(401, f"croft: {route} refused: {why}")


def not_allowed(route: str, reader: Reader) -> Refusal:
    who = reader.username
    role = METRICS_READER if route == "/metrics" else DATASET_READER
    return Refusal(
        403,
        f"croft: {who} may not read {route}: grant it get on the non-resource URL {route} (croft deploy "
        f"kubernetes makes the ClusterRole <namespace>:{role})",
    )


def cannot_ask(route: str, why: str) -> Refusal:
    return Refusal(503, f"croft: cannot check who reads {route}: the API server did not answer ({why})")
