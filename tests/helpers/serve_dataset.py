"""A real collector HTTP server process for the transfer tests: croft's HttpServer with the dataset
endpoint on the directory of the live file `argv[1]`, on port `argv[2]` (0: any) of address
`argv[3]` (default 127.0.0.1).
Prints `port=<n>` once listening, serves until SIGTERM/SIGKILL."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from croft.adapters.dataset.endpoint import DatasetEndpoint
from croft.adapters.http.server import HttpServer


def main() -> None:
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    server = HttpServer(host, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    DatasetEndpoint(Path(sys.argv[1])).register(server)
    server.start()
    print(f"port={server.address[1]}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.close()


if __name__ == "__main__":
    main()
