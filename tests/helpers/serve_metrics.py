"""croft's HttpServer in a process of its own, serving a /metrics body of `argv[1]` bytes (a
collector's exposition is ~100 KB on a busy node) with a listen backlog of `argv[2]` (default:
croft's). Prints `port=<n>`, serves until killed."""

from __future__ import annotations

import sys
import threading

from croft.adapters.http import server as http_server
from croft.adapters.http.server import HttpServer, Response


def main() -> None:
    if len(sys.argv) > 2:
        http_server.LISTEN_BACKLOG = int(sys.argv[2])  # the before/after figure of the notes
    body = (b"croft_container_cpu_cores 0.25\n" * (int(sys.argv[1]) // 31 + 1))[: int(sys.argv[1])]
    server = HttpServer("127.0.0.1", 0)
    server.route("/metrics", lambda _: Response(200, "text/plain; version=0.0.4", body))
    server.start()
    print(f"port={server.address[1]}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
