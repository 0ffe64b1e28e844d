"""The terminal console croft's commands print through: rich's, made quiet on a closed pipe.

`croft stats | head -1` closes the pipe after one line. rich's default turns that into exit 1;
here it raises BrokenPipeError, which `croft.app.cli.main` ends quietly with exit 0 (as `cat` and
`ls` do when their reader goes away), stdout pointed at /dev/null so nothing fails on the way out.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console


class PipeConsole(Console):
    """A rich Console whose closed pipe is a BrokenPipeError, and which honours NO_COLOR for
    bold and reverse too (rich drops only colours under NO_COLOR)."""

    def __init__(self, **options: Any) -> None:
        if os.environ.get("NO_COLOR"):
            options.setdefault("no_color", True)
            options["color_system"] = None
        super().__init__(**options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a closed pipe stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


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
        from croft.app.stats import _size

        rate = done_bytes / elapsed if elapsed > 0 else 0.0
        share = done_bytes / total_bytes if total_bytes else 1.0
        line = f"croft: read {_size(done_bytes)} of {_size(total_bytes)} ({share:.0%}), {_size(rate)}/s"
        self._stream.write("\r\x1b[K" + line)
        self._stream.flush()
        self._shown = True
