"""The procfs/cgroupfs parsers on literal kernel text, torn text included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.kernel import GpuIoctls, KernelSample
from croft.domain.collector.procparse import (
    Unparsable,
    parse_cgroup_membership,
    parse_io,
    parse_maps_libraries,
    parse_psi_some,
    parse_psi_some_avg10,
    parse_schedstat,
    parse_stat,
    parse_status_ctxt,
)
from croft.domain.collector.trace import TraceError, check_header, header, poll_from_json, poll_to_json
from tests.helpers.snapshots import poll, proc

STAT = (
    b"4242 (tmux: server (1)) S 1 4242 4242 0 -1 4194624 2200 0 3 0 157 43 0 0 20 0 3 0 "
    b"987654 12345678 2048 18446744073709551615 1 1 0 0 0 0 0 4096 1 0 0 0 17 1 0 0 0 0 0\n"
)


def test_stat_with_parentheses_and_spaces_in_comm() -> None:
    stat = parse_stat(STAT)
    assert (stat.comm, stat.cpu_ticks, stat.threads, stat.start_ticks) == ("tmux: server (1)", 200, 3, 987654)
    assert (stat.vsize_bytes, stat.rss_pages) == (12345678, 2048)


@given(st.integers(min_value=0, max_value=len(STAT) - 1))
def test_a_truncated_stat_line_is_unparsable(cut: int) -> None:
    with pytest.raises(Unparsable):
        parse_stat(STAT[:cut])


def test_status_io_schedstat() -> None:
    status = b"Name:\tx\nThreads:\t1\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n"
    assert parse_status_ctxt(status) == (150, 7)
    with pytest.raises(Unparsable):
        parse_status_ctxt(b"Name:\tx\nvoluntary_ctxt_switches:\t1")
    io = b"rchar: 1\nwchar: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n"
    assert parse_io(io) == (4096, 8192)
    assert parse_schedstat(b"851320 52000 2\n") == 52000
    with pytest.raises(Unparsable):
        parse_schedstat(b"85132")


def test_cgroup_membership_hybrid_and_v2() -> None:
    hybrid = parse_cgroup_membership(b"2:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n")
    assert hybrid.unified == "/"
    assert hybrid.controller("cpuacct") == "/docker/abc"
    assert hybrid.controller("name=systemd") == "/docker/abc"
    assert parse_cgroup_membership(b"0::/system.slice/ssh.service\n").controllers == ()
    with pytest.raises(Unparsable):
        parse_cgroup_membership(b"")


def test_maps_libraries() -> None:
    maps = (
        b"7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        b"7f01-7f02 r-xp 00000000 08:01 2 /opt/venv/lib/torch/lib/libtorch_cuda.so\n"
        b"7f02-7f03 rw-p 00000000 00:00 0 [heap]\n"
        b"7f03-7f04 r--p 00000000 08:01 3 /usr/lib/locale/C.utf8/LC_CTYPE\n"
        b"7f04-7f05 r-xp 00000000 08:01 4 /tmp/old/libfoo.so.1 (deleted)\n"
    )
    assert parse_maps_libraries(maps) == ("libc.so.6", "libfoo.so.1", "libtorch_cuda.so")


def test_psi() -> None:
    assert parse_psi_some_avg10(b"some avg10=1.25 avg60=0.3 avg300=0.1 total=5\nfull avg10=0.00\n") == 1.25
    assert parse_psi_some(
        b"some avg10=76.45 avg60=89.30 avg300=79.28 total=735524108\nfull avg10=0.00 total=0\n"
    ) == (
        76.45,
        735_524_108,
    )
    assert parse_psi_some(b"some avg10=0.00 avg60=0.00 avg300=0.00\n") == (0.0, None)
    for bad in (
        b"full avg10=0.00\n",
        b"some avg10=x total=1\n",
        b"some avg10=1.0 total=1e3\n",
        b"some total=4\n",
    ):
        with pytest.raises(Unparsable):
            parse_psi_some(bad)


@given(
    st.integers(0, 2**40), st.integers(1, 2**22), st.dictionaries(st.integers(1, 2**22), st.integers(0, 99))
)
def test_trace_line_round_trips(ticks: int, tgid: int, counts: dict[int, int]) -> None:
    kernel = KernelSample(
        syscalls={t: {"read": c} for t, c in counts.items()},
        gpu_ioctls={t: GpuIoctls(c, c * 7) for t, c in counts.items()},
        net_rx_bytes=counts,
    )
    snapshot = poll(2.5, (proc(tgid=tgid, cpu_ticks=ticks, read_bytes=None),), kernel=kernel)
    assert poll_from_json(poll_to_json(snapshot)) == snapshot


def test_trace_header_and_bad_lines() -> None:
    assert check_header(header("kubepods")) == "kubepods"
    with pytest.raises(TraceError):
        check_header(b'{"something": 1}\n')
    with pytest.raises(TraceError):
        poll_from_json(b'{"at": 1}\n')
