"""The sock_diag reader's parsing of what the kernel answers (the real kernel's answers are in
tests/kernel/test_ingress_real.py): a dump split over several reads, other requests' messages
left alone, an error said as an OSError."""

from __future__ import annotations

import struct

import pytest

from croft.adapters.host.sockdiag import NLMSG_DONE, NLMSG_ERROR, TCPDIAG_GETSOCK, SockDiag
from croft.domain.collector.netparse import TCP_LISTEN, SocketQueues

TCP_ESTABLISHED, TCP_TIME_WAIT = 1, 6


def message(seq: int, kind: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 2, seq, 0) + body


def socket_message(seq: int, state: int, port: int, rqueue: int, family: int = 2) -> bytes:
    sockid = struct.pack(">HH", port, 40000) + bytes(44)
    body = struct.pack("=BBBB", family, state, 0, 0) + sockid + struct.pack("=IIIII", 0, rqueue, 7, 0, 99)
    return message(seq, TCPDIAG_GETSOCK, body)


class FakeSocket:
    """Hands back the prepared datagrams, one a recv, and keeps what was sent."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        return len(data)

    def recv(self, _size: int) -> bytes:
        return self.answers.pop(0) if self.answers else b""

    def close(self) -> None:
        pass


def test_listeners_give_the_backlog_and_ports_the_rest_the_unread_bytes() -> None:
    answers = [
        socket_message(1, TCP_LISTEN, 8080, 3) + socket_message(1, TCP_LISTEN, 8080, 1, family=10),
        socket_message(1, TCP_ESTABLISHED, 8080, 500)
        + socket_message(0, TCP_ESTABLISHED, 9, 10**6)  # another request's: not ours
        + socket_message(1, TCP_TIME_WAIT, 8081, 0),
        socket_message(1, TCP_LISTEN, 22, 0) + message(1, NLMSG_DONE, struct.pack("=i", 0)),
    ]
    fake = FakeSocket(answers)
    diag = SockDiag(fake)  # type: ignore[arg-type]
    assert diag.queues() == SocketQueues(listen_backlog=4, unread_bytes=500, listen_ports=(22, 8080))
    (request,) = fake.sent
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", request)
    assert (length, kind, flags, seq) == (len(request), TCPDIAG_GETSOCK, 0x301, 1)
    assert request[16] == 0  # AF_UNSPEC in the compatible request: IPv4 and IPv6 in one dump


def test_an_error_answer_is_an_oserror_and_a_closed_dump_too() -> None:
    refused = SockDiag(FakeSocket([message(1, NLMSG_ERROR, struct.pack("=i", -1) + bytes(16))]))  # type: ignore[arg-type]
    with pytest.raises(OSError, match="sock_diag"):
        refused.queues()
    cut = SockDiag(FakeSocket([socket_message(1, TCP_LISTEN, 80, 0)]))  # type: ignore[arg-type]
    with pytest.raises(OSError, match="closed before"):
        cut.queues()
    short = SockDiag(FakeSocket([message(1, TCPDIAG_GETSOCK, bytes(8))]))  # type: ignore[arg-type]
    with pytest.raises(OSError, match="short"):
        short.queues()
