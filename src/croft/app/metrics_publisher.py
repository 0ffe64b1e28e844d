"""The poll loop's side of /metrics: after every poll, its series go where scrapes read them.

The loop does the work (the domain's `series` of the poll, the writer's counters) and publishes one
immutable tuple; a scrape only turns the newest tuple into text, so it never holds the loop back.
"""

from __future__ import annotations

from collections.abc import Callable

from croft.adapters.dataset.writer import WriterCounters
from croft.adapters.http.metrics import SnapshotCollector
from croft.domain.collector.rates import NS_PER_S
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset.row import Row
from croft.domain.metrics.series import Health, MetricsMemory, series


class MetricsPublisher:
    """A `PollObserver` publishing each poll's series to `collector`.

    `poll_duration_seconds` is, live, the time from the poll's own clock reading (taken just before
    the sources are read) to its rows being written; in a replay (`live=False`), whose poll times are
    recorded ones, the time since the previous poll was published (reading the trace, the core,
    the write). `ebpf_mode`: the eBPF loader of a live collector (core, bcc or off);
    `syscall_names`: `--metrics-syscalls` (None: every syscall)."""

    def __init__(
        self,
        collector: SnapshotCollector,
        counters: Callable[[], WriterCounters],
        monotonic_ns: Callable[[], int],
        live: bool,
        ebpf_mode: str | None = None,
        syscall_names: frozenset[str] | None = None,
    ) -> None:
        self._collector = collector
        self._counters = counters
        self._monotonic_ns = monotonic_ns
        self._live = live
        self._memory = MetricsMemory()
        self._last_ns = monotonic_ns()
        self._ebpf_mode = ebpf_mode
        self._syscall_names = syscall_names

    def observe(self, poll: Poll, rows: tuple[Row, ...]) -> None:
        now_ns = self._monotonic_ns()
        started_ns = poll.at.monotonic_ns if self._live else self._last_ns
        self._last_ns = now_ns
        counters = self._counters()
        health = Health(
            poll_duration_s=max(now_ns - started_ns, 0) / NS_PER_S,
            rows_written_total=counters.rows_written,
            rows_dropped_total=counters.rows_dropped,
            compression_backlog_segments=counters.compression_backlog,
            compression_failures_total=counters.compression_failures,
            live_files_lost_total=counters.live_files_lost,
            ebpf_mode=self._ebpf_mode,
        )
        self._collector.live_file_lost_ns = counters.live_file_lost_ns
        samples, self._memory = series(poll, rows, health, self._memory, self._syscall_names)
        self._collector.publish(samples, health.poll_duration_s)
