"""The clock port: the one place croft reads wall time and the monotonic clock, and sleeps.

Every command that waits (croft run's poll loop, croft scale's poll loop, croft top) takes a
`Clock`; tests pass a fake one that moves time by hand. Schedules are on the monotonic clock
(`croft.domain.schedule.next_deadline`); wall time is only stamped on what is written.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from croft.domain.instant import Instant


class Clock(Protocol):
    def now(self) -> Instant:
        """Wall time (unix ms) and CLOCK_MONOTONIC (ns), read together."""
        ...

    def sleep_until(self, monotonic_ns: int) -> bool:
        """Sleep until the monotonic clock reaches `monotonic_ns`; False when woken early by
        `wake` (a stop was asked for)."""
        ...

    def wake(self) -> None:
        """End any sleep now and every later one (safe from a signal handler)."""
        ...


class SystemClock:
    """The host's clocks. `time.monotonic_ns` is CLOCK_MONOTONIC on Linux, the clock eBPF's
    bpf_ktime_get_ns reads, so GPU ioctl times compare with poll times directly."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def now(self) -> Instant:
        return Instant(unix_ms=time.time_ns() // 1_000_000, monotonic_ns=time.monotonic_ns())

    def sleep_until(self, monotonic_ns: int) -> bool:
        while not self._stop.is_set():
            left_ns = monotonic_ns - time.monotonic_ns()
            if left_ns <= 0:
                return True
            self._stop.wait(min(left_ns / 1e9, 0.5))
        return False

    def wake(self) -> None:
        """End any sleep now and every later one (safe from a signal handler)."""
        self._stop.set()
