"""Pure parsers for the per-network-namespace files of /proc/<pid>/net that give croft its offered-load
signals: `snmp` and `netstat` (the namespace's TCP MIB counters), `dev` (bytes and packets per
interface), `tcp`/`tcp6` (every socket with its queues) and `fib_trie` (the namespace's local IPv4
addresses). Each takes the file's bytes and returns plain values, or raises `Unparsable`.

Formats: proc(5), https://docs.kernel.org/networking/snmp_counter.html, and the kernel's
`tcp4_seq_show` (net/ipv4/tcp_ipv4.c): for a LISTEN socket `rx_queue` is the accept queue's length
(connections that finished the handshake and wait for `accept`), for any other socket the bytes
received and not yet read (`rcv_nxt - copied_seq`), what `ss` shows as Recv-Q.
"""

from __future__ import annotations

import ipaddress

import attrs

from croft.domain.collector.procparse import Unparsable

TCP_LISTEN = 0x0A  # include/net/tcp_states.h


def parse_mib(data: bytes) -> dict[str, int]:
    """`snmp` or `netstat`: pairs of lines `Prefix: Name Name ...` / `Prefix: 1 2 ...`, as
    `{"Prefix.Name": value}`. Negative values (`Tcp: MaxConn -1`) are kept; a pair whose lengths
    differ, or an odd number of lines, is torn."""
    lines = data.decode("ascii", "replace").splitlines()
    if not lines or len(lines) % 2:
        raise Unparsable("a MIB file has an odd number of lines (torn read)")
    out: dict[str, int] = {}
    for head, values in zip(lines[::2], lines[1::2], strict=True):
        names, numbers = head.split(), values.split()
        if not names or names[0] != numbers[0] or len(names) != len(numbers):
            raise Unparsable(f"MIB lines do not pair up: {head[:40]!r}")
        prefix = names[0].rstrip(":")
        try:
            for name, number in zip(names[1:], numbers[1:], strict=True):
                out[f"{prefix}.{name}"] = int(number)
        except ValueError as exc:
            raise Unparsable(f"MIB value is not a number: {exc}") from exc
    return out


def parse_dev_rx(data: bytes) -> tuple[int, int]:
    """`dev`: received (bytes, packets) summed over every interface but `lo` (loopback traffic stays
    inside the namespace: it is not load offered from outside)."""
    lines = data.decode("ascii", "replace").splitlines()
    if len(lines) < 2 or "|" not in lines[0]:
        raise Unparsable("net/dev has no header")
    rx_bytes = rx_packets = 0
    for line in lines[2:]:
        name, colon, rest = line.partition(":")
        fields = rest.split()
        if not colon or len(fields) < 16:
            raise Unparsable(f"net/dev line is torn: {line[:40]!r}")
        if name.strip() == "lo":
            continue
        try:
            rx_bytes += int(fields[0])
            rx_packets += int(fields[1])
        except ValueError as exc:
            raise Unparsable(f"net/dev value is not a number: {exc}") from exc
    return rx_bytes, rx_packets


@attrs.frozen
class SocketQueues:
    """From `tcp` (and `tcp6`): connections waiting in LISTEN sockets' accept queues, bytes waiting
    unread in the other sockets, and the ports listened on (sorted, distinct)."""

    listen_backlog: int = 0
    unread_bytes: int = 0
    listen_ports: tuple[int, ...] = ()

    def __add__(self, other: SocketQueues) -> SocketQueues:
        return SocketQueues(
            self.listen_backlog + other.listen_backlog,
            self.unread_bytes + other.unread_bytes,
            tuple(sorted({*self.listen_ports, *other.listen_ports})),
        )


def parse_tcp_queues(data: bytes) -> SocketQueues:
    """`tcp` or `tcp6`: sum each socket's `rx_queue` into the listen backlog (LISTEN sockets) or the
    unread bytes (the rest), and list the listening ports."""
    lines = data.decode("ascii", "replace").splitlines()
    if not lines or not lines[0].lstrip().startswith("sl"):
        raise Unparsable("net/tcp has no header")
    backlog = unread = 0
    ports: set[int] = set()
    for line in lines[1:]:
        fields = line.split()
        if len(fields) < 5:
            raise Unparsable(f"net/tcp line is torn: {line[:40]!r}")
        try:
            local_port = int(fields[1].rpartition(":")[2], 16)
            state = int(fields[3], 16)
            rx_queue = int(fields[4].partition(":")[2], 16)
        except ValueError as exc:
            raise Unparsable(f"net/tcp field is not hex: {exc}") from exc
        if state == TCP_LISTEN:
            backlog += rx_queue
            ports.add(local_port)
        else:
            unread += rx_queue
    return SocketQueues(backlog, unread, tuple(sorted(ports)))


def parse_fib_trie_local(data: bytes) -> tuple[str, ...]:
    """`fib_trie`: the namespace's own IPv4 addresses (`/32 host LOCAL` leaves), loopback ones left
    out (127.0.0.0/8 is local in every namespace, so it names none), sorted."""
    found: set[str] = set()
    last: str | None = None
    for raw in data.decode("ascii", "replace").splitlines():
        line = raw.strip()
        if line.startswith("|--"):
            last = line[3:].strip()
        elif last is not None and line.startswith("/32 host LOCAL"):
            try:
                address = ipaddress.IPv4Address(last)
            except ValueError as exc:
                raise Unparsable(f"fib_trie leaf is not an address: {last[:40]!r}") from exc
            if not address.is_loopback:
                found.add(str(address))
    return tuple(sorted(found, key=lambda a: ipaddress.IPv4Address(a)))


def parse_if_inet6(data: bytes) -> tuple[str, ...]:
    """`if_inet6`: the namespace's own IPv6 addresses but loopback and link-local, compressed, sorted."""
    found: set[str] = set()
    for line in data.decode("ascii", "replace").splitlines():
        fields = line.split()
        if not fields:
            continue
        try:
            address = ipaddress.IPv6Address(int(fields[0], 16))
        except ValueError as exc:
            raise Unparsable(f"if_inet6 line is not an address: {line[:40]!r}") from exc
        if not (address.is_loopback or address.is_link_local):
            found.add(str(address))
    return tuple(sorted(found))
