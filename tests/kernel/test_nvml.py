"""NvmlGpuHolders: the GpuHolderSource contract against recorded NVML answers and the real NVML, and
what it makes of each recording.

The recordings in fixtures/nvml/ are hand-made from pynvml's API (their `provenance` says so), until
scripts/record_gpu.sh records real ones on a GPU host."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from croft.adapters.host.nvml import FALLBACK_NOTE, NvmlGpuHolders
from croft.domain.collector.gpu_use import nvml_use
from croft.domain.collector.kernel import GpuHolders, GpuHolderSource, NvmlGpu, UtilizationSample
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
            assert holders.memory_bytes == {} and holders.gpus == {}
        assert set(holders.gpus) == set(holders.memory_bytes)
        for pid, gpus in holders.gpus.items():
            assert sum(g.memory_bytes or 0 for g in gpus) == holders.memory_bytes[pid]
            for gpu in gpus:
                assert gpu.index >= 0 and (gpu.memory_bytes is None or gpu.memory_bytes >= 0)
                for sample in gpu.samples or ():
                    assert all(
                        0 <= v <= 100 for v in (sample.sm, sample.memory, sample.encoder, sample.decoder)
                    )
    assert first.available == second.available
    # samples come once: the second read asks for those after the newest the first one saw
    for pid, gpus in second.gpus.items():
        for gpu in gpus:
            seen = [
                s.timestamp_us
                for before in first.gpus.get(pid, ())
                if before.index == gpu.index
                for s in before.samples or ()
            ]
            assert all(s.timestamp_us > max(seen, default=-1) for s in gpu.samples or ())


@pytest.mark.gpu
def test_real_holders_are_processes_of_this_host() -> None:
    holders = real_nvml_with_driver().read()
    assert holders.available
    for pid in holders.memory_bytes:
        assert (Path("/proc") / str(pid)).exists(), f"NVML listed pid {pid}, which this /proc lacks"


def test_two_gpus_sums_memory_per_process_over_gpus_and_counts_a_dual_listing_once() -> None:
    holders = NvmlGpuHolders(RecordedNvml.named("two_gpus")).read()
    assert holders.available
    assert holders.memory_bytes == {234758: 1145397248 + 2147483648, 5120: 0, 41002: 524288000}


def test_container_process_is_keyed_by_its_host_pid() -> None:
    nvml = RecordedNvml.named("two_gpus")
    host_pid, namespace_pid = nvml._recording["host_proc"]["234758"]["nspid"]
    holders = NvmlGpuHolders(nvml).read()
    assert host_pid in holders.memory_bytes
    assert namespace_pid not in holders.memory_bytes


def test_mig_instances_each_report_their_process() -> None:
    holders = NvmlGpuHolders(RecordedNvml.named("mig")).read()
    assert holders.memory_bytes == {9001: 4966055936, 9002: 2516582400}
    uuid = "GPU-2c4e6a8b-0d1f-3a5c-7e9b-1d3f5a7c9e04"
    # MIG gives no per-process utilisation: None (left out of rows), not 0
    assert holders.gpus == {
        9001: (NvmlGpu(0, uuid, 4966055936, gpu_instance_id=1, compute_instance_id=0, samples=None),),
        9002: (NvmlGpu(0, uuid, 2516582400, gpu_instance_id=2, compute_instance_id=0, samples=None),),
    }
    use = nvml_use(holders.gpus[9001][0])
    assert (use.gpu_instance_id, use.compute_instance_id, use.sm_percent) == (1, 0, None)


def test_idle_gpu_has_no_holders_but_nvml_is_available() -> None:
    assert NvmlGpuHolders(RecordedNvml.named("idle")).read() == GpuHolders(
        memory_bytes={}, available=True, gpus={}
    )


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
    assert [r.memory_bytes for r in reads] == [{7781: 40802189312}] * 3
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


T0 = 1_792_505_950_000_000


def test_utilisation_is_the_samples_since_the_previous_read_per_gpu_and_process() -> None:
    nvml = RecordedNvml.named("two_gpus")
    source = NvmlGpuHolders(nvml)
    first, second = source.read(), source.read()
    uuid0, uuid1 = "GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10", "GPU-9d2a7c41-0b5e-8e17-4f3a-2c6b1d8e5f92"
    assert first.gpus[234758] == (
        NvmlGpu(
            0,
            uuid0,
            1145397248,
            samples=(
                UtilizationSample(T0 + 166_000, 40, 12, 0, 0),
                UtilizationSample(T0 + 1_166_000, 60, 20, 0, 0),
            ),
        ),
        NvmlGpu(1, uuid1, 2147483648, samples=(UtilizationSample(T0 + 500_000, 100, 55, 0, 0),)),
    )
    # NVML cannot see pid 5120's memory, and took no sample of it: memory unknown, utilisation 0
    assert first.gpus[5120] == (NvmlGpu(0, uuid0, None, samples=()),)
    assert [nvml_use(g).sm_percent for g in first.gpus[234758]] == [50.0, 100.0]
    xorg = nvml_use(first.gpus[41002][0])
    assert (xorg.index, xorg.memory_bytes, xorg.sm_percent, xorg.encoder_percent) == (1, 524288000, 3.0, 25.0)
    # the second read asks each device for what came after its newest sample: GPU 1 has none (0)
    assert [c for c in nvml.calls if c.startswith("processes_utilization_info")] == [
        "processes_utilization_info(0, since=0)",
        "processes_utilization_info(1, since=0)",
        f"processes_utilization_info(0, since={T0 + 1_166_000})",
        f"processes_utilization_info(1, since={T0 + 500_000})",
    ]
    assert [(nvml_use(g).sm_percent, nvml_use(g).memory_bandwidth_percent) for g in second.gpus[234758]] == [
        (80.0, 28.0),
        (0.0, 0.0),
    ]
    assert nvml.calls.count("nvmlDeviceGetUUID(0)") == 1  # asked once per device


def test_an_older_driver_is_asked_the_older_call_from_then_on(caplog: pytest.LogCaptureFixture) -> None:
    nvml = RecordedNvml.named("gpu_lost")
    source = NvmlGpuHolders(nvml)
    first, second = source.read(), source.read()
    assert first.gpus[7781][0].samples == (UtilizationSample(T0 + 1_000_000, 97, 64, 0, 0),)
    assert second.gpus[7781][0].samples == ()  # NVML_ERROR_NOT_FOUND: nothing since
    asked = [c for c in nvml.calls if "utilization" in c]
    assert asked == [
        "processes_utilization_info(0, since=0)",
        "process_utilization(0, since=0)",
        f"process_utilization(0, since={T0 + 1_000_000})",
    ]


def test_a_device_without_per_process_utilisation_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="croft.nvml")
    nvml = RecordedNvml.named("mig")
    source = NvmlGpuHolders(nvml)
    for _ in range(3):
        source.read()
    notes = [r.getMessage() for r in caplog.records if "per-process utilisation" in r.getMessage()]
    assert len(notes) == 1
    assert len([c for c in nvml.calls if "utilization" in c]) == 2  # both calls, first read only
