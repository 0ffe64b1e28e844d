"""Loopback networking for tests that start servers."""

from __future__ import annotations

import selectors
import socket
import time
from collections import Counter
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listen_overflows() -> int:
    """TcpExt ListenOverflows of this network namespace: connections dropped because a listening
    socket's accept queue was full."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()]
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names[0] == "TcpExt:":
            return int(values[names.index("ListenOverflows")])
    raise AssertionError("no TcpExt in /proc/net/netstat")


def burst_get(port: int, path: str, clients: int, limit_s: float) -> Counter[str]:
    """`clients` connections to 127.0.0.1:`port` opened at the same instant (non-blocking connects
    from one thread, as a fleet of scrapers does), an HTTP/1.0 GET of `path` on each, every answer
    read until the server closes it; stops waiting after `limit_s`. Counts the outcomes: the
    status line's code, or "timeout", or the error's name."""
    socks = []
    for _ in range(clients):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_WRITE)
    received = dict.fromkeys(socks, b"")
    outcome: dict[socket.socket, str] = {}
    started = time.monotonic()
    while len(outcome) < clients and time.monotonic() - started < limit_s:
        for key, events in selector.select(0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if events & selectors.EVENT_WRITE:
                    sock.send(f"GET {path} HTTP/1.0\r\nHost: croft\r\n\r\n".encode())
                    selector.modify(sock, selectors.EVENT_READ)
                    continue
                chunk = sock.recv(1 << 16)
            except OSError as exc:
                outcome[sock] = type(exc).__name__
                selector.unregister(sock)
                continue
            if chunk:
                received[sock] += chunk
            else:
                outcome[sock] = received[sock][9:12].decode(errors="replace") or "empty"
                selector.unregister(sock)
    selector.close()
    for sock in socks:
        outcome.setdefault(sock, "timeout")
        sock.close()
    return Counter(outcome.values())
