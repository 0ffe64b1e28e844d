"""A read's progress on a terminal, for croft stats' long reads.

Apart from `croft.app.console` so that a read with its output piped (`croft stats --json`) does
not import rich for it.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

PROGRESS_AFTER_S = 1.0


class Progress:
    """A one-line progress report on a terminal's stderr for a read longer than `after_s`:
    bytes read of the total and the rate; the line is erased when the read ends. Nothing at all
    when stderr is not a terminal (piped output stays clean)."""

    def __init__(self, stream: TextIO | None, after_s: float = PROGRESS_AFTER_S) -> None:
        self._stream = stream
        self._started = time.monotonic()
        self._after_s = after_s
        self._shown = False

    @classmethod
    def on_stderr(cls) -> Progress:
        """On stderr when both it and stdout are a terminal; silent when either is piped."""
        return cls(sys.stderr if sys.stderr.isatty() and sys.stdout.isatty() else None)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._stream is not None and self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def update(self, done_bytes: int, total_bytes: int) -> None:
        """Told after each part read: bytes on disk read so far and in all."""
        if self._stream is None:
            return
        elapsed = time.monotonic() - self._started
        if elapsed < self._after_s:
            return
        from croft.app.answers import _size

        rate = done_bytes / elapsed if elapsed > 0 else 0.0
        share = done_bytes / total_bytes if total_bytes else 1.0
        line = f"croft: read {_size(done_bytes)} of {_size(total_bytes)} ({share:.0%}), {_size(rate)}/s"
        self._stream.write("\r\x1b[K" + line)
        self._stream.flush()
        self._shown = True
