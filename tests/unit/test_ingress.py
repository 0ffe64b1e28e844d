"""The offered-load signals: /proc/<pid>/net parsers, the namespace's rates (a counter that went back
is a gap, never a negative rate or a spike), the row that carries them, their /metrics series and
croft scale's `--signal`."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector import rows as collect
from croft.domain.collector.ingress import endpoint_totals, ingress
from croft.domain.collector.kernel import EndpointCounts, KernelSample
from croft.domain.collector.netparse import (
    parse_dev_rx,
    parse_fib_trie_local,
    parse_if_inet6,
    parse_mib,
    parse_tcp_queues,
)
from croft.domain.collector.procparse import Unparsable
from croft.domain.collector.snapshot import CgroupMembership, NetnsSample
from croft.domain.metrics import names
from croft.domain.metrics.exposition import render_exposition
from croft.domain.metrics.series import MetricsMemory, series
from croft.domain.scaling.decision import (
    CollectorScrape,
    Observations,
    PodView,
    ScaleConfig,
    config_problem,
    estimate_rate,
)
from tests.helpers.snapshots import HEALTH, HOST, WATCHED, config, poll, proc

# Captured from a python http.server in its own network namespace (veth 10.250.77.2), trimmed.
SNMP = b"""Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 1189
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets InSegs
Tcp: 1 200 120000 -1 0 37 0 0 1180
"""
NETSTAT = b"""TcpExt: SyncookiesSent ListenOverflows ListenDrops
TcpExt: 0 2 3
IpExt: InNoRoutes InOctets
IpExt: 0 130521
"""
DEV = b"""Inter-| Receive | Transmit
 face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier cmp
 lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0
 sign0: 140000 1190 0 0 0 0 0 0 300000 1300 0 0 0 0 0 0
"""  # (columns squeezed)
TCP = b"""  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 024DFA0A:1F90 00000000:0000 0A 00000000:00000007 00:00000000 00000000     0        0 1192958 1
   1: 024DFA0A:1F90 014DFA0A:C350 01 00000000:00000082 00:00000000 00000000     0        0 1192959 1
   2: 024DFA0A:1F90 014DFA0A:C352 01 00000000:00000000 00:00000000 00000000     0        0 1192960 1
"""
FIB_TRIE = b"""Main:
  +-- 0.0.0.0/1 2 0 2
     +-- 10.250.77.0/30 2 0 1
        |-- 10.250.77.0
           /30 link UNICAST
        |-- 10.250.77.2
           /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
Local:
  +-- 0.0.0.0/1 2 0 2
        |-- 10.250.77.2
           /32 host LOCAL
"""
IF_INET6 = b"""fe80000000000000ccae66fffe205a68 ac 40 20 80    sign0
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000005 ad 40 00 80    sign0
"""


def test_the_parsers_read_a_real_namespace() -> None:
    mib = parse_mib(SNMP) | parse_mib(NETSTAT)
    assert (mib["Tcp.PassiveOpens"], mib["Tcp.InSegs"], mib["Tcp.MaxConn"]) == (37, 1180, -1)
    assert (mib["TcpExt.ListenDrops"], mib["IpExt.InOctets"]) == (3, 130521)
    assert parse_dev_rx(DEV) == (140000, 1190)  # lo left out
    queues = parse_tcp_queues(TCP)
    assert (queues.listen_backlog, queues.unread_bytes, queues.listen_ports) == (7, 0x82, (8080,))
    assert parse_fib_trie_local(FIB_TRIE) == ("10.250.77.2",)
    assert parse_if_inet6(IF_INET6) == ("fd00::5",)


@pytest.mark.parametrize(
    ("parser", "damaged"),
    [
        (parse_mib, SNMP[: SNMP.index(b"\nTcp: 1")]),  # a torn pair
        (parse_mib, b""),
        (parse_mib, SNMP.replace(b"1180", b"x")),
        (parse_dev_rx, b""),
        (parse_dev_rx, DEV[:-40]),
        (parse_tcp_queues, b""),
        (parse_tcp_queues, TCP.replace(b"0A 00000000:00000007", b"0A 00000000:0000zz07")),
        (parse_fib_trie_local, FIB_TRIE.replace(b"10.250.77.2\n", b"10.250.77\n")),
        (parse_if_inet6, b"zz 01 80 10 80 lo\n"),
    ],
)
def test_damaged_files_are_unparsable(parser: object, damaged: bytes) -> None:
    with pytest.raises(Unparsable):
        parser(damaged)  # type: ignore[operator]


def netns(**changes: object) -> NetnsSample:
    base = NetnsSample(
        inode=4026532871,
        tgids=(100,),
        passive_opens=10,
        in_segs=1000,
        listen_drops=0,
        rx_bytes=100_000,
        rx_packets=1000,
        listen_backlog=0,
        unread_bytes=0,
        addresses=("10.244.31.5",),
        listen_ports=(8080,),
    )
    return attrs.evolve(base, **changes)  # type: ignore[arg-type]


EBPF = KernelSample(
    counts_endpoints=True,
    endpoints=(
        EndpointCounts("10.244.31.5", 8080, data_segments=40, connections=2),
        EndpointCounts("10.244.31.5", 41234, data_segments=7, connections=0),  # a client socket of the pod
        EndpointCounts("10.244.31.6", 8080, data_segments=99, connections=9),  # another pod
        EndpointCounts("127.0.0.1", 8080, data_segments=5, connections=5),  # loopback: nobody's
    ),
)


def test_rates_over_the_interval_and_ebpf_counts_of_its_own_listening_endpoints() -> None:
    later = netns(passive_opens=14, in_segs=1060, rx_bytes=106_000, rx_packets=1060, listen_backlog=3)
    value = ingress(later, netns(), 2_000_000_000, EBPF)
    assert value is not None
    assert (value.tcp_passive_opens_s, value.tcp_in_segs_s, value.rx_packets_s) == (2.0, 30.0, 30.0)
    assert (value.rx_bytes_s, value.listen_backlog, value.listen_drops_s) == (3000.0, 3, 0.0)
    assert (value.tcp_data_segments_s, value.tcp_connections_s) == (20.0, 1.0)
    without_ebpf = ingress(later, netns(), 2_000_000_000, KernelSample())
    assert without_ebpf is not None and without_ebpf.tcp_data_segments_s is None


def test_a_first_sighting_another_namespace_or_no_interval_has_no_rate() -> None:
    assert ingress(netns(), None, 2_000_000_000, EBPF) is None
    assert ingress(netns(), netns(inode=1), 2_000_000_000, EBPF) is None
    assert ingress(netns(), netns(), 0, EBPF) is None


counters = st.integers(min_value=0, max_value=2**62)


@given(
    before=st.tuples(counters, counters, counters, counters, counters),
    after=st.tuples(counters, counters, counters, counters, counters),
    interval_ns=st.integers(min_value=-(10**9), max_value=10**11),
)
def test_rates_are_never_negative_and_a_counter_that_went_back_is_a_gap(
    before: tuple[int, ...], after: tuple[int, ...], interval_ns: int
) -> None:
    fields = ("passive_opens", "in_segs", "listen_drops", "rx_bytes", "rx_packets")
    previous = netns(**dict(zip(fields, before, strict=True)))
    sample = netns(**dict(zip(fields, after, strict=True)))
    value = ingress(sample, previous, interval_ns, EBPF)
    went_back = any(a < b for a, b in zip(after, before, strict=True))
    if went_back or interval_ns <= 0:
        assert value is None
        return
    assert value is not None
    rates = (value.tcp_passive_opens_s, value.tcp_in_segs_s, value.rx_packets_s, value.rx_bytes_s)
    assert all(rate >= 0 for rate in (*rates, value.listen_drops_s))


def test_ipv6_and_mapped_addresses_attribute_like_ipv4() -> None:
    sample = netns(addresses=("10.244.31.5", "fd00::5"))
    counts = (EndpointCounts("fd00::5", 8080, 3, 1), EndpointCounts("10.244.31.5", 8080, 2, 0))
    assert endpoint_totals(sample, counts) == (5, 1)


OTHER = CgroupMembership(unified="/kubepods/besteffort/pod77/" + "cd" * 32)


def polls_with_netns(
    first: NetnsSample, second: NetnsSample, busy: bool = True
) -> tuple[collect.CollectorState, tuple[object, ...]]:
    one = attrs.evolve(poll(0.0, (proc(100), proc(101, cgroups=HOST))), netns=(first,))
    two = attrs.evolve(poll(2.0, (proc(100), proc(101, cgroups=HOST))), netns=(first,))
    _, state = collect.rows(None, one, collect.CollectorState(), config())
    _, state = collect.rows(one, two, state, config())
    ticks = 1100 if busy else 1000
    three = attrs.evolve(
        poll(4.0, (proc(100, cpu_ticks=ticks), proc(101, cgroups=HOST))), netns=(second,), kernel=EBPF
    )
    rows, state = collect.rows(two, three, state, config())
    return state, rows


def test_the_container_row_carries_its_namespace_ingress() -> None:
    _, rows = polls_with_netns(netns(), netns(in_segs=1100, listen_backlog=2))
    (row,) = rows
    assert row.ingress is not None  # type: ignore[attr-defined]
    assert row.ingress.tcp_in_segs_s == 50.0 and row.ingress.listen_backlog == 2  # type: ignore[attr-defined]


def test_an_idle_container_gets_a_row_when_load_arrives_and_none_when_nothing_does() -> None:
    _, rows = polls_with_netns(netns(), netns(in_segs=1010), busy=False)
    (row,) = rows
    assert row.usage.cpu_cores == 0.0 and row.ingress.tcp_in_segs_s == 5.0  # type: ignore[attr-defined]
    quiet = KernelSample(counts_endpoints=True)
    one = attrs.evolve(poll(0.0, (proc(100),)), netns=(netns(),))
    two = attrs.evolve(poll(2.0, (proc(100),)), netns=(netns(),))
    three = attrs.evolve(poll(4.0, (proc(100),)), netns=(netns(),), kernel=quiet)
    _, state = collect.rows(None, one, collect.CollectorState(), config())
    _, state = collect.rows(one, two, state, config())
    rows3, _ = collect.rows(two, three, state, config())
    assert rows3 == ()


def test_a_reset_namespace_counter_gives_no_ingress_not_a_spike() -> None:
    _, rows = polls_with_netns(netns(in_segs=5000), netns(in_segs=10))
    (row,) = rows
    assert row.ingress is None  # type: ignore[attr-defined]


def test_metrics_serve_the_rates_and_queues() -> None:
    _, rows = polls_with_netns(netns(), netns(in_segs=1100, listen_backlog=2, unread_bytes=300))
    three = attrs.evolve(poll(4.0, (proc(100, cpu_ticks=1100),)), kernel=EBPF)
    samples, _ = series(three, rows, HEALTH, MetricsMemory())  # type: ignore[arg-type]
    text = render_exposition(samples)
    labels = f'cgroup="{WATCHED.unified}",container_id="{"ab" * 32}"'
    assert f'croft_container_ingress_rate{{{labels},signal="tcp_data_segments"}} 20.0' in text
    assert f'croft_container_ingress_rate{{{labels},signal="tcp_in_segs"}} 50.0' in text
    assert f"croft_container_listen_backlog{{{labels}}} 2.0" in text
    assert f"croft_container_unread_bytes{{{labels}}} 300.0" in text
    assert "# TYPE croft_container_ingress_rate gauge" in text


def _exposition(pods: dict[str, tuple[float, float | None]]) -> str:
    """/metrics of containers: id -> (CPU cores, tcp_data_segments rate or None)."""
    lines = [f"{names.LAST_POLL_TIMESTAMP_SECONDS} 1700000000.0"]
    for cid, (cpu, rate) in pods.items():
        lines.append(f'{names.CONTAINER_CPU_CORES}{{cgroup="/x",container_id="{cid}"}} {cpu}')
        if rate is not None:
            where = f'cgroup="/x",container_id="{cid}"'
            lines.append(f'{names.CONTAINER_INGRESS_RATE}{{{where},signal="tcp_data_segments"}} {rate}')
            lines.append(
                f'{names.CONTAINER_INGRESS_RATE}{{cgroup="/x",container_id="{cid}",signal="rx_bytes"}} 99999'
            )
        lines.append(
            f'{names.CONTAINER_SYSCALL_RATE}{{cgroup="/x",container_id="{cid}",syscall="sendto"}} 20.6'
        )
    return "\n".join(lines) + "\n"


SIGNAL_CONFIG = ScaleConfig(
    syscall="sendto", calls_per_request=1.0, cpu_per_request_ms=50, signal="tcp_data_segments"
)


def test_scale_reads_the_signal_once_per_pod() -> None:
    a, b, c = "a1" * 32, "b2" * 32, "c3" * 32
    body = _exposition({a: (0.5, 30.0), b: (0.5, 30.0), c: (0.4, 12.0)})
    observations = Observations(
        now_ms=1_700_000_000_500,
        pods=(PodView("web-1", (a, b)), PodView("web-2", (c,))),
        scrapes=(CollectorScrape("node", 1_700_000_000_400, body),),
    )
    estimate = estimate_rate(observations, SIGNAL_CONFIG)
    assert estimate.complete and estimate.request_rate == 42.0  # 30 once for web-1, then 12
    by_syscall = estimate_rate(
        observations, attrs.evolve(SIGNAL_CONFIG, signal="syscall", calls_per_request=2.06)
    )
    assert by_syscall.request_rate == pytest.approx(3 * 20.6 / 2.06)


def test_a_busy_pod_without_the_signal_makes_the_estimate_a_lower_bound() -> None:
    a, b = "a1" * 32, "b2" * 32
    body = _exposition({a: (0.5, None), b: (0.0, None)})
    observations = Observations(
        now_ms=1_700_000_000_500,
        pods=(PodView("web-1", (a,)), PodView("web-2", (b,))),
        scrapes=(CollectorScrape("node", 1_700_000_000_400, body),),
    )
    estimate = estimate_rate(observations, SIGNAL_CONFIG)
    assert estimate.request_rate == 0.0
    assert estimate.gaps == (
        f"pod web-1 container {a[:12]} is busy but has no tcp_data_segments series (no ingress measured yet)",
    )


def test_an_unknown_signal_is_one_sentence() -> None:
    problem = config_problem(attrs.evolve(SIGNAL_CONFIG, signal="recv"))
    assert problem is not None and problem.startswith("--signal 'recv' is not one croft measures")
    assert config_problem(SIGNAL_CONFIG) is None
