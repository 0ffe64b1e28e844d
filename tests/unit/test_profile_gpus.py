"""croft profile's GPU figures: per poll the GPU memory and busy share summed over the subject's
rows, their mean, p95 and max over the polls that measured them, and no key when none did."""

from __future__ import annotations

import msgspec
import pytest

from croft.domain.dataset import GpuEngine, GpuUse, Row
from croft.domain.dataset.profile import ProfileAccumulator, Subject, profile_of, subject_profile
from tests.helpers.rows import seq_row
from tests.helpers.spec_keys import PROFILE_KEYS

CID = f"{1:064x}"
GIB = 1 << 30


def row(unix_ms: int, tgid: int, *uses: GpuUse) -> Row:
    return msgspec.structs.replace(
        seq_row(tgid, unix_ms, container=1), workload="gpu-held", gpus=uses or None
    )


def nvml(memory: int | None, sm: float | None, index: int = 0) -> GpuUse:
    return GpuUse(index=index, uuid=f"GPU-{index}", memory_bytes=memory, sm_percent=sm)


def profile(*rows: Row, subject: Subject | None = None):  # type: ignore[no-untyped-def]
    acc = ProfileAccumulator(CID, None, None, subject)
    for r in rows:
        acc.add("n", r)
    key = next(iter(acc.tracks))
    got = subject_profile(acc.subject, key, acc.tracks[key], None, None)
    assert got is not None
    return got.to_json()


def test_gpu_figures_sum_a_polls_processes_and_gpus_and_spread_over_the_polls_that_measured_them() -> None:
    out = profile(
        row(10, 1, nvml(2 * GIB, 50.0), nvml(GIB, 100.0, index=1)),  # one process on two GPUs
        row(10, 2, nvml(GIB, 25.0)),
        row(12, 1, nvml(4 * GIB, 80.0)),
        row(14, 1, nvml(None, None)),  # MIG: listed, nothing measured
        row(16, 1),  # no GPU source listed it
    )
    assert list(out) == [*PROFILE_KEYS, "gpu_memory_bytes", "gpu_percent"]
    assert out["polls"] == 4
    assert out["gpu_memory_bytes"] == {"mean": 4 * GIB, "p95": 4 * GIB, "max": 4 * GIB}
    assert out["gpu_percent"] == {"mean": 127.5, "p95": pytest.approx(170.25), "max": 175.0}


def test_drm_engines_count_by_the_busiest_and_the_keys_go_before_a_cgroups_own() -> None:
    amd = GpuUse(
        index=0,
        driver="amdgpu",
        pci="0000:03:00.0",
        memory_bytes=512 << 20,
        engines=(GpuEngine(name="gfx", busy_percent=30.0), GpuEngine(name="dec", busy_percent=0.1)),
    )
    first = row(10, 1, amd)
    out = profile(first, row(12, 1, amd), subject=Subject("cgroup", first.process.cgroup))
    assert list(out)[-3:] == ["gpu_memory_bytes", "gpu_percent", "cgroup"]
    assert out["gpu_percent"] == {"mean": 30.0, "p95": 30.0, "max": 30.0}
    assert out["gpu_memory_bytes"]["max"] == 512 << 20 and isinstance(out["gpu_memory_bytes"]["max"], int)


def test_without_gpu_figures_the_profile_has_the_keys_it_had() -> None:
    out = profile(row(10, 1), row(12, 1, nvml(None, None)))
    assert list(out) == PROFILE_KEYS


def test_a_sum_of_percentages_does_not_depend_on_the_order_of_the_rows() -> None:
    rows = [row(10, tgid, nvml(None, share)) for tgid, share in ((1, 0.1), (2, 0.2), (3, 0.7))]
    forward, backward = profile(*rows), profile(*reversed(rows))
    assert forward == backward and forward["gpu_percent"]["max"] == 1.0
    acc = ProfileAccumulator(CID, None, None)
    for r in rows:
        acc.add("n", r)
    assert profile_of(CID, acc.tracks[CID], None, None) is not None
