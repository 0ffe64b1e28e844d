"""/metrics: croft's series of the newest poll, then prometheus_client's own metrics.

The poll loop calls `SnapshotCollector.publish(samples)` once per poll with an immutable tuple (one
reference assignment, atomic under the GIL); a scrape reads whatever reference is there when it
starts and renders it. Neither side takes a lock, so a slow or stuck scrape never holds the poll
loop back, and a scrape never sees half of a poll.

The series are rendered by the one renderer, `croft.domain.metrics.exposition.render_exposition`
(what croft.sim and croft scale's tests read too), byte-equal to what prometheus_client's
`generate_latest` wrote for them before (proven in tests/unit/test_metrics_export.py). After them
comes a registry of croft's own (`metrics_page`), not the global REGISTRY: `croft_build_info{version}`,
the `process_*` self-metrics of prometheus_client's process collector (CPU, memory, open files of the
collector process itself) and the histogram of poll durations, `croft_poll_seconds`.

`GET /metrics?name[]=<series>&<label>=<value>` answers only the series the query asks for
(croft.domain.metrics.query: `name[]` as prometheus_client's own server reads it, and label values);
croft scale asks so, and parses a few lines instead of every series of the node. The poll's series
are picked by `select` before they are rendered, the registry's metrics sample by sample as it
collects them; both are then written by the same renderers as the whole page. Without a query, the
whole page, as Prometheus scrapes it. A query that is not `key=value` fields of series names and
label names is answered 400 with one sentence saying what is wrong.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator

import attrs
from prometheus_client import (
    CollectorRegistry,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from croft.adapters.http.server import Request, Response
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, render_exposition, render_openmetrics
from croft.domain.metrics.query import EVERY, BadQuery, SeriesQuery, parse_query, select

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text exposition format, version 0.0.4 (what `generate_latest` writes with its default
escaping, and what `croft.domain.metrics.exposition` and every Prometheus since 2.0 parse)."""
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
"""OpenMetrics 1.0.0, for a scraper whose Accept header names `application/openmetrics-text` (as
Prometheus' does by default)."""
GZIP_MIN_BYTES = 1024  # a smaller body is sent as it is: compressing it saves next to nothing

# A counter's `_created` series (the time it was created) is left out in both formats: in the text
# format prometheus_client writes it as a gauge of its own (`croft_poll_seconds_created`), which
# node_exporter and cAdvisor do not serve.
disable_created_metrics()  # type: ignore[no-untyped-call]


class SnapshotCollector:
    """The samples of the newest poll (none before the first)."""

    def __init__(self, monotonic_ns: Callable[[], int] | None = None) -> None:
        self.samples: tuple[Sample, ...] = ()
        self._monotonic_ns = monotonic_ns
        self._poll_seconds: Histogram | None = None
        self.last_publish_ns: int | None = None
        """When `publish` was last called (monotonic ns; None before the first, or without a clock)."""
        self.live_file_lost_ns: int | None = None
        """When the dataset writer last found its live file renamed or deleted (monotonic ns)."""

    def publish(self, samples: tuple[Sample, ...], poll_duration_s: float | None = None) -> None:
        """Replace what scrapes see with `samples` (labels sorted, families contiguous); count
        `poll_duration_s` in the poll-duration histogram once it is registered."""
        self.samples = samples
        if poll_duration_s is not None and self._poll_seconds is not None:
            self._poll_seconds.observe(poll_duration_s)
        if self._monotonic_ns is not None:
            self.last_publish_ns = self._monotonic_ns()

    def count_polls_in(self, histogram: Histogram) -> None:
        """Observe every later poll's duration in `histogram`."""
        self._poll_seconds = histogram


@attrs.frozen
class MetricsPage:
    """What /metrics serves: `collector`'s series, then `registry`'s metrics."""

    collector: SnapshotCollector
    registry: CollectorRegistry


POLL_SECONDS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""Poll durations: a poll every 2 s should take well under 1 s; 2 s and more skips ticks."""


def metrics_page(collector: SnapshotCollector, version: str | None = None) -> MetricsPage:
    """`collector`'s series and, with `version`, a registry of its own holding the build info, the
    collector process's own `process_*` metrics and the poll-duration histogram."""
    registry = CollectorRegistry()
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
    return MetricsPage(collector, registry)


def exposition_body(page: MetricsPage, query: SeriesQuery = EVERY, openmetrics: bool = False) -> bytes:
    """The page as text exposition (UTF-8), or with `openmetrics` as OpenMetrics: the newest
    poll's series, then the registry's; with a query, only the series it asks for."""
    samples = page.collector.samples if query.everything else select(page.collector.samples, query)
    registry = page.registry if query.everything else _SelectedRegistry(page.registry, query)
    if not openmetrics:
        return render_exposition(samples).encode("utf-8") + generate_latest(registry)
    theirs: bytes = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
    theirs = theirs.removesuffix(b"# EOF\n")
    return render_openmetrics(samples).encode("utf-8") + theirs + b"# EOF\n"


def _accepts(request: Request, header: str, value: str) -> bool:
    """Whether `request`'s `header` (Accept, Accept-Encoding) names `value` with a weight above 0."""
    for key, text in request.headers:
        if key.lower() != header:
            continue
        for item in text.split(","):
            kind, *parameters = (part.strip() for part in item.split(";"))
            if kind.lower() == value and not any(p.replace(" ", "") in ("q=0", "q=0.0") for p in parameters):
                return True
    return False


@attrs.frozen
class _SelectedRegistry:
    """`registry`'s metrics as `generate_latest` reads them (`collect()`), with only the samples
    `query` keeps; a metric left without samples is left out, as prometheus_client's own
    `restricted_registry` does for `name[]`."""

    registry: CollectorRegistry
    query: SeriesQuery

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            samples = [s for s in metric.samples if self.query.keeps(s.name, s.labels.items())]
            if samples:
                kept = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                kept.samples = samples
                yield kept


def metrics_handler(page: MetricsPage) -> Callable[[Request], Response]:
    """The /metrics route: the page, or what the request's query asks for of it (400 with one
    sentence for a query that is not `name[]=<series>&<label>=<value>` fields); as OpenMetrics
    where the Accept header asks for it, gzip-compressed where Accept-Encoding allows it (as the Go
    client's handler answers, for a body of at least `GZIP_MIN_BYTES`)."""

    def handler(request: Request) -> Response:
        try:
            query = parse_query(request.query)
        except BadQuery as exc:
            return Response(400, "text/plain; charset=utf-8", f"{exc}\n".encode())
        openmetrics = _accepts(request, "accept", "application/openmetrics-text")
        body = exposition_body(page, query, openmetrics)
        kind = OPENMETRICS_TYPE if openmetrics else CONTENT_TYPE
        if len(body) >= GZIP_MIN_BYTES and _accepts(request, "accept-encoding", "gzip"):
            return Response(200, kind, gzip.compress(body, 6), headers=(("Content-Encoding", "gzip"),))
        return Response(200, kind, body)

    return handler
