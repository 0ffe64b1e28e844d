"""/metrics and /healthz as pure functions: the series names and help, the series of a poll, the text
exposition, and whether the collector is healthy."""

# What the other rooms of the core use; they import it from here, never from the modules
# (pyproject.toml, the import contract on the core's rooms): the exposition and the names of the
# series croft scale reads, and the query that asks a collector for only those.
from croft.domain.metrics.exposition import BadExposition, Sample, parse_exposition, render_exposition
from croft.domain.metrics.names import (
    COLLECTOR_POLL_S,
    CONTAINER_CPU_CORES,
    CONTAINER_INGRESS_RATE,
    CONTAINER_LISTEN_BACKLOG,
    CONTAINER_SYSCALL_RATE,
    CONTAINER_UNREAD_BYTES,
    INGRESS_SIGNALS,
    LABEL_CONTAINER_ID,
    LABEL_SIGNAL,
    LABEL_SYSCALL,
    LAST_POLL_TIMESTAMP_SECONDS,
    OTHER_SYSCALLS,
    SYSCALLS_PER_CONTAINER,
)
from croft.domain.metrics.query import SeriesQuery, select

__all__ = [
    "COLLECTOR_POLL_S",
    "CONTAINER_CPU_CORES",
    "CONTAINER_INGRESS_RATE",
    "CONTAINER_LISTEN_BACKLOG",
    "CONTAINER_SYSCALL_RATE",
    "CONTAINER_UNREAD_BYTES",
    "INGRESS_SIGNALS",
    "LABEL_CONTAINER_ID",
    "LABEL_SIGNAL",
    "LABEL_SYSCALL",
    "LAST_POLL_TIMESTAMP_SECONDS",
    "OTHER_SYSCALLS",
    "SYSCALLS_PER_CONTAINER",
    "BadExposition",
    "Sample",
    "SeriesQuery",
    "parse_exposition",
    "render_exposition",
    "select",
]
