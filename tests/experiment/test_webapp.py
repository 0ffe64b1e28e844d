"""The experiment's webapp as a real process: its bound on a keep-alive connection's life
(--max-connection-age-secs, MAX_CONNECTION_AGE_S in its manifest): the first reply sent when the
connection is that old says `Connection: close` and the server closes the connection after it."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from tests.helpers.webapp import running_webapp


def _ask(sock: socket.socket) -> tuple[str, bytes]:
    """One GET /work on `sock`: the reply's head and body."""
    sock.sendall(b"GET /work HTTP/1.1\r\nHost: webapp\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before a reply: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head.decode(), body


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=5)


def test_a_connection_as_old_as_the_bound_is_closed_after_its_next_reply() -> None:
    with running_webapp(1.0, "--max-connection-age-secs", "0.5") as (url, _):
        with _connect(url) as sock:
            head, body = _ask(sock)
            assert (
                head.startswith("HTTP/1.1 200") and "Connection: close" not in head and body == b"done 1 ms\n"
            )
            head, _ = _ask(sock)  # still young: kept
            assert "Connection: close" not in head
            time.sleep(0.6)
            head, body = _ask(sock)
            assert "Connection: close" in head and body == b"done 1 ms\n"
            assert sock.recv(4096) == b""  # the server closed it after that reply
        with _connect(url) as sock:  # a new connection is young again
            assert "Connection: close" not in _ask(sock)[0]


def test_without_a_bound_a_connection_lives_as_long_as_its_client_keeps_it() -> None:
    with running_webapp(1.0) as (url, _), _connect(url) as sock:
        _ask(sock)
        time.sleep(0.6)
        for _ in range(3):
            head, _ = _ask(sock)
            assert "Connection: close" not in head
