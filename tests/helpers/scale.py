"""Observations for croft scale's decision, built the way a live poll would see them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import attrs
import msgspec

from croft.adapters.http.metrics import (
    CONTENT_TYPE,
    MetricsPage,
    SnapshotCollector,
    exposition_body,
    metrics_handler,
    metrics_page,
)
from croft.adapters.http.server import Handler, HttpServer, Response
from croft.domain.dataset.row import Process
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, render_exposition
from croft.domain.metrics.series import MetricsMemory, series
from croft.domain.scaling.decision import CollectorScrape, Observations, PodView
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, poll, proc

CALLS_PER_REQUEST = 2.06


def cid(index: int) -> str:
    """A 64-hex container id."""
    return f"{index:064x}"


def collector_body(now_ms: int, container_rates: dict[str, float], syscall: str = "sendto") -> str:
    """A collector's /metrics: its last poll at `now_ms`, each container's CPU and syscall rate."""
    samples = [Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), now_ms / 1000)]
    for container, rate in container_rates.items():
        samples.append(Sample(names.CONTAINER_CPU_CORES, ((names.LABEL_CONTAINER_ID, container),), 0.1))
        labels = ((names.LABEL_CONTAINER_ID, container), (names.LABEL_SYSCALL, syscall))
        samples.append(Sample(names.CONTAINER_SYSCALL_RATE, labels, rate))
        other = ((names.LABEL_CONTAINER_ID, container), (names.LABEL_SYSCALL, "read"))
        samples.append(Sample(names.CONTAINER_SYSCALL_RATE, other, rate * 3))
    return render_exposition(samples)


def steady_poll(now_ms: int, request_rate: float, pods: int = 2, collectors: int = 2) -> Observations:
    """`pods` pods sharing `request_rate` requests/s evenly, spread over `collectors` nodes."""
    per_pod = request_rate * CALLS_PER_REQUEST / pods
    by_collector: list[dict[str, float]] = [{} for _ in range(collectors)]
    pod_views = []
    for index in range(pods):
        by_collector[index % collectors][cid(index)] = per_pod
        pod_views.append(PodView(f"web-{index}", (cid(index),)))
    scrapes = tuple(
        CollectorScrape(f"croft-{n}", now_ms, collector_body(now_ms, rates))
        for n, rates in enumerate(by_collector)
    )
    return Observations(now_ms, tuple(pod_views), scrapes)


def with_gap(observations: Observations, kind: str) -> Observations:
    """The same poll with one kind of gap: a collector down, a pod without series, a stale collector,
    a garbled body."""
    first, *rest = observations.scrapes
    now = observations.now_ms
    if kind == "down":
        broken = CollectorScrape(first.collector, now, None, "connection refused")
    elif kind == "stale":
        old = now - 10_000
        body = (first.body or "").replace(
            f"{names.LAST_POLL_TIMESTAMP_SECONDS} {now / 1000!r}",
            f"{names.LAST_POLL_TIMESTAMP_SECONDS} {old / 1000!r}",
        )
        broken = CollectorScrape(first.collector, now, body)
    elif kind == "garbled":  # a series the decision reads (the Deployment's container), cut short
        pod = observations.pods[0].container_ids[0]
        garbage = f'{names.CONTAINER_SYSCALL_RATE}{{container_id="{pod}",syscall="sendto" 2\n'
        broken = CollectorScrape(first.collector, now, (first.body or "") + garbage)
    elif kind == "no-series":
        extra = PodView("web-new", (cid(999),))
        return Observations(now, (*observations.pods, extra), observations.scrapes)
    elif kind in ("nan", "inf", "negative"):
        value = {"nan": "NaN", "inf": "+Inf", "negative": "-12.5"}[kind]
        pod = observations.pods[0].container_ids[0]
        body = "\n".join(
            line.rsplit(" ", 1)[0] + f" {value}" if f'container_id="{pod}",syscall="sendto"' in line else line
            for line in (first.body or "").split("\n")
        )
        broken = CollectorScrape(first.collector, now, body)
    elif kind == "hidden":  # the syscall fell outside the container's exported top 24
        pod = observations.pods[0].container_ids[0]
        body = "\n".join(
            line.replace('syscall="sendto"', 'syscall="other"') if f'container_id="{pod}"' in line else line
            for line in (first.body or "").split("\n")
        )
        broken = CollectorScrape(first.collector, now, body)
    else:
        raise ValueError(kind)
    return Observations(now, observations.pods, (broken, *rest))


GAP_KINDS = ("down", "stale", "garbled", "no-series", "nan", "inf", "negative", "hidden")


Group = tuple[str, str, Mapping[str, float]]
"""(cgroup path, container id, syscall rates) of one container a collector watches."""
SERVED_AT_MS = 1_700_000_002_000
"""When `served_samples`' poll happened, by default (unix ms)."""


def served_samples(groups: Sequence[Group], at_ms: int = SERVED_AT_MS) -> tuple[Sample, ...]:
    """What a collector publishes after one poll at `at_ms` of `groups`: the series of
    croft.domain.metrics.series (every family it serves: CPU, memory, pressure, counters, info, the
    syscall rates with `other`), not only those croft scale reads."""
    rows = []
    for tgid, (cgroup, container_id, syscalls) in enumerate(groups, start=1):
        process = Process(comm="x", exe="x", cgroup=cgroup, container_id=container_id or None, cwd="/")
        rows.append(msgspec.structs.replace(member_row(WATCHED, tgid, dict(syscalls)), process=process))
    at = poll(2, (proc(1),))
    at = attrs.evolve(at, at=attrs.evolve(at.at, unix_ms=at_ms))
    samples, _ = series(at, rows, HEALTH, MetricsMemory())
    return samples


def old_collector_handler(page: MetricsPage) -> Handler:
    """/metrics as croft's collector answered it before the query: the whole page, whatever is asked."""
    return lambda _: Response(200, CONTENT_TYPE, exposition_body(page))


@contextmanager
def collector(samples: tuple[Sample, ...], *, old: bool = False) -> Iterator[tuple[str, SnapshotCollector]]:
    """croft's HTTP server on 127.0.0.1 serving /metrics of `samples` (and the collector's own registry)
    as `croft run --metrics-addr` does, or, `old`, as a collector that ignores the query: its base URL
    and the collector to publish later polls to."""
    published = SnapshotCollector()
    published.publish(samples)
    page = metrics_page(published, version="0.0-test")
    server = HttpServer("127.0.0.1", 0)
    server.route("/metrics", old_collector_handler(page) if old else metrics_handler(page))
    server.start()
    try:
        yield f"http://127.0.0.1:{server.address[1]}", published
    finally:
        server.close()
