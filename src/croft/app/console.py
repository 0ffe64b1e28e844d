"""The terminal console croft's commands print through: rich's, made quiet on a closed pipe.

`croft stats | head -1` closes the pipe after one line. rich's default turns that into exit 1;
here it raises BrokenPipeError, which `croft.app.cli.main` ends quietly with exit 0 (as `cat` and
`ls` do when their reader goes away), stdout pointed at /dev/null so nothing fails on the way out.
"""

from __future__ import annotations

import os
import sys
from typing import Any

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


def report_skips(sentences: tuple[str, ...]) -> None:
    """Each skip report as one `croft: ...` line on stderr."""
    for sentence in sentences:
        print(f"croft: {sentence}", file=sys.stderr)
