"""The poll loop's side of /metrics: what the publisher measures, counts and hands to scrapes."""

from __future__ import annotations

from croft.adapters.dataset.writer import WriterCounters
from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.app.metrics_publisher import MetricsPublisher
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import parse_exposition
from tests.helpers.rows import member_row
from tests.helpers.snapshots import WATCHED, poll, proc


class FakeMonotonic:
    """A monotonic clock that reads what the test set."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns


def counters(written: int) -> WriterCounters:
    return WriterCounters(written, 3, 0, 2, 1, 4, 1, 0, 0)


def scraped(collector: SnapshotCollector) -> dict[str, float]:
    samples = parse_exposition(exposition_body(metrics_page(collector)).decode())
    return {s.name: s.value for s in samples if not s.labels}


def test_live_duration_runs_from_the_polls_own_clock_reading() -> None:
    collector, clock = SnapshotCollector(), FakeMonotonic(0)
    publisher = MetricsPublisher(collector, lambda: counters(10), clock, live=True)
    current = poll(2, (proc(1),))  # read at monotonic 2 s
    clock.now_ns = 2_250_000_000
    publisher.observe(current, (member_row(WATCHED, 1, {"sendto": 4.0}),))
    health = scraped(collector)
    assert health[names.POLL_DURATION_SECONDS] == 0.25
    assert health[names.ROWS_WRITTEN_TOTAL] == 10.0
    assert health[names.ROWS_DROPPED_TOTAL] == 3.0
    assert health[names.COMPRESSION_BACKLOG_SEGMENTS] == 1.0
    assert health[names.COMPRESSION_FAILURES_TOTAL] == 4.0
    assert health[names.LAST_POLL_TIMESTAMP_SECONDS] == 1_700_000_002.0


def test_replay_duration_runs_from_the_previous_publish() -> None:
    collector, clock = SnapshotCollector(), FakeMonotonic(5_000_000_000)
    publisher = MetricsPublisher(collector, lambda: counters(1), clock, live=False)
    clock.now_ns = 5_100_000_000
    publisher.observe(poll(2, (proc(1),)), ())
    assert scraped(collector)[names.POLL_DURATION_SECONDS] == 0.1
    clock.now_ns = 5_130_000_000
    publisher.observe(poll(4, (proc(1),)), ())
    assert round(scraped(collector)[names.POLL_DURATION_SECONDS], 9) == 0.03
