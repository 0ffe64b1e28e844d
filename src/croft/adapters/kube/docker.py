"""Running `docker` as an argument list (never through a shell)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from croft.errors import UserError


def run_docker(argv: Sequence[str]) -> str:
    """Run `argv` (its first element `docker`); what it printed on stdout (the container id). A
    `UserError` when there is no docker command or the engine refuses, with docker's last words."""
    executable = shutil.which(argv[0])
    if executable is None:
        raise UserError(
            "no Docker engine here (no docker command on PATH): install Docker, "
            "or print the command with --dry-run and run it where Docker is"
        )
    done = subprocess.run([executable, *argv[1:]], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise UserError(f"docker run failed: {last}; fix that and run croft deploy docker again")
    return done.stdout.strip()
