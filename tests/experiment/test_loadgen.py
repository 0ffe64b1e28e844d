"""The open-loop load generator against real servers on loopback: the webapp, and one that stalls.

Open loop means the schedule never waits for answers: while the server stalls, requests keep
leaving on time (achieved RPS stays on target) and the stall shows in their latency.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

import loadgen
import profiles
from croft.runs.rundir import WORKLOAD_COLUMNS, read_workload
from tests.helpers.net import free_port
from tests.helpers.webapp import running_webapp

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def webapp() -> Iterator[str]:
    with running_webapp(cpu_ms=2) as (url, _):
        yield url


class StallingServer:
    """Answers at once, except that every request arriving in [stall_from_s, stall_to_s) after the
    first request is held until `stall_to_s`; path /fail answers 500, /hang never answers."""

    def __init__(self, stall_from_s: float, stall_to_s: float) -> None:
        self.stall = (stall_from_s, stall_to_s)
        self.t0: float | None = None
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path == "/hang":
                    time.sleep(5)
                    return
                now = time.monotonic()
                if outer.t0 is None:
                    outer.t0 = now
                elapsed = now - outer.t0
                if outer.stall[0] <= elapsed < outer.stall[1]:
                    time.sleep(outer.stall[1] - elapsed)
                status = 500 if self.path == "/fail" else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def assert_on_schedule(rows) -> None:
    """Every request left, each in its own second give or take a late wake-up at a second's edge
    (2 cores shared with everything else)."""
    assert sum(r.achieved_rps for r in rows) == sum(r.target_rps for r in rows)
    assert all(abs(r.achieved_rps - r.target_rps) <= 2 for r in rows), [r.achieved_rps for r in rows]


def test_achieved_follows_target_against_the_webapp(webapp, tmp_path):
    profile = profiles.constant(duration_s=3, rps=40)
    result = loadgen.run_open_loop(
        profile, loadgen.Target(webapp, ("/work",)), tmp_path / "w.csv", quiet=True
    )
    assert [(r.target_rps, r.ok) for r in result.rows] == [(40, 40)] * 3
    assert_on_schedule(result.rows)
    assert all(r.failures == 0 and r.timeouts == 0 for r in result.rows)
    assert all(r.p50_ms is not None and r.p50_ms >= 2.0 for r in result.rows)  # the 2 ms of CPU at least
    header = (tmp_path / "w.csv").read_text().splitlines()[0]
    assert header == ",".join(WORKLOAD_COLUMNS)
    assert read_workload(tmp_path / "w.csv") == list(result.rows)


def test_a_stalling_server_gets_its_requests_on_time_and_shows_the_stall_in_latency():
    server = StallingServer(stall_from_s=1.0, stall_to_s=2.5)
    server.start()
    try:
        profile = profiles.constant(duration_s=4, rps=20)
        rows = loadgen.run_open_loop(profile, loadgen.Target(server.url, ("/",)), quiet=True).rows
    finally:
        server.close()
    assert [r.target_rps for r in rows] == [20] * 4
    assert_on_schedule(rows)  # the schedule did not wait for the stall
    assert all(r.ok == 20 for r in rows)
    assert rows[0].p95_ms is not None and rows[0].p95_ms < 300
    # Second 1 sent into the stall: its first request waited ~1.5 s, its p95 well over 1 s.
    assert rows[1].p99_ms is not None and rows[1].p99_ms > 1000
    assert rows[1].p95_ms is not None and rows[1].p95_ms > 700
    assert rows[3].p95_ms is not None and rows[3].p95_ms < 300  # after the stall


def test_failures_and_timeouts_are_counted_apart():
    server = StallingServer(stall_from_s=100, stall_to_s=100)
    server.start()
    try:
        target = loadgen.Target(server.url, ("/", "/fail", "/hang"), timeout_s=1.0)
        rows = loadgen.run_open_loop(profiles.constant(duration_s=2, rps=6), target, quiet=True).rows
    finally:
        server.close()
    assert [(r.ok, r.failures, r.timeouts) for r in rows] == [(2, 2, 2)] * 2
    # A timed-out request counts at the timeout (a lower bound), so p99 is at least the timeout.
    assert all(r.p99_ms is not None and r.p99_ms >= 1000 for r in rows)


def test_a_refused_connection_is_a_failure():
    port = free_port()  # nothing listens there
    rows = loadgen.run_open_loop(
        profiles.constant(duration_s=1, rps=5), loadgen.Target(f"http://127.0.0.1:{port}"), quiet=True
    ).rows
    assert [(r.achieved_rps, r.ok, r.failures) for r in rows] == [(5, 0, 5)]


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_waiting_for_a_target_returns_once_it_answers_and_not_before():
    # Nothing listens for the first second, as a Service whose rules kube-proxy has not written
    # yet refuses every connection; then a server answers 404, which is an answer too.
    port = free_port()
    servers: list[http.server.ThreadingHTTPServer] = []

    def listen_later() -> None:
        time.sleep(1.0)
        servers.append(http.server.ThreadingHTTPServer(("127.0.0.1", port), Hello))
        servers[0].serve_forever()

    threading.Thread(target=listen_later, daemon=True).start()
    try:
        waited = loadgen.wait_answering(loadgen.Target(f"http://127.0.0.1:{port}"), 30, every_s=0.1)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert 0.9 <= waited < 10


def test_any_http_status_is_an_answer():
    server = StallingServer(stall_from_s=100, stall_to_s=100)
    server.start()
    try:
        waited = loadgen.wait_answering(loadgen.Target(server.url, ("/fail",)), 5)
    finally:
        server.close()
    assert waited < 5


def test_a_target_that_never_answers_is_named_with_the_last_error():
    port = free_port()
    start = time.monotonic()
    with pytest.raises(loadgen.NotAnswering) as caught:
        loadgen.wait_answering(loadgen.Target(f"http://127.0.0.1:{port}", ("/work",)), 1.5, every_s=0.2)
    assert 1.2 <= time.monotonic() - start < 10
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}/work gave no HTTP answer within 2 s" in message
    assert "ConnectError" in message and "\n" not in message
