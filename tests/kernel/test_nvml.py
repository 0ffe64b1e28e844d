"""NvmlGpuHolders: the GpuHolderSource contract against recorded NVML answers and the real NVML, and
what it makes of each recording."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from croft.adapters.host.nvml import FALLBACK_NOTE, NvmlGpuHolders
from croft.domain.collector.kernel import GpuHolders, GpuHolderSource
from tests.helpers.nvml_fake import FIXTURES, RecordedNvml

RECORDINGS = sorted(path.stem for path in FIXTURES.glob("*.json"))


def real_nvml_with_driver() -> NvmlGpuHolders:
    source = NvmlGpuHolders()
    if not source.available:
        pytest.skip("no NVIDIA driver on this host")
    return source


@pytest.fixture(
    params=[
        *(pytest.param(name, id=f"recorded-{name}") for name in RECORDINGS),
        pytest.param("real", id="real", marks=pytest.mark.gpu),
    ]
)
def source(request: pytest.FixtureRequest) -> GpuHolderSource:
    if request.param == "real":
        return real_nvml_with_driver()
    return NvmlGpuHolders(RecordedNvml.named(request.param))


def test_contract_holders_are_host_pids_with_non_negative_memory(source: GpuHolderSource) -> None:
    first, second = source.read(), source.read()
    for holders in (first, second):
        assert isinstance(holders, GpuHolders)
        assert all(isinstance(pid, int) and pid > 0 for pid in holders.memory_bytes)
        assert all(isinstance(used, int) and used >= 0 for used in holders.memory_bytes.values())
        if not holders.available:
            assert holders.memory_bytes == {}
    assert first.available == second.available


@pytest.mark.gpu
def test_real_holders_are_processes_of_this_host() -> None:
    holders = real_nvml_with_driver().read()
    assert holders.available
    for pid in holders.memory_bytes:
        assert (Path("/proc") / str(pid)).exists(), f"NVML listed pid {pid}, which this /proc lacks"


def test_two_gpus_sums_memory_per_process_over_gpus_and_counts_a_dual_listing_once() -> None:
    holders = NvmlGpuHolders(RecordedNvml.named("two_gpus")).read()
    assert holders == GpuHolders(
        memory_bytes={234758: 1145397248 + 2147483648, 5120: 0, 41002: 524288000}, available=True
    )


def test_container_process_is_keyed_by_its_host_pid() -> None:
    nvml = RecordedNvml.named("two_gpus")
    host_pid, namespace_pid = nvml._recording["host_proc"]["234758"]["nspid"]
    holders = NvmlGpuHolders(nvml).read()
    assert host_pid in holders.memory_bytes
    assert namespace_pid not in holders.memory_bytes


def test_mig_instances_each_report_their_process() -> None:
    holders = NvmlGpuHolders(RecordedNvml.named("mig")).read()
    assert holders.memory_bytes == {9001: 4966055936, 9002: 2516582400}


def test_idle_gpu_has_no_holders_but_nvml_is_available() -> None:
    assert NvmlGpuHolders(RecordedNvml.named("idle")).read() == GpuHolders(memory_bytes={}, available=True)


@pytest.mark.parametrize("name", ["no_driver", "no_library"])
def test_without_a_driver_it_says_once_that_detection_falls_back(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="croft.nvml")
    nvml = RecordedNvml.named(name)
    source = NvmlGpuHolders(nvml)
    reads = [source.read() for _ in range(3)]
    assert reads == [GpuHolders(available=False)] * 3
    assert nvml.calls == ["nvmlInit"]
    notes = [r.getMessage() for r in caplog.records if r.name == "croft.nvml"]
    assert len(notes) == 1
    assert FALLBACK_NOTE in notes[0]


def test_a_lost_gpu_is_skipped_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="croft.nvml")
    source = NvmlGpuHolders(RecordedNvml.named("gpu_lost"))
    reads = [source.read() for _ in range(3)]
    assert reads == [GpuHolders(memory_bytes={7781: 40802189312}, available=True)] * 3
    assert source.skipped == 6  # compute and graphics listings of GPU 1, three polls
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "NVML device 1" in warnings[0]


def test_graphics_listing_not_supported_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    source = NvmlGpuHolders(RecordedNvml.named("mig"))
    source.read()
    assert source.skipped == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_close_shuts_nvml_down_once() -> None:
    nvml = RecordedNvml.named("idle")
    source = NvmlGpuHolders(nvml)
    source.close()
    source.close()
    assert nvml.calls.count("nvmlShutdown") == 1
    assert source.read() == GpuHolders(available=False)


def test_real_nvml_on_a_host_without_a_driver_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="croft.nvml")
    source = NvmlGpuHolders()
    if source.available:
        pytest.skip("this host has an NVIDIA driver")
    assert source.read() == GpuHolders(available=False)
    assert [FALLBACK_NOTE in r.getMessage() for r in caplog.records if r.name == "croft.nvml"] == [True]
