"""The collector's shell: feed each poll through the core, name its pods' rows and write them.

Live: a poll every `interval_ns` on a monotonic schedule (`start + k * interval`, so a slow poll
skips a tick instead of shifting every later one); SIGTERM, SIGINT or SIGHUP (a closed terminal,
or a supervisor's reload: the collector has nothing to reload) end the loop after the poll in
progress is written, and the sink is closed. Replay: every recorded poll, as fast as it reads.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterable
from types import FrameType
from typing import Protocol

from croft.adapters.host.clock import Clock
from croft.domain.collector import rows as collect
from croft.domain.collector.pods import PodDirectory, named
from croft.domain.collector.silence import silence_warning, start_notice
from croft.domain.collector.snapshot import Instant, Poll
from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.row import Row
from croft.domain.schedule import next_deadline

log = logging.getLogger("croft.run")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that end the collector after its poll in progress is written."""

INTERVAL_NS = 2_000_000_000
REPORT_EVERY_POLLS = 30


class RowSink(Protocol):
    """Where rows go: the plain file or the rotating dataset writer. `append` returns how many of
    the rows reached the file (0 when the poll's rows were dropped: disk full, I/O error)."""

    def append(self, lines: bytes, now_ms: int, monotonic_ns: int | None = None) -> int: ...

    def close(self) -> None: ...


class Recorder(Protocol):
    def record(self, poll: Poll) -> None: ...

    def close(self) -> None: ...


class PollObserver(Protocol):
    """Told of every poll once its rows are written (croft run's /metrics)."""

    def observe(self, poll: Poll, rows: tuple[Row, ...]) -> None: ...


class Source(Protocol):
    def poll(self, at: Instant) -> Poll: ...


class PodNames(Protocol):
    """The Kubernetes names of the node's containers, as last read (`croft.adapters.kube.pod_watch`)."""

    def directory(self) -> PodDirectory: ...

    def close(self) -> None: ...


class Pipeline:
    """Core plus sink: remembers the previous poll and the collector state between polls."""

    def __init__(
        self,
        config: collect.CollectorConfig,
        sink: RowSink,
        recorder: Recorder | None = None,
        observer: PollObserver | None = None,
        pods: PodNames | None = None,
    ) -> None:
        self._config = config
        self._sink = sink
        self._recorder = recorder
        self._observer = observer
        self._pods = pods
        self._previous: Poll | None = None
        self.state = collect.CollectorState()
        self.rows_on_disk = 0  # rows the sink says reached the file
        self.rows_not_written = 0  # rows made but dropped by the sink
        self._reported = (0, 0, 0, 0)
        self._polls_without_rows = 0
        if notice := start_notice(config.watch):
            log.warning("%s", notice)

    def feed(self, poll: Poll) -> int:
        """Record `poll`, write its rows; returns how many rows were written."""
        if self._recorder is not None:
            self._recorder.record(poll)
        rows, self.state = collect.rows(self._previous, poll, self.state, self._config)
        if self._pods is not None:
            rows = named(rows, self._pods.directory())
        self._polls_without_rows = 0 if rows else self._polls_without_rows + 1
        if warning := silence_warning(self._polls_without_rows, self._config.watch):
            log.warning("%s", warning)
        lines = b"".join(encode_row(row) for row in rows)
        kept = self._sink.append(lines, poll.at.unix_ms, poll.at.monotonic_ns)
        self.rows_on_disk += kept
        self.rows_not_written += len(rows) - kept
        self._previous = poll
        if self._observer is not None:
            self._observer.observe(poll, rows)
        log.debug("poll %d: %d processes read, %d rows", self.state.polls, len(poll.processes), len(rows))
        if self.state.polls % REPORT_EVERY_POLLS == 0:
            self._report()
        return kept

    def restart(self) -> None:
        """Forget the previous poll (a new trace file starts a new run)."""
        self._previous = None

    def close(self) -> None:
        """Close the sink, then say what reached the disk and what was dropped, in the final count."""
        self._sink.close()
        self._report(final=True)
        if self._recorder is not None:
            self._recorder.close()
        if self._pods is not None:
            self._pods.close()

    def _report(self, final: bool = False) -> None:
        now = (self.state.dropped, self.state.no_rate, self.state.short_lived_unplaced, self.rows_not_written)
        if now != self._reported or final:
            log.info(
                "%s %d rows written, %d rows dropped (not written: disk full or I/O error); skipped %d "
                "pids that exited or were torn mid-read, %d process-polls without a rate yet (first "
                "sighting, reused pid, counter reset), %d syscalls of short-lived processes in "
                "containers with no rated process to carry them",
                "in all:" if final else "so far",
                self.rows_on_disk,
                self.rows_not_written,
                self.state.dropped,
                self.state.no_rate,
                self.state.short_lived_unplaced,
            )
            self._reported = now


def run_live(pipeline: Pipeline, source: Source, clock: Clock, interval_ns: int = INTERVAL_NS) -> int:
    """Poll until SIGTERM, SIGINT or SIGHUP; the poll in progress is written before the sink
    closes. Exit 0."""
    stopping = False

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        clock.wake()
        log.info("got %s: writing the last poll and stopping", signal.Signals(signum).name)

    previous_handlers = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        start_ns = clock.now().monotonic_ns
        while True:
            pipeline.feed(source.poll(clock.now()))
            if stopping:
                break
            deadline = next_deadline(start_ns, interval_ns, clock.now().monotonic_ns)
            if not clock.sleep_until(deadline):
                break
    finally:
        pipeline.close()
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
    return 0


def linger(seconds: float, clock: Clock) -> None:
    """Wait `seconds` or until SIGTERM, SIGINT or SIGHUP (after a replay, so /metrics can still be
    scraped)."""

    def stop(signum: int, _: FrameType | None) -> None:
        clock.wake()
        log.info("got %s: stopping", signal.Signals(signum).name)

    previous_handlers = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        clock.sleep_until(clock.now().monotonic_ns + int(seconds * 1e9))
    finally:
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)


def run_replay(pipeline: Pipeline, runs: Iterable[Iterable[Poll]]) -> int:
    """Feed every poll of every recorded run; each run starts without a previous poll. Exit 0."""
    try:
        for polls in runs:
            pipeline.restart()
            for poll in polls:
                pipeline.feed(poll)
    finally:
        pipeline.close()
    return 0
