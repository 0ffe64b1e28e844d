"""One reading of the clock, apart from the collector's snapshots (croft.domain.collector.snapshot
re-exports it): the clock port and the readers that only ask the time do not import the collector."""

from __future__ import annotations

import attrs


@attrs.frozen
class Instant:
    """One reading of the clock: wall time for rows, CLOCK_MONOTONIC for intervals."""

    unix_ms: int
    monotonic_ns: int
