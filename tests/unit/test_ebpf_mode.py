"""`croft run --ebpf`: which loader each host gets under auto, the collector without eBPF, and the
mode on /metrics."""

from __future__ import annotations

import logging

import attrs
import pytest

from croft.adapters.host.ebpf_mode import MODES, Host, NoKernel, open_kernel, planned
from croft.domain.collector.kernel import KernelSelection
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import render_exposition
from croft.domain.metrics.series import MetricsMemory, series
from tests.helpers.snapshots import HEALTH, poll, proc


@pytest.mark.parametrize(
    ("btf", "bcc", "auto"),
    [(True, True, "core"), (True, False, "core"), (False, True, "bcc"), (False, False, "off")],
)
def test_auto_takes_core_where_there_is_btf_then_bcc_then_none(btf: bool, bcc: bool, auto: str) -> None:
    host = Host(btf=btf, bcc=bcc)
    assert planned("auto", host) == auto
    for named in MODES[1:]:
        assert planned(named, host) == named  # a mode asked for by name is that mode


def test_without_btf_or_bcc_auto_runs_without_ebpf_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="croft.ebpf"):
        chosen = open_kernel("auto", host=Host(btf=False, bcc=False))
    assert chosen.mode == "off" and chosen.source is None
    (said,) = caplog.messages
    assert "no BTF" in said and "eBPF off, rows carry no syscalls, ioctls or ingress arrivals" in said


def test_off_asked_for_is_said_as_information_not_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="croft.ebpf"):
        chosen = open_kernel("off", host=Host(btf=True, bcc=True))
    assert chosen.mode == "off"
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_without_ebpf_nothing_is_counted_and_no_arrival_is_known() -> None:
    kernel = NoKernel()
    kernel.select(KernelSelection(cgroup_ids=frozenset({1}), tgids=frozenset({2})))
    sample = kernel.read()
    assert not sample.syscalls and not sample.gpu_ioctls and not sample.net_rx_bytes
    assert sample.counts_endpoints is False


@pytest.mark.parametrize("mode", ["core", "bcc", "off"])
def test_the_mode_is_one_series_after_the_health_counters(mode: str) -> None:
    samples, _ = series(poll(2, (proc(1),)), [], attrs.evolve(HEALTH, ebpf_mode=mode), MetricsMemory())
    assert samples[-1].name == names.EBPF_MODE
    assert f'croft_ebpf_mode{{mode="{mode}"}} 1.0' in render_exposition(samples).splitlines()
    assert [s.name for s in samples].count(names.EBPF_MODE) == 1


def test_a_replay_has_no_mode() -> None:
    samples, _ = series(poll(2, (proc(1),)), [], HEALTH, MetricsMemory())
    assert names.EBPF_MODE not in {s.name for s in samples}
