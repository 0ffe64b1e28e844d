"""A collector that misbehaves in the way `argv[1]` says, for croft collect's tests. Prints
`port=<n>`, then serves until killed.

- `gzip`: a real index and a live file of one line; a body is gzipped (Content-Encoding: gzip)
  whenever the request's Accept-Encoding does not refuse gzip, as a compressing proxy does;
  `always-gzip`: gzipped whatever was asked;
- `huge-index`: an index that never ends (chunked, no Content-Length);
- `trickle`: the index, then one byte of the live file every 0.2 s, never more.
"""

from __future__ import annotations

import gzip
import http.server
import json
import sys
import time

MODE = sys.argv[1]
LINE = b'{"unix_ms":1792505950000,"tgid":1}\n' * 10
LIVE = "croft-dataset.jsonl"
INDEX = json.dumps(
    {"version": 1, "live": LIVE, "files": [{"name": LIVE, "size_bytes": len(LINE), "mtime_ms": 1}]}
).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = INDEX if self.path == "/dataset/" else LINE
        if MODE == "huge-index" and self.path == "/dataset/":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"[" * 65536
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if MODE == "trickle" and self.path != "/dataset/":
            self.send_response(206)
            self.send_header("Content-Range", f"bytes 0-{len(LINE) - 1}/{len(LINE)}")
            self.send_header("Content-Length", str(len(LINE)))
            self.end_headers()
            for byte in LINE:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
            return
        accepted = self.headers.get("Accept-Encoding", "")
        if MODE == "always-gzip" or (MODE == "gzip" and "gzip" in accepted):
            body = gzip.compress(body)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"port={server.server_address[1]}", flush=True)
server.serve_forever()
