"""The counters of /metrics: calls/s times the poll interval summed per syscall, the cgroup's own
kernel CPU and CFS counters, bytes, PSI as a ratio, the pod UID from the cgroup path; counters
never go down while a group is served."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.row import Pod
from croft.domain.metrics import names as names
from croft.domain.metrics.counters import pod_uid
from croft.domain.metrics.exposition import Sample
from croft.domain.metrics.series import MetricsMemory, series
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, cgroup, poll, proc

CID = "ab" * 32


def run(polls: list[tuple[float, dict[str, float]]], **sample: int) -> list[tuple[Sample, ...]]:
    """The samples after each (second, syscalls/s) poll of one process in WATCHED."""
    memory = MetricsMemory()
    out = []
    for second, rates in polls:
        current = poll(second, (proc(1),), (cgroup(WATCHED, **sample),))
        samples, memory = series(current, [member_row(WATCHED, 1, rates)], HEALTH, memory)
        out.append(samples)
    return out


def counter(samples: tuple[Sample, ...], name: str, **labels: str) -> float | None:
    found = [s for s in samples if s.name == name and all(s.label(k) == v for k, v in labels.items())]
    return found[0].value if found else None


def test_syscalls_total_is_each_rate_times_its_interval_summed() -> None:
    after = run([(2, {"sendto": 10.0}), (4, {"sendto": 10.0, "read": 1.5}), (10, {"sendto": 3.0})])
    total = names.CONTAINER_SYSCALLS_TOTAL
    assert counter(after[0], total, syscall="sendto") == 0.0  # no interval before the first poll
    assert counter(after[1], total, syscall="sendto") == 20.0
    assert counter(after[1], total, syscall="read") == 3.0
    assert counter(after[2], total, syscall="sendto") == 38.0  # 6 s at 3/s
    assert counter(after[2], total, syscall="read") == 3.0  # kept while the group is served
    assert all(s.label(names.LABEL_CONTAINER_ID) == CID for s in after[2] if s.name == total)


def test_cpu_and_cfs_counters_are_the_cgroups_own_kernel_counters() -> None:
    (samples,) = run([(2, {"read": 1.0})], cpu_usage_ns=12_500_000_000, nr_periods=400, nr_throttled=35)
    assert counter(samples, names.CONTAINER_CPU_SECONDS_TOTAL) == 12.5
    assert counter(samples, names.CONTAINER_CPU_PERIODS_TOTAL) == 400
    assert counter(samples, names.CONTAINER_CPU_THROTTLED_PERIODS_TOTAL) == 35
    ratio = {
        s.label(names.LABEL_RESOURCE): s.value for s in samples if s.name == names.CONTAINER_PRESSURE_RATIO
    }
    assert ratio == {"cpu": 0.04, "memory": 0.005, "io": 0.0}
    (info,) = [s for s in samples if s.name == names.CONTAINER_INFO]
    assert info.value == 1.0 and info.label(names.LABEL_POD_UID) == ""


def test_pressure_waiting_seconds_are_the_cgroups_own_psi_totals() -> None:
    """PSI as counters, as node_exporter and cAdvisor export it: `some total` microseconds as
    seconds; a resource without a total (cgroup v1, an old kernel) has no series, and a poll that
    misses one keeps the last value read, so the counter never goes down."""
    waiting = names.CONTAINER_PRESSURE_WAITING_SECONDS_TOTAL
    totals = {"cpu_pressure_stalled_us": 735_524_108, "memory_pressure_stalled_us": 1_555_435}
    memory = MetricsMemory()
    seen = []
    for second, sample in ((2, totals), (4, {**totals, "cpu_pressure_stalled_us": None}), (6, {})):
        current = poll(second, (proc(1),), (cgroup(WATCHED, **sample),))
        samples, memory = series(current, [member_row(WATCHED, 1, {"read": 1.0})], HEALTH, memory)
        seen.append({s.label(names.LABEL_RESOURCE): s.value for s in samples if s.name == waiting})
    assert seen[0] == {"cpu": 735.524108, "memory": 1.555435}
    assert seen[1] == seen[2] == seen[0]  # no io total ever read: no io series


def test_without_kernel_counters_cpu_seconds_integrate_the_cgroup_cores() -> None:
    after = run(
        [(2, {"read": 1.0}), (6, {"read": 1.0})], cpu_usage_ns=None, nr_periods=None, nr_throttled=None
    )
    cores = counter(after[1], names.CONTAINER_CPU_CORES)
    assert cores is not None and counter(after[1], names.CONTAINER_CPU_SECONDS_TOTAL) == pytest.approx(
        4 * cores
    )
    assert counter(after[1], names.CONTAINER_CPU_PERIODS_TOTAL) is None


@given(
    st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "c", "sendto"]), st.floats(0, 1e6)), min_size=1, max_size=8
    )
)
def test_counters_never_go_down_while_the_group_is_served(rates: list[dict[str, float]]) -> None:
    after = run([(2.0 * (i + 1), r) for i, r in enumerate(rates)])
    for before, now in itertools.pairwise(after):
        old = {(s.name, s.labels): s.value for s in before if s.name.endswith("_total")}
        for sample in now:
            if (sample.name, sample.labels) in old:
                assert sample.value >= old[(sample.name, sample.labels)], sample.name


@pytest.mark.parametrize(
    ("path", "uid"),
    [
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod677f6cbd_cc22_af58_be65_21cc3e2434e3.slice/"
            "cri-containerd-7af0.scope",
            "677f6cbd-cc22-af58-be65-21cc3e2434e3",
        ),
        (
            "/kubepods/besteffort/pod0d8e0a3c-1b2c-4d5e-8f90-123456789abc/" + "cd" * 32,
            "0d8e0a3c-1b2c-4d5e-8f90-123456789abc",
        ),
        (
            "/kubepods.slice/kubepods-pode2dcaa37f463b337d20b5d59db610487.slice/x",
            "e2dcaa37-f463-b337-d20b-5d59db610487",
        ),
        ("/system.slice/docker-" + "ab" * 32 + ".scope", ""),
        ("/user.slice/podcast.service", ""),
    ],
)
def test_the_pod_uid_comes_from_the_cgroup_path(path: str, uid: str) -> None:
    assert pod_uid(path) == uid


def test_a_pods_container_carries_its_names_on_every_series_and_the_info_its_uid() -> None:
    """Rows that name their pod (the collector reads the API's pods of its node) give each series
    of the container `namespace`, `pod` and `container` labels, as cAdvisor's kubelet series;
    the pod's sandbox has no container name; a host cgroup and a container without names have none."""
    pod_cgroup = (
        "/kubepods.slice/kubepods-pod0d8e0a3c_1b2c_4d5e_8f90_123456789abc.slice/cri-containerd-"
        + CID
        + ".scope"
    )
    current = poll(2, (proc(1),), (cgroup(WATCHED),))
    row = member_row(WATCHED, 1, {"read": 1.0}, cgroup=pod_cgroup)
    named = msgspec.structs.replace(row, pod=Pod(namespace="shop", name="web-0", container="web"))
    samples, _ = series(current, [named], HEALTH, MetricsMemory())
    (info,) = [s for s in samples if s.name == names.CONTAINER_INFO]
    assert dict(info.labels) == {
        "cgroup": pod_cgroup,
        "container": "web",
        "container_id": CID,
        "namespace": "shop",
        "pod": "web-0",
        "pod_uid": "0d8e0a3c-1b2c-4d5e-8f90-123456789abc",
    }
    per_container = [s for s in samples if s.name.startswith("croft_container_")]
    assert {s.name for s in per_container} >= {names.CONTAINER_CPU_CORES, names.CONTAINER_SYSCALLS_TOTAL}
    for sample in per_container:
        labels = dict(sample.labels)
        assert (labels["namespace"], labels["pod"], labels["container"]) == ("shop", "web-0", "web"), sample
        assert [k for k, _ in sample.labels] == sorted(k for k, _ in sample.labels)
    sandbox = msgspec.structs.replace(row, pod=Pod(namespace="shop", name="web-0"))
    samples, _ = series(current, [sandbox], HEALTH, MetricsMemory())
    cores = next(s for s in samples if s.name == names.CONTAINER_CPU_CORES)
    assert dict(cores.labels)["pod"] == "web-0" and "container" not in dict(cores.labels)
    samples, _ = series(current, [row], HEALTH, MetricsMemory())
    assert all("pod" not in dict(s.labels) for s in samples)


def test_a_figure_no_row_measured_has_no_counter_rather_than_one_stuck_at_0() -> None:
    """Disk bytes unread (/proc/<pid>/io closed to the collector) and network bytes without the
    socket tracepoints: no counter; a cgroup without CPU usage files: no CPU seconds."""
    row = member_row(WATCHED, 100, {"read": 1.0})
    unread = msgspec.structs.replace(
        row.usage, read_bytes_s=None, write_bytes_s=None, network_rx_bytes_s=None, network_tx_bytes_s=None
    )
    no_cpu = msgspec.structs.replace(row.cgroup_usage, cpu_cores=None)
    blind = msgspec.structs.replace(row, usage=unread, cgroup_usage=no_cpu)
    memory = MetricsMemory()
    for second in (2, 4):
        current = poll(second, (proc(100),), cgroups=(cgroup(WATCHED, cpu_usage_ns=None),))
        samples, memory = series(current, [blind], HEALTH, memory)
    served = {s.name for s in samples}
    assert names.CONTAINER_SYSCALLS_TOTAL in served
    for gone in (
        names.CONTAINER_FS_READ_BYTES_TOTAL,
        names.CONTAINER_FS_WRITE_BYTES_TOTAL,
        names.CONTAINER_NETWORK_RECEIVE_BYTES_TOTAL,
        names.CONTAINER_NETWORK_TRANSMIT_BYTES_TOTAL,
        names.CONTAINER_CPU_SECONDS_TOTAL,
    ):
        assert gone not in served, gone
