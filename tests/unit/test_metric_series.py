"""The series of /metrics from the newest poll: grouping, the syscall cap, stale and idle groups,
health counters."""

from __future__ import annotations

import math

import attrs
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.kernel import KernelSample
from croft.domain.collector.snapshot import CgroupMembership, Poll
from croft.domain.dataset.row import CgroupUsage, Row
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample
from croft.domain.metrics.series import HEALTH_NAMES, MetricsMemory, series, top_syscalls
from tests.helpers.rows import cgroup_usage, member_row
from tests.helpers.snapshots import HEALTH, HOST, WATCHED, poll, proc

OTHER_POD = CgroupMembership(unified="/kubepods/besteffort/pod99/" + "cd" * 32)


def by_name(samples: tuple[Sample, ...], name: str) -> list[Sample]:
    return [s for s in samples if s.name == name]


def value(samples: tuple[Sample, ...], name: str, **labels: str) -> float:
    (found,) = [s for s in by_name(samples, name) if all(s.label(k) == v for k, v in labels.items())]
    return found.value


def one(current: Poll, rows: list[Row], memory: MetricsMemory | None = None) -> tuple[Sample, ...]:
    return series(current, rows, HEALTH, memory or MetricsMemory())[0]


def test_a_container_sums_its_processes_syscalls_and_labels_each_series() -> None:
    current = poll(2, (proc(1), proc(2)))
    cid = "ab" * 32
    samples = one(
        current,
        [member_row(WATCHED, 1, {"sendto": 100.0, "read": 5.0}), member_row(WATCHED, 2, {"sendto": 20.5})],
    )
    assert value(samples, names.CONTAINER_SYSCALL_RATE, container_id=cid, syscall="sendto") == 120.5
    assert value(samples, names.CONTAINER_SYSCALL_RATE, container_id=cid, syscall="read") == 5.0
    for sample in samples[: -len(HEALTH_NAMES)]:
        assert sample.label(names.LABEL_CONTAINER_ID) == cid
        assert sample.label(names.LABEL_CGROUP) == WATCHED.unified
    assert value(samples, names.CONTAINER_CPU_CORES, container_id=cid) == 1.5
    assert value(samples, names.CONTAINER_MEMORY_USAGE_BYTES, container_id=cid) == float(1 << 30)
    assert value(samples, names.CONTAINER_CPU_THROTTLED_FRACTION, container_id=cid) == 0.25
    pressure = {
        s.label(names.LABEL_RESOURCE): s.value for s in by_name(samples, names.CONTAINER_PRESSURE_RATIO)
    }
    assert pressure == {"cpu": 0.04, "memory": 0.005, "io": 0.0}  # PSI's percent as a 0-1 ratio


def test_health_series_and_map_drops_accumulating() -> None:
    memory = MetricsMemory()
    for second, dropped in ((2, 3), (4, 0), (6, 4)):
        current = attrs.evolve(poll(second, ()), kernel=KernelSample(dropped_entries=dropped))
        samples, memory = series(current, [], HEALTH, memory)
    assert value(samples, names.MAP_DROPS_TOTAL) == 7.0
    assert value(samples, names.LAST_POLL_TIMESTAMP_SECONDS) == 1_700_000_006.0
    assert value(samples, names.POLL_DURATION_SECONDS) == 0.125
    assert value(samples, names.ROWS_WRITTEN_TOTAL) == 40.0
    assert value(samples, names.ROWS_DROPPED_TOTAL) == 2.0
    assert value(samples, names.COMPRESSION_BACKLOG_SEGMENTS) == 1.0
    assert value(samples, names.COMPRESSION_FAILURES_TOTAL) == 3.0
    assert not any(s.labels for s in samples)


def test_a_host_cgroup_is_a_group_with_an_empty_container_id() -> None:
    samples = one(poll(2, (proc(7, cgroups=HOST),)), [member_row(HOST, 7, {"write": 3.0})])
    (rate,) = by_name(samples, names.CONTAINER_SYSCALL_RATE)
    assert rate.label(names.LABEL_CONTAINER_ID) == ""
    assert rate.label(names.LABEL_CGROUP) == HOST.unified


def test_a_container_takes_the_gauges_of_its_own_shortest_cgroup() -> None:
    nested = member_row(
        WATCHED, 2, {"read": 1.0}, cgroup_usage(memory_bytes=5), cgroup=f"{WATCHED.unified}/worker"
    )
    samples = one(poll(2, (proc(1), proc(2))), [nested, member_row(WATCHED, 1, {"read": 2.0})])
    assert value(samples, names.CONTAINER_MEMORY_USAGE_BYTES) == float(1 << 30)
    assert value(samples, names.CONTAINER_SYSCALL_RATE, syscall="read") == 3.0
    assert {s.label(names.LABEL_CGROUP) for s in samples if s.labels} == {WATCHED.unified}


def test_stale_containers_disappear() -> None:
    first, memory = series(
        poll(2, (proc(1), proc(2, cgroups=OTHER_POD))),
        [member_row(WATCHED, 1, {"sendto": 1.0}), member_row(OTHER_POD, 2, {"sendto": 2.0})],
        HEALTH,
        MetricsMemory(),
    )
    assert {s.label(names.LABEL_CONTAINER_ID) for s in first if s.labels} == {"ab" * 32, "cd" * 32}
    second, memory = series(poll(4, (proc(1),)), [member_row(WATCHED, 1, {"sendto": 1.0})], HEALTH, memory)
    assert {s.label(names.LABEL_CONTAINER_ID) for s in second if s.labels} == {"ab" * 32}
    third, _ = series(poll(6, ()), [], HEALTH, memory)
    assert [s for s in third if s.labels] == []


def test_an_idle_container_stays_with_zero_rates_and_its_last_memory() -> None:
    busy = member_row(OTHER_POD, 2, {"sendto": 2.0}, cgroup_usage(cpu_cores=0.8, memory_bytes=4096))
    _, memory = series(poll(2, (proc(1), proc(2, cgroups=OTHER_POD))), [busy], HEALTH, MetricsMemory())
    samples, memory = series(poll(4, (proc(1), proc(2, cgroups=OTHER_POD))), [], HEALTH, memory)
    cid = "cd" * 32
    assert by_name(samples, names.CONTAINER_SYSCALL_RATE) == []
    assert value(samples, names.CONTAINER_CPU_CORES, container_id=cid) == 0.0
    assert value(samples, names.CONTAINER_CPU_THROTTLED_FRACTION, container_id=cid) == 0.0
    assert value(samples, names.CONTAINER_MEMORY_USAGE_BYTES, container_id=cid) == 4096.0
    later, _ = series(poll(6, (proc(1),)), [], HEALTH, memory)
    assert [s for s in later if s.labels] == []


def test_a_container_never_seen_with_a_row_is_not_served() -> None:
    samples = one(poll(2, (proc(1),)), [])
    assert [s for s in samples if s.labels] == []


def test_syscalls_past_the_cap_are_summed_as_other() -> None:
    calls = {f"call{i:02d}": float(100 - i) for i in range(30)}
    samples = one(poll(2, (proc(1),)), [member_row(WATCHED, 1, calls)])
    rates = {s.label(names.LABEL_SYSCALL): s.value for s in by_name(samples, names.CONTAINER_SYSCALL_RATE)}
    assert len(rates) == names.SYSCALLS_PER_CONTAINER + 1
    assert rates["call00"] == 100.0
    assert "call24" not in rates
    assert rates[names.OTHER_SYSCALLS] == sum(100.0 - i for i in range(24, 30))


def test_a_syscall_named_other_never_makes_a_duplicate_series() -> None:
    assert top_syscalls({"other": 1.0, "read": 2.0}, limit=1) == (("read", 2.0), ("other", 1.0))
    assert top_syscalls({"other": 1.0, "read": 2.0, "x": 0.5}, limit=1) == (("read", 2.0), ("other", 1.5))


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False),
        max_size=60,
    ),
    st.integers(min_value=0, max_value=30),
)
def test_top_syscalls_is_bounded_unique_and_keeps_the_total(totals: dict[str, float], limit: int) -> None:
    got = top_syscalls(totals, limit)
    labels = [name for name, _ in got]
    assert len(got) <= limit + 1
    assert len(set(labels)) == len(labels)
    assert all(rate >= 0 for _, rate in got)
    assert math.isclose(
        sum(r for _, r in got), sum(totals.values()), rel_tol=1e-9, abs_tol=0.01 * (limit + 2)
    )
    kept = [rate for name, rate in got if name != names.OTHER_SYSCALLS]
    assert kept == sorted(kept, reverse=True)


@given(st.lists(st.sampled_from([WATCHED, OTHER_POD, HOST]), max_size=8), st.integers(1, 40))
def test_series_never_repeat_a_label_set_and_stay_bounded(memberships: list, width: int) -> None:
    procs = tuple(proc(i + 1, cgroups=m) for i, m in enumerate(memberships))
    rows = [member_row(m, i + 1, {f"c{j}": 1.0 + j for j in range(width)}) for i, m in enumerate(memberships)]
    samples = one(poll(2, procs), rows)
    keys = [(s.name, s.labels) for s in samples]
    assert len(keys) == len(set(keys))
    groups = len(set(memberships))
    per_group = min(width, names.SYSCALLS_PER_CONTAINER) + (width > names.SYSCALLS_PER_CONTAINER) + 3
    counters = {
        names.CONTAINER_SYSCALLS_TOTAL,
        names.CONTAINER_CPU_SECONDS_TOTAL,
        names.CONTAINER_CPU_PERIODS_TOTAL,
        names.CONTAINER_CPU_THROTTLED_PERIODS_TOTAL,
        names.CONTAINER_NETWORK_RECEIVE_BYTES_TOTAL,
        names.CONTAINER_NETWORK_TRANSMIT_BYTES_TOTAL,
        names.CONTAINER_FS_READ_BYTES_TOTAL,
        names.CONTAINER_FS_WRITE_BYTES_TOTAL,
        names.CONTAINER_PRESSURE_RATIO,
        names.CONTAINER_OOM_EVENTS_TOTAL,
        names.CONTAINER_INFO,
    }
    # gauges: the named syscalls and `other`, CPU, memory, throttling
    assert len([s for s in samples if s.name not in counters]) == groups * per_group + len(HEALTH_NAMES)
    # counters: every syscall by name (never `other`), CPU, at most 2 CFS, 4 byte counters, 3 PSI, OOM
    # kills, info
    assert len([s for s in samples if s.name in counters]) <= groups * (width + 1 + 2 + 4 + 3 + 1 + 1)


def test_a_figure_the_cgroup_does_not_offer_has_no_series_rather_than_0() -> None:
    """A hybrid host's v2 cgroup: CPU and PSI, no memory, no throttling (cAdvisor omits what a
    cgroup lacks); one v1 cgroup: no PSI."""
    v1 = CgroupMembership(unified="/", controllers=(("cpu", "/batch"), ("memory", "/batch")))
    hybrid_v2 = CgroupUsage(
        cpu_cores=0.5, cpu_pressure_avg10=2.0, memory_pressure_avg10=0.0, io_pressure_avg10=0.0
    )
    v1_usage = CgroupUsage(cpu_cores=0.25, cpu_throttled_fraction=0.1, memory_bytes=1 << 20, oom_kills=0)
    current = poll(2, (proc(1), proc(2, cgroups=v1)))
    samples = one(current, [member_row(WATCHED, 1, {}, hybrid_v2), member_row(v1, 2, {}, v1_usage)])
    of_v2 = {s.name for s in samples if s.label(names.LABEL_CGROUP) == WATCHED.unified}
    of_v1 = {s.name for s in samples if s.label(names.LABEL_CGROUP) == "/batch"}
    assert {names.CONTAINER_CPU_CORES, names.CONTAINER_PRESSURE_RATIO} <= of_v2
    assert not {names.CONTAINER_MEMORY_USAGE_BYTES, names.CONTAINER_CPU_THROTTLED_FRACTION} & of_v2
    assert {names.CONTAINER_MEMORY_USAGE_BYTES, names.CONTAINER_CPU_THROTTLED_FRACTION} <= of_v1
    assert names.CONTAINER_PRESSURE_RATIO not in of_v1
