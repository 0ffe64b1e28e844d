"""The poll loop's side of /metrics: after every poll, its series go where scrapes read them.

The loop does the work (the domain's `series` of the poll, the writer's counters) and publishes one
immutable tuple; a scrape only turns the newest tuple into text, so it never holds the loop back.
"""

from __future__ import annotations

from collections.abc import Callable

from croft.adapters.dataset.writer import WriterCounters
from croft.adapters.host.pods import PodNames
from croft.adapters.http.metrics import SnapshotCollector
from croft.domain.collector.rates import NS_PER_S
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset.row import Row
from croft.domain.metrics.counters import pod_uid
from croft.domain.metrics.series import Health, MetricsMemory, series


class MetricsPublisher:
    """A `PollObserver` publishing each poll's series to `collector`.

    `poll_duration_seconds` is, live, the time from the poll's own clock reading (taken just before
    the sources are read) to its rows being written; in a replay (`live=False`), whose poll times are
    recorded ones, the time since the previous poll was published (reading the trace, the core,
    the write). `ebpf_mode`: the eBPF loader of a live collector (core, bcc or off)."""

    def __init__(
        self,
        collector: SnapshotCollector,
        counters: Callable[[], WriterCounters],
        monotonic_ns: Callable[[], int],
        live: bool,
        pods: PodNames | None = None,
        ebpf_mode: str | None = None,
    ) -> None:
        self._pods = pods if live else None  # a replay's pids are not this host's
        self._collector = collector
        self._counters = counters
        self._monotonic_ns = monotonic_ns
        self._live = live
        self._memory = MetricsMemory()
        self._last_ns = monotonic_ns()
        self._ebpf_mode = ebpf_mode

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
        samples, self._memory = series(poll, rows, health, self._memory, self._pod_names(rows))
        self._collector.publish(samples, health.poll_duration_s)

    def _pod_names(self, rows: tuple[Row, ...]) -> dict[str, tuple[str, str]]:
        """(pod name, namespace) of each container of `rows` whose cgroup names a pod."""
        if self._pods is None:
            return {}
        out: dict[str, tuple[str, str]] = {}
        for row in rows:
            cid = row.process.container_id
            if cid and cid not in out and pod_uid(row.process.cgroup):
                out[cid] = self._pods.lookup(cid, row.tgid)
        self._pods.forget_except(set(out) | {r.process.container_id or "" for r in rows})
        return out
