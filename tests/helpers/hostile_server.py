"""A hostile collector for the transfer tests: serves the index JSON in file `argv[1]` at
/dataset/ and, for any other /dataset/<name>, 64 bytes of "x". Prints `port=<n>`."""

from __future__ import annotations

import http.server
import sys
from pathlib import Path


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = Path(sys.argv[1]).read_bytes() if self.path == "/dataset/" else b"x" * 63 + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"port={server.server_address[1]}", flush=True)
server.serve_forever()
