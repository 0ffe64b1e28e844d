"""The prometheus_client side of /metrics: what it writes parses back to the domain's samples,
whatever the labels hold; its own registry only; a scrape never sees half of a poll."""

from __future__ import annotations

import threading

import attrs
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_registry
from croft.domain.dataset.row import Process
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition
from croft.domain.metrics.series import Health, MetricsMemory, label_text, series
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, poll, proc

HOSTILE = [
    '/kube"pods"/a',
    "/back\\slash\\",
    "/new\nline\n",
    "/ünïcødé/容器/🚀",
    '\\"\\n',
    "/tab\tand\rreturn",
    "/lone\udc80surrogate",
    "",
]


def body_of(samples: tuple[Sample, ...]) -> str:
    collector = SnapshotCollector()
    collector.publish(samples)
    return exposition_body(metrics_registry(collector)).decode("utf-8")


def hostile_samples(cgroup: str, container_id: str, syscall: str) -> tuple[Sample, ...]:
    """The series of one row whose cgroup, container id and syscall name are the given texts."""
    base = member_row(WATCHED, 1, {syscall: 12.5, "read": 1.0})
    hostile = Process(comm="x", exe="x", cgroup=cgroup, container_id=container_id or None, cwd="/")
    samples, _ = series(poll(2, (proc(1),)), [attrs.evolve(base, process=hostile)], HEALTH, MetricsMemory())
    return samples


def test_hostile_labels_are_escaped_and_parse_back_exactly() -> None:
    for text in HOSTILE:
        samples = hostile_samples(cgroup=text, container_id=text, syscall=text or "x")
        parsed = parse_exposition(body_of(samples))
        assert parsed == samples
        rate = next(s for s in parsed if s.name == names.CONTAINER_SYSCALL_RATE and s.value == 12.5)
        assert rate.label(names.LABEL_CGROUP) == label_text(text)


@given(st.text(max_size=30), st.text(max_size=30), st.text(min_size=1, max_size=20))
def test_any_label_text_round_trips_through_prometheus_client(cgroup: str, cid: str, syscall: str) -> None:
    samples = hostile_samples(cgroup, cid, syscall)
    assert parse_exposition(body_of(samples)) == samples


def test_types_help_and_no_default_collectors() -> None:
    samples, _ = series(
        poll(2, (proc(1),)), [member_row(WATCHED, 1, {"sendto": 3.0})], HEALTH, MetricsMemory()
    )
    text = body_of(samples)
    assert "# TYPE croft_rows_written_total counter\n" in text
    assert "# TYPE croft_container_syscall_rate gauge\n" in text
    assert f"# HELP croft_container_cpu_cores {names.HELP[names.CONTAINER_CPU_CORES]}\n" in text
    metric_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(metric_lines) == len(samples)
    assert all(line.startswith("croft_") for line in metric_lines)


def test_nothing_is_served_before_the_first_poll() -> None:
    assert body_of(()) == ""


def poll_samples(index: int) -> tuple[Sample, ...]:
    """A poll whose every sample carries `index`, so a torn scrape would show two values."""
    rates = {f"call{j}": float(index) for j in range(20)}
    health = Health(float(index), index, index, index, index)
    samples, _ = series(poll(index, (proc(1),)), [member_row(WATCHED, 1, rates)], health, MetricsMemory())
    return samples


def test_a_scrape_during_publishing_sees_one_whole_poll() -> None:
    collector = SnapshotCollector()
    registry = metrics_registry(collector)
    stop = threading.Event()

    def publish() -> None:
        index = 1
        while not stop.is_set():
            collector.publish(poll_samples(index))
            index += 1

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        seen = set()
        for _ in range(200):
            parsed = parse_exposition(exposition_body(registry).decode())
            if not parsed:
                continue
            rates = {s.value for s in parsed if s.name == names.CONTAINER_SYSCALL_RATE}
            (index,) = rates
            assert {s.value for s in parsed if s.name == names.ROWS_WRITTEN_TOTAL} == {index}
            seen.add(index)
    finally:
        stop.set()
        publisher.join()
    assert len(seen) > 1
