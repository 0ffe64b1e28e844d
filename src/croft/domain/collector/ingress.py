"""Offered load per network namespace: the `Ingress` of docs/dataset.md, from two polls' snapshots.

`ingress(sample, previous, interval_ns, kernel)` has the shape of every model step: a namespace seen
for the first time, a non-positive interval, or any counter that went backwards (the namespace was
recreated with a reused inode, a counter wrapped) gives None, a gap and never a negative rate or a
spike. The eBPF counts (`KernelSample.endpoints`) are already "since the previous read"; a
namespace gets those of its own addresses on the ports it listens on (an address is one
namespace's own; loopback names none, so it is never counted).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from croft.domain.collector.kernel import EndpointCounts, KernelSample
from croft.domain.collector.rates import NS_PER_S, delta, per_s
from croft.domain.collector.snapshot import NetnsSample
from croft.domain.dataset import Ingress

AF_INET, AF_INET6 = 2, 10


def endpoint_address(family: int, raw: bytes) -> str | None:
    """The address of an eBPF endpoint key as `ipaddress` writes it: AF_INET from the first 4 bytes
    of `raw`, AF_INET6 from 16 (an IPv4-mapped one as its IPv4 address, as a dual-stack listener
    sees IPv4 clients); None for another family or too few bytes."""
    if family == AF_INET and len(raw) >= 4:
        return str(ipaddress.IPv4Address(raw[:4]))
    if family == AF_INET6 and len(raw) >= 16:
        address = ipaddress.IPv6Address(raw[:16])
        return str(address.ipv4_mapped or address)
    return None


def endpoint_totals(sample: NetnsSample, endpoints: Iterable[EndpointCounts]) -> tuple[int, int]:
    """(data segments, connections) counted on `sample`'s own addresses at the ports it listens on."""
    addresses = set(sample.addresses)
    ports = set(sample.listen_ports)
    segments = connections = 0
    for counts in endpoints:
        if counts.address in addresses and counts.port in ports:
            segments += max(counts.data_segments, 0)
            connections += max(counts.connections, 0)
    return segments, connections


def ingress(
    sample: NetnsSample, previous: NetnsSample | None, interval_ns: int, kernel: KernelSample
) -> Ingress | None:
    """The namespace's offered load from `previous` to `sample`; None for a first sighting, another
    namespace, a non-positive interval or a counter that went backwards. The eBPF fields are None
    unless `kernel.counts_endpoints`."""
    if previous is None or previous.inode != sample.inode or interval_ns <= 0:
        return None
    deltas = (
        delta(sample.passive_opens, previous.passive_opens),
        delta(sample.in_segs, previous.in_segs),
        delta(sample.rx_packets, previous.rx_packets),
        delta(sample.rx_bytes, previous.rx_bytes),
        delta(sample.listen_drops, previous.listen_drops),
    )
    if None in deltas:
        return None
    opens, segs, packets, received, drops = (d or 0 for d in deltas)
    interval_s = interval_ns / NS_PER_S
    data_segments_s: float | None = None
    connections_s: float | None = None
    if kernel.counts_endpoints:
        segments, connections = endpoint_totals(sample, kernel.endpoints)
        data_segments_s = per_s(segments, interval_s)
        connections_s = per_s(connections, interval_s)
    return Ingress(
        tcp_passive_opens_s=per_s(opens, interval_s),
        tcp_in_segs_s=per_s(segs, interval_s),
        rx_packets_s=per_s(packets, interval_s),
        rx_bytes_s=per_s(received, interval_s),
        listen_drops_s=per_s(drops, interval_s),
        listen_backlog=max(sample.listen_backlog, 0),
        unread_bytes=max(sample.unread_bytes, 0),
        tcp_data_segments_s=data_segments_s,
        tcp_connections_s=connections_s,
    )


def active(value: Ingress) -> bool:
    """Whether anything arrived or waits: such an ingress is worth a row of its own."""
    return any(
        (
            value.tcp_passive_opens_s,
            value.tcp_in_segs_s,
            value.rx_packets_s,
            value.listen_drops_s,
            value.listen_backlog,
            value.unread_bytes,
            value.tcp_data_segments_s,
            value.tcp_connections_s,
        )
    )
