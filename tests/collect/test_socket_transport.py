"""croft collect's HTTP/1.1 client for direct collectors (SocketTransport) against a real socket
server answering scripted bytes: the framings HTTP/1.1 allows (Content-Length, chunked, up to the
close, 1xx first), kept connections, and servers that break off."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from croft.adapters.dataset.fetch import TransportError
from croft.adapters.dataset.transports import SocketTransport


class Scripted:
    """A listening socket; connection i answers its requests with `answers[i]` in turn (bytes sent
    as they are), then closes. Records each request's head."""

    def __init__(self, answers: list[list[bytes]]) -> None:
        self.requests: list[tuple[int, bytes]] = []
        self._answers = answers
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        for number, answers in enumerate(self._answers):
            connection, _ = self._listener.accept()
            with connection:
                for answer in answers:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        byte = connection.recv(1)
                        if not byte:
                            return
                        head += byte
                    self.requests.append((number, head))
                    connection.sendall(answer)

    def close(self) -> None:
        self._listener.close()
        self._thread.join(timeout=10)


@contextmanager
def scripted(answers: list[list[bytes]], prefix: str = "") -> Iterator[tuple[Scripted, SocketTransport]]:
    server = Scripted(answers)
    transport = SocketTransport(f"http://127.0.0.1:{server.port}{prefix}", 10)
    try:
        yield server, transport
    finally:
        transport.close()
        server.close()


def body(transport: SocketTransport, path: str = "/dataset/") -> tuple[int, bytes, dict[str, str]]:
    buffer = memoryview(bytearray(7))  # small: bodies come in several reads
    with transport.get(path, {"Accept-Encoding": "identity"}, None) as reply:
        got = bytearray()
        while n := reply.read_into(buffer):
            got += buffer[:n]
        return reply.status, bytes(got), {name: reply.header(name) for name in ("x-a", "content-range")}


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"


def test_a_kept_connection_carries_the_next_request() -> None:
    with scripted([[OK, OK]], prefix="/api/proxy/") as (server, transport):
        assert body(transport)[:2] == (200, b"hello world")
        assert body(transport, "/dataset/a.jsonl")[:2] == (200, b"hello world")
    assert [number for number, _ in server.requests] == [0, 0]
    head = server.requests[1][1].decode()
    assert head.startswith("GET /api/proxy/dataset/a.jsonl HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n" in head and "\r\nAccept-Encoding: identity\r\n" in head


def test_chunked_bodies_with_extensions_and_trailers() -> None:
    chunked = (
        b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nX-A: 2\r\n"
        b"Content-Range: bytes 0-10/11\r\n\r\n"
        b"5;name=x\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n"
    )
    with scripted([[chunked, OK]]) as (server, transport):
        assert body(transport) == (206, b"hello world", {"x-a": "1, 2", "content-range": "bytes 0-10/11"})
        assert body(transport)[:2] == (200, b"hello world")
    assert [number for number, _ in server.requests] == [0, 0]


def test_a_body_up_to_the_close_and_interim_answers() -> None:
    until_close = b"HTTP/1.0 200 OK\r\nX-A: folded\r\n  on\r\n\r\nhello world"
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
    with scripted([[until_close], [interim]]) as (server, transport):
        assert body(transport) == (200, b"hello world", {"x-a": "folded on", "content-range": ""})
        assert body(transport)[:2] == (200, b"hello world")
    assert [number for number, _ in server.requests] == [0, 1]


def test_a_closed_kept_connection_is_tried_again_once_on_a_new_one() -> None:
    with scripted([[OK], [OK]]) as (server, transport):
        body(transport)
        assert body(transport)[:2] == (200, b"hello world")
    assert [number for number, _ in server.requests] == [0, 1]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nhello world", "before the body's end"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello", "bad size line"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX6\r\n world\r\n0\r\n\r\n",
            "chunk",
        ),
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not HTTP/1.x"),
        (b"", "without an answer"),
    ],
)
def test_a_broken_answer_is_a_transport_error(answer: bytes, words: str) -> None:
    with scripted([[answer]]) as (_, transport), pytest.raises(TransportError, match=words):
        body(transport)
