"""/metrics with prometheus_client: a custom Collector that yields the newest published samples.

The poll loop calls `SnapshotCollector.publish(samples)` once per poll with an immutable tuple (one
reference assignment, atomic under the GIL); a scrape reads whatever reference is there when it
starts and builds the metric families from it. Neither side takes a lock, so a slow or stuck scrape
never holds the poll loop back, and a scrape never sees half of a poll.

The registry is the collector's own (`metrics_registry`), not the global REGISTRY: it holds the
poll's series, `croft_build_info{version}`, the `process_*` self-metrics of prometheus_client's
process collector (CPU, memory, open files of the collector process itself) and the histogram of
poll durations, `croft_poll_seconds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Histogram, Info, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text exposition format, version 0.0.4 (what `generate_latest` writes with its default
escaping, and what `croft.domain.metrics.exposition` and every Prometheus since 2.0 parse)."""


class SnapshotCollector:
    """A prometheus_client Collector over the samples of the newest poll (none before the first)."""

    def __init__(self, monotonic_ns: Callable[[], int] | None = None) -> None:
        self._samples: tuple[Sample, ...] = ()
        self._monotonic_ns = monotonic_ns
        self._poll_seconds: Histogram | None = None
        self.last_publish_ns: int | None = None
        """When `publish` was last called (monotonic ns; None before the first, or without a clock)."""

    def publish(self, samples: tuple[Sample, ...], poll_duration_s: float | None = None) -> None:
        """Replace what scrapes see with `samples` (labels sorted, families contiguous); count
        `poll_duration_s` in the poll-duration histogram once it is registered."""
        self._samples = samples
        if poll_duration_s is not None and self._poll_seconds is not None:
            self._poll_seconds.observe(poll_duration_s)
        if self._monotonic_ns is not None:
            self.last_publish_ns = self._monotonic_ns()

    def count_polls_in(self, histogram: Histogram) -> None:
        """Observe every later poll's duration in `histogram`."""
        self._poll_seconds = histogram

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families change with the polls, so the registry must not call `collect`
        when the collector is registered."""
        return ()

    def collect(self) -> Iterator[Metric]:
        """One metric family per name, in the order of the published samples; a family's label
        names are those of its first sample (the domain gives every sample of a name the same)."""
        family: GaugeMetricFamily | CounterMetricFamily | None = None
        family_name = ""
        for sample in self._samples:
            if family is None or sample.name != family_name:
                if family is not None:
                    yield family
                family, family_name = _family(sample), sample.name
            family.add_metric([value for _, value in sample.labels], sample.value)
        if family is not None:
            yield family


def _family(first: Sample) -> GaugeMetricFamily | CounterMetricFamily:
    help_text = names.HELP.get(first.name, first.name)
    labels = [key for key, _ in first.labels]
    if first.name.endswith("_total"):
        # prometheus_client writes counter `x` as `x_total`.
        return CounterMetricFamily(first.name.removesuffix("_total"), help_text, labels=labels)
    return GaugeMetricFamily(first.name, help_text, labels=labels)


POLL_SECONDS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""Poll durations: a poll every 2 s should take well under 1 s; 2 s and more skips ticks."""


def metrics_registry(collector: SnapshotCollector, version: str | None = None) -> CollectorRegistry:
    """A registry of its own: `collector`'s series, and with `version` the build info, the
    collector process's own `process_*` metrics and the poll-duration histogram."""
    registry = CollectorRegistry()
    registry.register(collector)
    if version is not None:
        build = Info(names.BUILD, "The croft version serving these metrics.", registry=registry)
        build.info({"version": version})
        ProcessCollector(registry=registry)
        histogram = Histogram(
            names.POLL_SECONDS,
            names.HELP[names.POLL_SECONDS],
            buckets=POLL_SECONDS_BUCKETS,
            registry=registry,
        )
        collector.count_polls_in(histogram)
    return registry


def exposition_body(registry: CollectorRegistry) -> bytes:
    """The registry's samples as text exposition (UTF-8), label values escaped by prometheus_client."""
    return generate_latest(registry)
