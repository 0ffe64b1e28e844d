"""GPU states per process: onset, held, no-gpu; GPU fields only for processes that touched one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.gpu import GpuState, step
from croft.domain.collector.kernel import GpuIoctls

MS = 1_000_000


def test_onset_then_held_then_no_gpu_with_time_since_last_ioctl() -> None:
    reading, state = step(None, GpuIoctls(count=5, last_monotonic_ns=1000 * MS), False, 0, 1000 * MS)
    assert (reading.workload, reading.ioctl_count, reading.since_last_gpu_ioctl_ms) == ("gpu-onset", 5, 0)
    reading, state = step(state, GpuIoctls(count=2, last_monotonic_ns=2500 * MS), False, 0, 3000 * MS)
    assert (reading.workload, reading.ioctl_count, reading.since_last_gpu_ioctl_ms) == ("gpu-held", 2, 500)
    reading, state = step(state, None, False, 0, 5000 * MS)
    assert (reading.workload, reading.ioctl_count, reading.since_last_gpu_ioctl_ms) == ("no-gpu", 0, 2500)
    reading, _ = step(state, GpuIoctls(count=1, last_monotonic_ns=6000 * MS), False, 0, 7000 * MS)
    assert reading.workload == "gpu-onset"


def test_nvml_or_device_file_holds_without_ioctls() -> None:
    reading, state = step(None, None, True, 0, 10)
    assert (reading.workload, reading.ioctl_count, reading.since_last_gpu_ioctl_ms) == ("gpu-onset", 0, None)
    reading, _ = step(state, None, False, 2, 20)
    assert reading.workload == "gpu-held"


def test_a_process_that_never_touched_a_gpu_has_no_gpu_fields() -> None:
    state = None
    for now in range(5):
        reading, state = step(state, None, False, 0, now * 1000 * MS)
        assert (reading.workload, reading.ioctl_count, reading.since_last_gpu_ioctl_ms) == (
            "no-gpu",
            None,
            None,
        )


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 2)), min_size=1, max_size=30))
def test_onset_exactly_when_holding_starts(polls: list[tuple[int, bool, int]]) -> None:
    state: GpuState | None = None
    held_before = False
    last_ns = 0
    for index, (count, nvml, fds) in enumerate(polls):
        now = (index + 1) * 2000 * MS
        ioctls = GpuIoctls(count=count, last_monotonic_ns=now) if count else None
        last_ns = now if count else last_ns
        reading, state = step(state, ioctls, nvml, fds, now)
        holding = bool(count or nvml or fds)
        expected = "no-gpu" if not holding else ("gpu-held" if held_before else "gpu-onset")
        assert reading.workload == expected
        if reading.since_last_gpu_ioctl_ms is not None:
            assert reading.since_last_gpu_ioctl_ms == (now - last_ns) // MS >= 0
        held_before = holding
