"""croft run --auth kubernetes without a cluster: the guard in front of /metrics and /dataset with a
hand-written reviewer standing in for the API server (tests/k8s/test_access_k8s.py asks a real
one), served by the real HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from croft.adapters.http.server import HttpServer, Response
from croft.adapters.kube.port import Unreachable
from croft.app.access import ALLOWED_TTL_NS, DENIED_TTL_NS, KubeAccess
from croft.domain.access import FORWARDED_HEADER, Reader, bearer_token, protected_route
from tests.helpers.cli import croft

S = 1_000_000_000


class FakeReviews:
    """The API server's answers: `tokens` maps a token to its user; `grants` the (user, route)
    pairs allowed. Records every review asked; `down` makes it unreachable."""

    def __init__(self, tokens: dict[str, str], grants: set[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.grants = grants
        self.asked: list[tuple[str, str]] = []
        self.down = False

    def who(self, token: str) -> Any:
        self.asked.append(("who", token))
        if self.down:
            raise Unreachable("connection refused")
        user = self.tokens.get(token)
        if user is None:
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        return {
            "status": {"authenticated": True, "user": {"username": user, "groups": ["system:authenticated"]}}
        }

    def may(self, reader: Reader, route: str) -> Any:
        self.asked.append(("may", f"{reader.username} {route}"))
        if self.down:
            raise Unreachable("connection refused")
        return {"status": {"allowed": (reader.username, route) in self.grants}}


class Clock:
    def __init__(self) -> None:
        self.ns = 100 * S

    def __call__(self) -> int:
        return self.ns


@pytest.fixture
def served() -> Iterator[tuple[str, FakeReviews, Clock]]:
    reviews = FakeReviews(
        {
            "prom-token": "system:serviceaccount:monitoring:prometheus",
            "reader-token": "reader",
            "x": "nobody",
        },
        {("system:serviceaccount:monitoring:prometheus", "/metrics"), ("reader", "/dataset")},
    )
    clock = Clock()
    server = HttpServer.bind("127.0.0.1:0")
    for route in ("/metrics", "/dataset", "/healthz", "/"):
        server.route(route, lambda request: Response(200, "text/plain", f"served {request.path}\n".encode()))
    server.guard(KubeAccess(reviews, clock).guard)
    server.start()
    host, port = server.address
    try:
        yield f"http://{host}:{port}", reviews, clock
    finally:
        server.close()


def get(url: str, token: str | None = None, header: str = "Authorization") -> httpx.Response:
    headers = {header: f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, timeout=5)


def test_without_a_token_metrics_and_dataset_are_refused_and_health_is_open(
    served: tuple[str, FakeReviews, Clock],
) -> None:
    url, reviews, _ = served
    for path in ("/metrics", "/dataset/", "/dataset/croft-dataset.jsonl"):
        answer = get(url + path)
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"] == 'Bearer realm="croft"'
        assert answer.text.startswith(f"croft: {protected_route(path)} needs a bearer token")
    assert get(url + "/healthz").text == "served /healthz\n"
    assert get(url + "/").status_code == 200
    assert reviews.asked == []  # nothing to review without a token


def test_metrics_and_dataset_are_granted_apart(served: tuple[str, FakeReviews, Clock]) -> None:
    url, _, _ = served
    assert get(url + "/metrics", "prom-token").text == "served /metrics\n"
    refused = get(url + "/dataset/", "prom-token")
    assert refused.status_code == 403
    assert refused.text.startswith(
        "croft: system:serviceaccount:monitoring:prometheus may not read /dataset: grant it get on the "
        "non-resource URL /dataset"
    )
    # through the API server's pod proxy the token comes in the forwarded header
    assert get(url + "/dataset/x.jsonl", "reader-token", FORWARDED_HEADER).text == "served /dataset/x.jsonl\n"
    assert get(url + "/metrics", "reader-token", FORWARDED_HEADER).status_code == 403
    assert get(url + "/metrics", "nobody-knows").status_code == 401


def test_answers_are_cached_refusals_briefly_and_an_unreachable_api_server_lets_no_one_in(
    served: tuple[str, FakeReviews, Clock],
) -> None:
    url, reviews, clock = served
    for _ in range(3):
        assert get(url + "/metrics", "prom-token").status_code == 200
    assert len(reviews.asked) == 2  # one TokenReview, one SubjectAccessReview
    assert get(url + "/dataset/", "x").status_code == 403
    reviews.grants.add(("nobody", "/dataset"))
    assert get(url + "/dataset/", "x").status_code == 403  # the refusal is cached ...
    clock.ns += DENIED_TTL_NS
    assert get(url + "/dataset/", "x").status_code == 200  # ... for a short while only
    reviews.down = True
    assert get(url + "/metrics", "prom-token").status_code == 200  # still cached
    clock.ns += ALLOWED_TTL_NS
    down = get(url + "/metrics", "prom-token")
    assert down.status_code == 503
    assert down.text == (
        "croft: cannot check who reads /metrics: the API server did not answer (connection refused)\n"
    )
    reviews.down = False
    assert get(url + "/metrics", "prom-token").status_code == 200  # a failure is not cached


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ([("Authorization", "Bearer abc")], "abc"),
        ([("authorization", "bearer  abc ")], "abc"),
        ([(FORWARDED_HEADER, "Bearer fwd")], "fwd"),
        ([("Authorization", "Bearer direct"), (FORWARDED_HEADER, "Bearer fwd")], "direct"),
        ([("Authorization", "Basic dXNlcjpwdw==")], None),
        ([("Authorization", "Bearer ")], None),
        ([], None),
    ],
)
def test_the_bearer_token(headers: list[tuple[str, str]], token: str | None) -> None:
    assert bearer_token(headers) == token


def test_only_metrics_and_dataset_are_guarded() -> None:
    assert [
        protected_route(p) for p in ("/metrics", "/metrics/x", "/dataset", "/dataset/a", "/datasets")
    ] == [
        "/metrics",
        "/metrics",
        "/dataset",
        "/dataset",
        None,
    ]
    assert protected_route("/healthz") is None and protected_route("/") is None


def test_a_guard_refusal_never_reaches_the_handler() -> None:
    called: list[str] = []
    server = HttpServer.bind("127.0.0.1:0")
    server.route("/metrics", lambda request: called.append(request.path) or Response(200, "text/plain", b""))
    server.guard(lambda request: Response(401, "text/plain", b"no\n") if "x" not in request.query else None)
    server.start()
    try:
        host, port = server.address
        assert httpx.get(f"http://{host}:{port}/metrics", timeout=5).status_code == 401
        assert httpx.get(f"http://{host}:{port}/metrics?x", timeout=5).status_code == 200
    finally:
        server.close()
    assert called == ["/metrics"]


def test_metrics_alone_can_be_served_and_a_bad_auth_is_one_sentence(tmp_path: Path) -> None:
    """--no-serve-dataset: an operator may expose /metrics and not /dataset."""
    from croft.app.bootstrap import build_http_server

    server, _ = build_http_server("127.0.0.1:0", None)
    try:
        host, port = server.address
        assert httpx.get(f"http://{host}:{port}/dataset/", timeout=5).status_code == 404
        assert httpx.get(f"http://{host}:{port}/metrics", timeout=5).status_code == 200
    finally:
        server.close()
    out = croft("run", "--replay", str(tmp_path), "--auth", "basic")
    assert out.returncode == 1
    assert out.stderr == "croft: --auth 'basic' is not one of none, kubernetes; give none or kubernetes\n"
