"""The experiment harness's webapp as a real process on loopback, for the tests that drive it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.net import free_port

WEBAPP = Path(__file__).resolve().parents[2] / "labs/research/experiment/workloads/webapp/webapp.py"


@contextmanager
def running_webapp(cpu_ms: float, *extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The webapp costing `cpu_ms` per request (`extra`: more of its options), with its URL once it
    accepts connections (10 s at most); terminated on exit."""
    port = free_port()
    argv = [sys.executable, str(WEBAPP), "--host", "127.0.0.1", "--port", str(port), "--cpu-ms", str(cpu_ms)]
    process = subprocess.Popen([*argv, *extra], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        process.wait(timeout=10)
