"""Key presses and the size of the terminal, for croft top's live screen.

While open, the terminal is in cbreak mode (keys arrive one at a time, unechoed; Ctrl-C still
raises KeyboardInterrupt); the settings it had are put back on close, whatever happened. When stdin
is not a terminal there are no keys: waiting is plain sleeping.
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import termios
import time
import tty
from types import TracebackType
from typing import Any

from croft.domain.top.keys import decode_keys

RESIZE = "resize"
SIZE_CHECK_S = 0.2  # how often a wait looks at the terminal's size


class Keys:
    """A context manager over stdin; `wait(deadline)` returns the keys pressed before it."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None
        self._size = shutil.get_terminal_size()

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

    def wait(self, deadline_ns: int) -> list[str]:
        """Wait until CLOCK_MONOTONIC reaches `deadline_ns` or a key is pressed; the keys (see
        `croft.domain.top.keys.decode_keys`), "resize" when the terminal changed size, "q" at
        the end of stdin, or none at the deadline."""
        while (left_ns := deadline_ns - time.monotonic_ns()) > 0:
            if self._fd is None:
                time.sleep(left_ns / 1e9)
                return []
            ready, _, _ = select.select([self._fd], [], [], min(left_ns / 1e9, SIZE_CHECK_S))
            if ready:
                typed = os.read(self._fd, 256)
                return decode_keys(typed) if typed else ["q"]
            size = shutil.get_terminal_size()
            if size != self._size:
                self._size = size
                return [RESIZE]
        return []

    def quit_before(self, deadline_ns: int) -> bool:
        """Wait until `deadline_ns`; True as soon as q (or Q) is pressed, or stdin ends."""
        while (left_ns := deadline_ns - time.monotonic_ns()) > 0:
            keys = self.wait(time.monotonic_ns() + left_ns)
            if "q" in keys or "Q" in keys:
                return True
        return False
