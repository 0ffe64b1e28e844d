"""Running `docker` as an argument list (never through a shell)."""

from __future__ import annotations

import re
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
        raise UserError(
            f"docker run failed: {cause(done.stderr, done.returncode)}; fix that and run croft deploy "
            "docker again"
        )
    return done.stdout.strip()


# docker's closing advice after an error ("Run 'docker run --help' for more information", "See
# 'docker run --help'."): never the cause
_ADVICE = re.compile(r"^(Run|See) 'docker [^']*--help'")


def cause(stderr: str, returncode: int) -> str:
    """What docker said went wrong: its last line that is not its advice to read --help (the engine
    out of reach, an image not found), without docker's `docker: ` prefix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if not _ADVICE.match(line)]
    if not said:
        return f"exit status {returncode}"
    return said[-1].removeprefix("docker: ")
