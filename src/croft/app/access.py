"""The guard of `croft run --auth kubernetes` in front of /metrics and /dataset: the reviews of
`croft.adapters.kube.access`, cached, turned into the HTTP server's refusals
(`croft.domain.access` says what is asked and what each answer means).

The decisions are cached as the API server's own delegated authenticator and authorizer cache them
(k8s.io/apiserver): a token's reader for `ALLOWED_TTL_NS`, an allowed route for as long, a refusal
for `DENIED_TTL_NS`, so a scrape every 15 s costs the API server one review a minute, and a reader
just granted is let in within 10 s. An API server that cannot be asked refuses with 503, never
lets in: the collector goes on collecting meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from croft.adapters.http.server import Request, Response
from croft.adapters.kube.access import Reviewer
from croft.adapters.kube.port import KubeError
from croft.domain.access import (
    Reader,
    Refusal,
    access_allowed,
    bearer_token,
    cannot_ask,
    no_token,
    not_allowed,
    not_valid,
    protected_route,
    reviewed_reader,
)

log = logging.getLogger("croft.http")

ALLOWED_TTL_NS = 60 * 1_000_000_000
DENIED_TTL_NS = 10 * 1_000_000_000
MAX_CACHED = 4096  # entries per cache; the oldest go first


class _Cache:
    def __init__(self) -> None:
        self._entries: dict[Any, tuple[int, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, now_ns: int) -> Any | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[0] <= now_ns:
                return None
            return found[1]

    def put(self, key: Any, value: Any, until_ns: int) -> None:
        with self._lock:
            if len(self._entries) >= MAX_CACHED:
                for old in list(self._entries)[: MAX_CACHED // 4]:
                    del self._entries[old]
            self._entries[key] = (until_ns, value)


class KubeAccess:
    """`guard(request)`: None to serve it, or the refusal to answer instead."""

    def __init__(self, reviews: Reviewer, monotonic_ns: Callable[[], int]) -> None:
        self._reviews = reviews
        self._now = monotonic_ns
        self._readers = _Cache()
        self._allowed = _Cache()

    def guard(self, request: Request) -> Response | None:
        route = protected_route(request.path)
        if route is None:
            return None
        refusal = self._refusal(route, bearer_token(request.headers))
        if refusal is None:
            return None
        log.debug("refused %s %s: %s", request.method, request.path, refusal.text)
        headers = (("WWW-Authenticate", 'Bearer realm="croft"'),) if refusal.status == 401 else ()
        return Response(
            refusal.status, "text/plain; charset=utf-8", (refusal.text + "\n").encode(), headers=headers
        )

    def _refusal(self, route: str, token: str | None) -> Refusal | None:
        if token is None:
            return no_token(route)
        now = self._now()
        key = hashlib.sha256(token.encode()).digest()
        reader = self._readers.get(key, now)
        if reader is None:
            try:
                reader = reviewed_reader(self._reviews.who(token))
            except KubeError as exc:
                log.warning("cannot review a token of a %s reader: %s", route, exc)
                return cannot_ask(route, str(exc))
            ttl = ALLOWED_TTL_NS if isinstance(reader, Reader) else DENIED_TTL_NS
            self._readers.put(key, reader, now + ttl)
        if not isinstance(reader, Reader):
            return not_valid(route, reader)
        allowed = self._allowed.get((reader, route), now)
        if allowed is None:
            try:
                allowed = access_allowed(self._reviews.may(reader, route))
            except KubeError as exc:
                log.warning("cannot ask whether %s may read %s: %s", reader.username, route, exc)
                return cannot_ask(route, str(exc))
            self._allowed.put((reader, route), allowed, now + (ALLOWED_TTL_NS if allowed else DENIED_TTL_NS))
        return None if allowed else not_allowed(route, reader)
