"""/healthz and the landing page: the pure staleness rule, and both pages served by the real HTTP
server with a hand-driven monotonic clock."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.adapters.http.pages import healthz, landing_page, livez
from croft.adapters.http.server import HttpServer
from croft.domain.metrics.health import LIVE_STALE_AFTER_NS, STALE_AFTER_NS, health, liveness

S = 1_000_000_000


def test_no_poll_yet_is_503_and_says_starting() -> None:
    answer = health(None, 5 * S)
    assert (answer.status, answer.text) == (503, "no poll yet: the collector is starting")


def test_current_then_stale() -> None:
    assert health(100 * S, 102 * S) == health(100 * S, 102 * S)
    assert health(100 * S, 102 * S).status == 200
    assert health(100 * S, 102 * S).text == "ok: last poll 2.0 s ago"
    assert health(100 * S, 100 * S + STALE_AFTER_NS - 1).status == 200
    stale = health(100 * S, 100 * S + STALE_AFTER_NS)
    assert (stale.status, stale.text) == (503, "stale: last poll 10.0 s ago, more than 10 s")


@given(st.integers(0, 10**12), st.integers(0, 10**12))
def test_200_exactly_while_younger_than_the_limit(last: int, elapsed: int) -> None:
    assert (health(last, last + elapsed).status == 200) == (elapsed < STALE_AFTER_NS)


def test_alive_while_polls_come_or_the_first_load_is_young_and_not_once_they_stop() -> None:
    start = 1_000 * S
    assert liveness(start, None, start + 5 * S).status == 200  # a first load
    assert liveness(start, None, start + LIVE_STALE_AFTER_NS).status == 503  # never a poll
    assert liveness(start, start + 60 * S, start + 60 * S + LIVE_STALE_AFTER_NS - 1).status == 200
    stopped = liveness(start, start + 60 * S, start + 60 * S + LIVE_STALE_AFTER_NS)
    assert (stopped.status, stopped.text) == (503, "stopped: last poll 120 s ago, more than 120 s")
    # stale for readiness long before it is stopped for liveness
    assert (
        health(start, start + 30 * S).status == 503 and liveness(start, start, start + 30 * S).status == 200
    )


@given(st.integers(0, 10**12), st.integers(0, 10**12))
def test_alive_exactly_while_the_newest_poll_is_younger_than_the_liveness_limit(
    last: int, elapsed: int
) -> None:
    assert (liveness(0, last, last + elapsed).status == 200) == (elapsed < LIVE_STALE_AFTER_NS)


class HandClock:
    def __init__(self) -> None:
        self.ns = 1_000 * S

    def __call__(self) -> int:
        return self.ns


@pytest.fixture
def served() -> Iterator[tuple[str, SnapshotCollector, HandClock]]:
    clock = HandClock()
    collector = SnapshotCollector(clock)
    page = metrics_page(collector, "9.9.9")
    server = HttpServer.bind("127.0.0.1:0")
    server.route("/healthz", healthz(lambda: collector.last_publish_ns, clock))
    server.route("/livez", livez(lambda: collector.last_publish_ns, clock))
    server.route("/", landing_page("9.9.9", (("/metrics", "Prometheus metrics"), ("/healthz", "health"))))
    server.start()
    host, port = server.address
    try:
        yield f"http://{host}:{port}", collector, clock
        assert "croft_build_info" in exposition_body(page).decode()
    finally:
        server.close()


def test_healthz_follows_the_published_polls(served: tuple[str, SnapshotCollector, HandClock]) -> None:
    base, collector, clock = served
    first = httpx.get(base + "/healthz")
    assert (first.status_code, first.text) == (503, "no poll yet: the collector is starting\n")
    collector.publish((), 0.05)
    clock.ns += 3 * S
    assert (httpx.get(base + "/healthz").status_code, httpx.get(base + "/healthz").text) == (
        200,
        "ok: last poll 3.0 s ago\n",
    )
    clock.ns += 30 * S  # the poll loop stopped publishing
    stale = httpx.get(base + "/healthz")
    assert stale.status_code == 503 and stale.text.startswith("stale: last poll 33.0 s ago")
    collector.publish((), 0.05)
    assert httpx.get(base + "/healthz").status_code == 200


def test_the_landing_page_links_the_routes_and_only_at_root(
    served: tuple[str, SnapshotCollector, HandClock],
) -> None:
    base, _, _ = served
    page = httpx.get(base + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<a href="/metrics">/metrics</a>' in page.text and "version 9.9.9" in page.text
    assert httpx.get(base + "/nothing-here").status_code == 404


def test_build_info_process_metrics_and_the_poll_histogram() -> None:
    collector = SnapshotCollector()
    page = metrics_page(collector, "1.2.3")
    for seconds in (0.02, 0.3, 3.0):
        collector.publish((), seconds)
    text = exposition_body(page).decode()
    assert 'croft_build_info{version="1.2.3"} 1.0' in text
    assert "process_resident_memory_bytes " in text and "process_cpu_seconds_total " in text
    assert 'croft_poll_seconds_bucket{le="0.025"} 1.0' in text
    assert 'croft_poll_seconds_bucket{le="0.5"} 2.0' in text
    assert 'croft_poll_seconds_bucket{le="+Inf"} 3.0' in text
    assert "croft_poll_seconds_count 3.0" in text


def test_a_lost_live_file_is_503_for_the_hold_then_polls_decide_again() -> None:
    from croft.domain.metrics.health import LOST_LIVE_FILE_HOLD_NS

    lost = 500 * S
    during = health(lost, lost + 2 * S, live_file_lost_ns=lost)
    assert during.status == 503
    assert during.text.startswith("the live file was renamed or deleted under the collector 2 s ago")
    assert health(lost, lost + LOST_LIVE_FILE_HOLD_NS - 1, live_file_lost_ns=lost).status == 503
    last = lost + LOST_LIVE_FILE_HOLD_NS - S
    assert health(last, lost + LOST_LIVE_FILE_HOLD_NS, live_file_lost_ns=lost).status == 200


def test_livez_is_served_and_fails_once_the_polls_stop(
    served: tuple[str, SnapshotCollector, HandClock],
) -> None:
    base, collector, clock = served
    assert httpx.get(f"{base}/livez").status_code == 200  # starting
    collector.publish(())
    clock.ns += 30 * S
    assert httpx.get(f"{base}/healthz").status_code == 503 and httpx.get(f"{base}/livez").status_code == 200
    clock.ns += LIVE_STALE_AFTER_NS
    answer = httpx.get(f"{base}/livez")
    assert answer.status_code == 503 and answer.text.startswith("stopped: last poll")
