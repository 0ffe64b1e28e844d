"""The collector's one small HTTP server, on `--metrics-addr`: routes registered by their owners.

`HttpServer.bind(address)` listens (a `UserError` when it cannot), `route(path_prefix, handler)`
adds a route (`/metrics`, the `/dataset` routes), `start()` serves on daemon threads, `close()`
stops. A handler gets a `Request` and returns a `Response`; the longest matching prefix wins; a
path no route matches is a 404, a handler that raises is a 500 (logged), never a dead server. Only
GET and HEAD. `guard(check)` puts `check` in front of every route: it answers a request itself
(a refusal) or lets it through (None); `croft run --auth kubernetes` guards /metrics and /dataset.
Each connection has a socket timeout, so a stuck client holds one thread, not the collector: the
poll loop shares nothing with these threads but the immutable values it publishes.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import attrs

from croft.errors import UserError

log = logging.getLogger("croft.http")

CLIENT_TIMEOUT_S = 30.0
# Connections the kernel queues for accept() (capped by net.core.somaxconn). socketserver's default
# of 5 overflowed under 200 concurrent scrapers although each is answered in milliseconds; Go's
# net/http (node_exporter) listens with somaxconn, 4096 on current kernels.
LISTEN_BACKLOG = 4096


@attrs.frozen
class Request:
    """What a handler is asked: the path (no query), the raw query string, the headers."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Response:
    """What a handler answers. `body` is bytes, or chunks streamed as they come (a file): give
    `content_length` with chunks when it is known, else the connection's close ends the body."""

    status: int
    content_type: str
    body: bytes | Iterable[bytes]
    content_length: int | None = None
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Response]
Guard = Callable[[Request], Response | None]


def parse_address(text: str, option: str = "--metrics-addr") -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9464`) as (host, port); a `UserError` naming `option` otherwise.
    The host must be named: `0.0.0.0` for every interface, so nothing listens by accident."""
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    example = "127.0.0.1:9464, or 0.0.0.0:9464 for every interface"
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UserError(f"{option} {text!r} is not host:port; give e.g. {example}")
    return host, int(port_text)


class HttpServer:
    """A threaded HTTP server with prefix routes; see the module docstring."""

    def __init__(self, host: str, port: int) -> None:
        """Listen on (host, port) now; raises OSError when it cannot (see `bind`)."""
        self._routes: dict[str, Handler] = {}
        self._guard: Guard | None = None
        self._thread: threading.Thread | None = None

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            daemon_threads = True
            request_queue_size = LISTEN_BACKLOG

        self._server = Server((host, port), _handler_class(self._resolve, lambda: self._guard))

    @classmethod
    def bind(cls, address: str, option: str = "--metrics-addr") -> HttpServer:
        """Listen on `address` (host:port); a `UserError` when it is malformed or taken."""
        host, port = parse_address(address, option)
        try:
            return cls(host, port)
        except OSError as exc:
            raise UserError(
                f"cannot listen on {address} for {option}: {exc.strerror or exc}; "
                f"choose another address or free that port"
            ) from exc

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) it listens on (the real port when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def route(self, path_prefix: str, handler: Handler) -> None:
        """Serve `path_prefix` (the path itself and anything under `path_prefix/`) with `handler`."""
        self._routes[path_prefix.rstrip("/") or "/"] = handler

    def guard(self, check: Guard) -> None:
        """Ask `check` first about every request (see the module docstring)."""
        self._guard = check

    def start(self) -> None:
        """Serve on a daemon thread until `close`."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="croft-http", daemon=True)
        self._thread.start()
        log.info("serving %s on http://%s:%d", ", ".join(sorted(self._routes)) or "nothing", *self.address)

    def close(self) -> None:
        """Stop serving and release the port (requests in flight finish on their own threads)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def _resolve(self, path: str) -> Handler | None:
        best: str | None = None
        for prefix in self._routes:
            matches = prefix == "/" or path == prefix or path.startswith(prefix + "/")
            if matches and (best is None or len(prefix) > len(best)):
                best = prefix
        return self._routes.get(best) if best is not None else None


def _handler_class(
    resolve: Callable[[str], Handler | None], guard: Callable[[], Guard | None]
) -> type[BaseHTTPRequestHandler]:
    class RouteHandler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT_S
        server_version = "croft"

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def _answer(self, send_body: bool) -> None:
            parts = urlsplit(self.path)
            handler = resolve(parts.path)
            if handler is None:
                response = Response(404, "text/plain; charset=utf-8", b"not found\n")
            else:
                request = Request(self.command, parts.path, parts.query, tuple(self.headers.items()))
                try:
                    check = guard()
                    refusal = check(request) if check is not None else None
                    response = refusal if refusal is not None else handler(request)
                except Exception:
                    log.exception("GET %s failed", parts.path)
                    response = Response(500, "text/plain; charset=utf-8", b"internal error\n")
            body = response.body
            length = len(body) if isinstance(body, bytes) else response.content_length
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            if length is not None:
                self.send_header("Content-Length", str(length))
            for key, value in response.headers:
                self.send_header(key, value)
            self.end_headers()
            if not send_body:
                return
            try:
                for chunk in [body] if isinstance(body, bytes) else body:
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                log.debug("client of %s went away", parts.path)
            finally:
                close = getattr(body, "close", None)
                if callable(close):
                    close()

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return RouteHandler
