"""/metrics with prometheus_client: a custom Collector that yields the newest published samples.

The poll loop calls `SnapshotCollector.publish(samples)` once per poll with an immutable tuple (one
reference assignment, atomic under the GIL); a scrape reads whatever reference is there when it
starts and builds the metric families from it. Neither side takes a lock, so a slow or stuck scrape
never holds the poll loop back, and a scrape never sees half of a poll.

The registry is the collector's own (`metrics_registry`): no global REGISTRY, no process or platform
collectors (the collector's own health series say what matters; a node exporter covers the rest).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text exposition format, version 0.0.4 (what `generate_latest` writes with its default
escaping, and what `croft.domain.metrics.exposition` and every Prometheus since 2.0 parse)."""


class SnapshotCollector:
    """A prometheus_client Collector over the samples of the newest poll (none before the first)."""

    def __init__(self) -> None:
        self._samples: tuple[Sample, ...] = ()

    def publish(self, samples: tuple[Sample, ...]) -> None:
        """Replace what scrapes see with `samples` (labels sorted, families contiguous)."""
        self._samples = samples

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


def metrics_registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A registry of its own holding only `collector`."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def exposition_body(registry: CollectorRegistry) -> bytes:
    """The registry's samples as text exposition (UTF-8), label values escaped by prometheus_client."""
    return generate_latest(registry)
