"""A small HTTP service with a known cost per request, for croft's experiments.

    python webapp.py [--port 8080] [--cpu-ms 50] [--sendto 2] [--max-connection-age-secs 0]
                     (or PORT, CPU_MS, SENDTO, MAX_CONNECTION_AGE_S)

GET /work (or /): burns `cpu_ms` milliseconds of this thread's CPU time (?cpu_ms=N overrides it),
then sends the response in exactly `sendto` send(2) calls, which glibc makes as the sendto syscall:
so croft sees `sendto` calls per request per request. GET /healthz answers at once, in one call.
Standard library only; one thread per connection (HTTP/1.1 keep-alive), so a pod uses at most one
core (the GIL) and its CPU limit caps it below that.

`--max-connection-age-secs N` (above 0) bounds a keep-alive connection's life, as production servers
do (nginx's keepalive_requests, envoy's max_connection_duration, gRPC's MaxConnectionAge): the first
reply sent when the connection is N seconds old or older says `Connection: close` and the server
closes it after that reply, so the client's next request opens a new connection, which the Service
may send to a pod started since. 0 (the default): a connection lives as long as its client keeps it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from urllib.parse import parse_qs, urlsplit


def burn(cpu_ms: float) -> None:
    """Spin until this thread used `cpu_ms` of CPU time (wall time waiting for the GIL excluded)."""
    deadline = time.thread_time() + cpu_ms / 1000
    x = 0
    while time.thread_time() < deadline:
        for _ in range(5000):  # thread_time() is a real syscall (CLOCK_THREAD_CPUTIME_ID): not too often
            x += 1


def pieces(data: bytes, count: int) -> list[bytes]:
    """`data` cut into `count` non-empty pieces (fewer when it is shorter)."""
    count = max(1, min(count, len(data)))
    size = -(-len(data) // count)
    return [data[i : i + size] for i in range(0, len(data), size)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cpu_ms = 50.0
    sendto = 2
    max_connection_age_s = 0.0

    def setup(self) -> None:
        super().setup()
        self.opened_s = time.monotonic()
        # The reply leaves in several sends: without TCP_NODELAY, Nagle holds the second one back
        # until the client's delayed ACK (~40 ms).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":
            self._reply(200, b"ok\n", 1)
            return
        if url.path not in ("/", "/work"):
            self._reply(404, b"not found\n", 1)
            return
        query = parse_qs(url.query)
        try:
            cpu_ms = float(query["cpu_ms"][0]) if "cpu_ms" in query else self.cpu_ms
        except ValueError:
            self._reply(400, b"cpu_ms must be a number\n", 1)
            return
        burn(cpu_ms)
        self._reply(200, f"done {cpu_ms:g} ms\n".encode(), self.sendto)

    def _reply(self, status: int, body: bytes, calls: int) -> None:
        aged = 0 < self.max_connection_age_s <= time.monotonic() - self.opened_s
        if aged:
            self.close_connection = True  # handle() stops reading this connection after the reply
        close = "Connection: close\r\n" if aged else ""
        head = (
            f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            f"{close}\r\n"
        ).encode()
        for piece in pieces(head + body, calls):
            self.connection.send(piece)  # one send(2) each: small pieces are never split

    def log_message(self, format: str, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument("--cpu-ms", type=float, default=float(os.environ.get("CPU_MS", "50")))
    parser.add_argument("--sendto", type=int, default=int(os.environ.get("SENDTO", "2")))
    parser.add_argument(
        "--max-connection-age-secs", type=float, default=float(os.environ.get("MAX_CONNECTION_AGE_S", "0"))
    )
    args = parser.parse_args()
    Handler.cpu_ms, Handler.sendto = args.cpu_ms, max(args.sendto, 1)
    Handler.max_connection_age_s = max(args.max_connection_age_secs, 0.0)
    server = Server((args.host, args.port), Handler)

    def stop(signum: int, _: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(
        f"webapp: listening on {args.host}:{server.server_address[1]}, {args.cpu_ms:g} ms CPU and "
        f"{Handler.sendto} sendto per request, connections closed at {Handler.max_connection_age_s:g} s "
        "of age (0: never)",
        flush=True,
    )
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
