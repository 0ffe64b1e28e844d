"""The rows' `gpus`: NVML's listings and samples (`nvml_use`) and the DRM clients of a poll, through
the collector core, with the GPU states a DRM client gives."""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs
import msgspec

from croft.domain.collector.drm import DrmClient, parse_fdinfo
from croft.domain.collector.gpu_use import nvml_use
from croft.domain.collector.kernel import GpuHolders, NvmlGpu, UtilizationSample
from croft.domain.collector.rows import CollectorState, rows
from croft.domain.collector.snapshot import Poll
from croft.domain.collector.trace import poll_from_json, poll_to_json
from croft.domain.dataset import GpuEngine, GpuUse
from croft.domain.dataset.codec import decode_row, encode_row
from tests.helpers.snapshots import HOST, config, poll, proc

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "drm"


def test_nvml_utilisation_is_the_mean_of_the_samples_none_is_zero_and_unsupported_is_absent() -> None:
    samples = (UtilizationSample(1, 40, 12, 0, 3), UtilizationSample(2, 61, 20, 8, 0))
    gpu = NvmlGpu(index=1, uuid="GPU-1", memory_bytes=1 << 30, samples=samples)
    assert nvml_use(gpu) == GpuUse(
        index=1,
        uuid="GPU-1",
        memory_bytes=1 << 30,
        sm_percent=50.5,
        memory_bandwidth_percent=16.0,
        encoder_percent=4.0,
        decoder_percent=1.5,
    )
    idle = nvml_use(attrs.evolve(gpu, samples=()))
    assert (idle.sm_percent, idle.memory_bandwidth_percent, idle.encoder_percent, idle.decoder_percent) == (
        0.0,
    ) * 4
    mig = nvml_use(NvmlGpu(0, "GPU-0", None, gpu_instance_id=2, compute_instance_id=0, samples=None))
    assert mig == GpuUse(index=0, uuid="GPU-0", gpu_instance_id=2, compute_instance_id=0)


def run(polls: list[Poll], watch: tuple[str, ...] = ()) -> list[tuple]:
    state, previous, out = CollectorState(), None, []
    for current in polls:
        got, state = rows(previous, current, state, config(watch))
        out.append(got)
        previous = current
    return out


def amdgpu(gfx_ns: int) -> DrmClient:
    sample = tomllib.loads((FIXTURES / "amdgpu.toml").read_text())
    client = parse_fdinfo(sample["fdinfo"], sample["device"], 9)
    assert client is not None
    return attrs.evolve(client, engine_ns=(("gfx", gfx_ns),))


def test_a_drm_client_makes_a_gpu_holder_whose_rows_carry_its_engines() -> None:
    """An AMD process that issues no ioctl croft sees: its open DRM file makes it a holder."""
    sample = proc(tgid=7, cgroups=HOST)
    polls = [
        attrs.evolve(poll(2 * i, (attrs.evolve(sample, cpu_ticks=1000 + i),)), drm={7: (amdgpu(gfx),)})
        for i, gfx in enumerate((10**9, 2 * 10**9, 2 * 10**9))
    ]
    polls.append(poll(6, (sample,)))  # the file closed
    out = run(polls)
    assert [[(r.tgid, r.workload) for r in got] for got in out] == [
        [],
        [(7, "gpu-onset")],
        [(7, "gpu-held")],
        [],
    ]
    (first,), (second,) = out[1], out[2]
    memory = 22 * (1 << 20) + 544428 * 1024
    assert first.gpus == (
        GpuUse(
            index=0,
            driver="amdgpu",
            pci="0000:04:00.0",
            memory_bytes=memory,
            engines=(GpuEngine(name="gfx", busy_percent=50.0),),
        ),
    )
    assert second.gpus is not None and second.gpus[0].engines == (GpuEngine(name="gfx", busy_percent=0.0),)
    assert decode_row(encode_row(first)) == first


def test_nvml_listings_reach_the_row_and_a_process_without_any_has_no_key() -> None:
    listed = NvmlGpu(0, "GPU-0", 3 << 30, samples=(UtilizationSample(1, 70, 30, 0, 0),))
    holders = GpuHolders({7: 3 << 30}, True, gpus={7: (listed,)})
    polls = [
        poll(0, (proc(tgid=7, cgroups=HOST), proc(tgid=8))),
        poll(2, (proc(tgid=7, cgroups=HOST), proc(tgid=8)), gpu=holders),
    ]
    out = run(polls, watch=("kubepods",))
    by_tgid = {row.tgid: row for row in out[1]}
    assert by_tgid[7].gpus == (nvml_use(listed),)
    assert by_tgid[7].gpus[0].sm_percent == 70.0
    assert by_tgid[8].gpus is None  # a watched process no GPU source lists
    assert b'"gpus"' not in encode_row(by_tgid[8])


def test_a_trace_line_keeps_nvml_listings_and_drm_clients_and_older_lines_still_read() -> None:
    listed = NvmlGpu(0, "GPU-0", None, gpu_instance_id=1, compute_instance_id=0, samples=None)
    sampled = NvmlGpu(1, "GPU-1", 5, samples=(UtilizationSample(1792505950166000, 40, 12, 0, 0),))
    snapshot = attrs.evolve(
        poll(2, (proc(tgid=7, cgroups=HOST),), gpu=GpuHolders({7: 5}, True, gpus={7: (listed, sampled)})),
        drm={7: (amdgpu(10**9), attrs.evolve(amdgpu(0), fd=10, client_id=None, pdev=None))},
    )
    line = poll_to_json(snapshot)
    assert poll_from_json(line) == snapshot
    older = msgspec.json.decode(line)
    del older["drm"], older["gpu"]["gpus"]
    assert poll_from_json(msgspec.json.encode(older)) == attrs.evolve(
        snapshot, drm={}, gpu=GpuHolders({7: 5}, True)
    )
