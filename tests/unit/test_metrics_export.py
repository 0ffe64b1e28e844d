"""/metrics: the one renderer (croft.domain.metrics.exposition.render_exposition) writes byte for byte
what prometheus_client's generate_latest writes for the same families; what it serves parses back to
the domain's samples, whatever the labels hold; its own registry only; a scrape never sees half of a
poll."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.domain.dataset.row import Process
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition, render_exposition
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
    return exposition_body(metrics_page(collector)).decode("utf-8")


class PrometheusClientFamilies:
    """The reference: a prometheus_client Collector yielding one metric family per run of samples of
    one name (how croft served its series through prometheus_client before the one renderer)."""

    def __init__(self, samples: tuple[Sample, ...]) -> None:
        self.samples = samples

    def describe(self) -> tuple[Metric, ...]:
        return ()

    def collect(self) -> Iterator[Metric]:
        family: GaugeMetricFamily | CounterMetricFamily | None = None
        family_name = ""
        for sample in self.samples:
            if family is None or sample.name != family_name:
                if family is not None:
                    yield family
                help_text = names.HELP.get(sample.name, sample.name)
                labels = [key for key, _ in sample.labels]
                if sample.name.endswith("_total"):
                    family = CounterMetricFamily(sample.name.removesuffix("_total"), help_text, labels=labels)
                else:
                    family = GaugeMetricFamily(sample.name, help_text, labels=labels)
                family_name = sample.name
            family.add_metric([value for _, value in sample.labels], sample.value)
        if family is not None:
            yield family


def prometheus_client_body(samples: tuple[Sample, ...]) -> bytes:
    registry = CollectorRegistry()
    registry.register(PrometheusClientFamilies(samples))
    return generate_latest(registry)


label_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True)
metric_names = st.sampled_from(sorted(names.HELP)) | st.from_regex(
    r"croft_[a-z][a-z0-9_]{0,9}", fullmatch=True
)
values = (
    st.floats()
    | st.integers(-(10**15), 10**15).map(float)
    | st.sampled_from([0.0, -0.0, 1e6, 1234567.0, 1e10, 12345678901.5, 1e22, 1.5e-7, math.inf])
)


@st.composite
def families(draw: st.DrawFn) -> tuple[Sample, ...]:
    """Runs of samples of one name, each run's samples with the same label names (as the domain's)."""
    out: list[Sample] = []
    for name in draw(st.lists(metric_names, max_size=5, unique=True)):
        keys = sorted(draw(st.sets(label_names, max_size=3)))
        for _ in range(draw(st.integers(1, 3))):
            labels = tuple((key, draw(st.text(max_size=10).map(label_text))) for key in keys)
            out.append(Sample(name, labels, draw(values)))
    return tuple(out)


@given(families())
def test_the_one_renderer_is_byte_equal_to_prometheus_client(samples: tuple[Sample, ...]) -> None:
    assert render_exposition(samples).encode("utf-8") == prometheus_client_body(samples)


def test_the_served_series_are_byte_equal_to_prometheus_client() -> None:
    for text in HOSTILE:
        samples = hostile_samples(cgroup=text, container_id=text, syscall=text or "x")
        assert body_of(samples).encode("utf-8") == prometheus_client_body(samples)


def hostile_samples(cgroup: str, container_id: str, syscall: str) -> tuple[Sample, ...]:
    """The series of one row whose cgroup, container id and syscall name are the given texts."""
    base = member_row(WATCHED, 1, {syscall: 12.5, "read": 1.0})
    hostile = Process(comm="x", exe="x", cgroup=cgroup, container_id=container_id or None, cwd="/")
    samples, _ = series(
        poll(2, (proc(1),)), [msgspec.structs.replace(base, process=hostile)], HEALTH, MetricsMemory()
    )
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
    page = metrics_page(collector)
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
            parsed = parse_exposition(exposition_body(page).decode())
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
