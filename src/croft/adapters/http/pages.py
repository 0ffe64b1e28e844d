"""The collector's small pages beside /metrics: `/healthz` (ready), `/livez` (alive) and a landing
page at `/`, as node_exporter has."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from croft.adapters.http.server import Request, Response
from croft.domain.metrics.health import health, liveness

TEXT = "text/plain; charset=utf-8"


def healthz(
    last_poll_ns: Callable[[], int | None],
    monotonic_ns: Callable[[], int],
    live_file_lost_ns: Callable[[], int | None] = lambda: None,
) -> Callable[[Request], Response]:
    """A handler answering 200 "ok: ..." while polls are current, 503 with the reason otherwise;
    `last_poll_ns` says when the newest poll was published (monotonic ns, None before the first),
    `live_file_lost_ns` when the writer last found its live file gone (see `health`)."""

    def handler(_: Request) -> Response:
        answer = health(last_poll_ns(), monotonic_ns(), live_file_lost_ns=live_file_lost_ns())
        body = (answer.text + "\n").encode()
        return Response(answer.status, TEXT, body, headers=(("Cache-Control", "no-store"),))

    return handler


def livez(
    last_poll_ns: Callable[[], int | None], monotonic_ns: Callable[[], int]
) -> Callable[[Request], Response]:
    """A handler answering 200 while the poll loop is alive, 503 once its polls have stopped (see
    `liveness`): the DaemonSet's liveness probe, which a stale readiness (/healthz) must not turn
    into a restart."""
    started_ns = monotonic_ns()

    def handler(_: Request) -> Response:
        answer = liveness(started_ns, last_poll_ns(), monotonic_ns())
        body = (answer.text + "\n").encode()
        return Response(answer.status, TEXT, body, headers=(("Cache-Control", "no-store"),))

    return handler


def landing_page(version: str, links: tuple[tuple[str, str], ...]) -> Callable[[Request], Response]:
    """A handler for `/` only (anything else under it is a 404): the version and a link per
    (path, what it serves)."""
    items = "".join(
        f'<li><a href="{escape(path)}">{escape(path)}</a>: {escape(what)}</li>' for path, what in links
    )
    body = (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>croft collector</title></head>\n'
        f"<body><h1>croft collector</h1><p>version {escape(version)}</p><ul>{items}</ul></body></html>\n"
    ).encode()

    def handler(request: Request) -> Response:
        if request.path != "/":
            return Response(404, TEXT, b"not found\n")
        return Response(200, "text/html; charset=utf-8", body)

    return handler
