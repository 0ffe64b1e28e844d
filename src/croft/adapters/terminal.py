"""Single key presses from the terminal, for croft top's q.

While open, the terminal is in cbreak mode (keys arrive one at a time, unechoed; Ctrl-C still
raises KeyboardInterrupt); the settings it had are put back on close, whatever happened. When stdin
is not a terminal there are no keys: waiting is plain sleeping.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import time
import tty
from types import TracebackType
from typing import Any

QUIT_KEYS = frozenset(b"qQ")


class Keys:
    """A context manager over stdin; `quit_before(deadline)` waits for q until the deadline."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None

    def __enter__(self) -> Keys:
        if sys.stdin.isatty():
            fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
            self._fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None and self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
        self._fd = None

    def quit_before(self, deadline_ns: int) -> bool:
        """Wait until CLOCK_MONOTONIC reaches `deadline_ns`; True as soon as q (or Q) is pressed,
        or when stdin reaches its end."""
        while (left_ns := deadline_ns - time.monotonic_ns()) > 0:
            if self._fd is None:
                time.sleep(left_ns / 1e9)
                return False
            ready, _, _ = select.select([self._fd], [], [], left_ns / 1e9)
            if ready:
                typed = os.read(self._fd, 64)
                if not typed or QUIT_KEYS.intersection(typed):
                    return True
        return False
