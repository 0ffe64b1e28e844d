"""`croft` as a user runs it, for the tests of its commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The console script, whose exit code is main()'s.
CROFT = str(Path(sys.executable).parent / "croft")


def croft(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`croft ARGS` in a real process, its output captured as text; `env` adds to (or overrides)
    this process's environment. Never raises on a non-zero exit: the tests check the code."""
    return subprocess.run(
        [CROFT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
