"""The GPU series of /metrics: per container and GPU, the memory its processes hold (a gauge) and
each engine's busy seconds (a counter), with a `gpu` label and no pid label."""

from __future__ import annotations

import msgspec
import pytest

from croft.domain.collector.snapshot import CgroupMembership
from croft.domain.dataset import GpuEngine, GpuUse, Row, gpu_label
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition, render_exposition
from croft.domain.metrics.series import MetricsMemory, series
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, cgroup, poll, proc

OTHER = CgroupMembership(unified="/kubepods/burstable/pod5678/" + "cd" * 32)
GIB = 1 << 30


def nvml(index: int, memory: int | None, sm: float | None, **more: float) -> GpuUse:
    return GpuUse(index=index, uuid=f"GPU-{index}", memory_bytes=memory, sm_percent=sm, **more)  # type: ignore[arg-type]


def with_gpus(row: Row, *uses: GpuUse) -> Row:
    return msgspec.structs.replace(row, gpus=uses)


def run(polls: list[tuple[float, list[Row]]]) -> list[tuple[Sample, ...]]:
    """The samples after each poll; every process of any poll is alive in each (a poll without
    its row: an idle process whose row was not due)."""
    everyone = {
        r.tgid: WATCHED if r.process.container_id == "ab" * 32 else OTHER for _, rows in polls for r in rows
    }
    processes = tuple(proc(tgid, cgroups=membership) for tgid, membership in sorted(everyone.items()))
    memory = MetricsMemory()
    out = []
    for second, rows in polls:
        current = poll(second, processes, (cgroup(WATCHED), cgroup(OTHER)))
        samples, memory = series(current, rows, HEALTH, memory)
        out.append(samples)
    return out


def of(samples: tuple[Sample, ...], name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(
            v for k, v in s.labels if k in (names.LABEL_CONTAINER_ID, names.LABEL_GPU, names.LABEL_ENGINE)
        ): s.value
        for s in samples
        if s.name == name
    }


@pytest.mark.parametrize(
    ("use", "label"),
    [
        (GpuUse(index=1, uuid="GPU-9d2a"), "1"),
        (GpuUse(index=0, uuid="GPU-2c4e", gpu_instance_id=2, compute_instance_id=0), "0/2/0"),
        (GpuUse(index=0, driver="amdgpu", pci="0000:03:00.0"), "0000:03:00.0"),
        (GpuUse(index=2, driver="panfrost"), "card2"),
    ],
)
def test_the_gpu_label(use: GpuUse, label: str) -> None:
    assert gpu_label(use) == label


def test_memory_is_summed_per_container_and_gpu_and_engines_count_busy_seconds() -> None:
    a = ("ab" * 32,)
    first = [
        with_gpus(
            member_row(WATCHED, 1, {}),
            nvml(0, 2 * GIB, 50.0, memory_bandwidth_percent=10.0),
            nvml(1, GIB, 0.0),
        ),
        with_gpus(member_row(WATCHED, 2, {}), nvml(0, GIB, 25.0)),
        with_gpus(member_row(OTHER, 3, {}), nvml(0, None, 100.0)),  # NVML could not see its memory
        member_row(WATCHED, 4, {"read": 1.0}),
    ]
    second = [with_gpus(member_row(WATCHED, 1, {}), nvml(0, 2 * GIB, 100.0)), member_row(OTHER, 3, {})]
    after = run([(2, first), (4, second), (10, second)])
    assert of(after[0], names.CONTAINER_GPU_MEMORY_BYTES) == {(*a, "0"): 3 * GIB, (*a, "1"): GIB}
    assert of(after[0], names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL) == {
        (*a, "sm", "0"): 0.0,  # no interval before the first poll
        (*a, "memory_bandwidth", "0"): 0.0,
        (*a, "sm", "1"): 0.0,
        ("cd" * 32, "sm", "0"): 0.0,
    }
    assert of(after[1], names.CONTAINER_GPU_MEMORY_BYTES) == {(*a, "0"): 2 * GIB}
    busy = of(after[2], names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL)
    assert busy[(*a, "sm", "0")] == 2.0 + 6.0  # 100 % of 2 s, then of 6 s
    assert busy[(*a, "sm", "1")] == 0.0  # kept while the container is served
    assert busy[("cd" * 32, "sm", "0")] == 0.0  # its rows since named no GPU
    for samples in after:
        for sample in samples:
            if "gpu" in sample.name:
                assert {k for k, _ in sample.labels} <= {"cgroup", "container_id", "gpu", "engine"}


def test_drm_engines_by_their_names_and_a_quiet_container_keeps_its_counters_not_its_memory() -> None:
    amd = GpuUse(
        index=0,
        driver="amdgpu",
        pci="0000:03:00.0",
        memory_bytes=GIB,
        engines=(GpuEngine(name="gfx", busy_percent=40.0), GpuEngine(name="dec", busy_percent=5.0)),
    )
    busy = [with_gpus(member_row(WATCHED, 1, {}), amd)]
    quiet: list[Row] = []  # the process is still there, its idle row not due this poll
    after = run([(2, busy), (4, busy), (6, quiet)])
    a = "ab" * 32
    assert of(after[1], names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL) == {
        (a, "dec", "0000:03:00.0"): 0.1,
        (a, "gfx", "0000:03:00.0"): 0.8,
    }
    assert of(after[2], names.CONTAINER_GPU_MEMORY_BYTES) == {}
    assert of(after[2], names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL) == of(
        after[1], names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL
    )
    text = render_exposition(after[1])
    assert f"# TYPE {names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL} counter" in text
    assert f"# TYPE {names.CONTAINER_GPU_MEMORY_BYTES} gauge" in text
    assert parse_exposition(text) == parse_exposition(render_exposition(parse_exposition(text)))


def test_without_gpus_no_gpu_series() -> None:
    (samples,) = run([(2, [member_row(WATCHED, 1, {"read": 1.0})])])
    assert not [s for s in samples if "gpu" in s.name]
