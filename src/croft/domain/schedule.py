"""The poll schedule: when the next poll is due, on the monotonic clock."""

from __future__ import annotations


def next_deadline(start_ns: int, interval_ns: int, now_ns: int) -> int:
    """The first tick of the schedule `start_ns + k * interval_ns` (k >= 1) strictly after `now_ns`:
    a slow poll skips the ticks it missed instead of shifting every later one."""
    elapsed = now_ns - start_ns
    return start_ns + (elapsed // interval_ns + 1) * interval_ns
