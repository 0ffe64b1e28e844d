"""croft completion: the shell completion script, from cyclopts."""

from __future__ import annotations

from typing import Annotated, Literal

from cyclopts import Parameter


def completion(
    shell: Annotated[Literal["bash", "zsh", "fish"], Parameter(help="the shell to complete in")] = "bash",
) -> int:
    """Print the completion script for `shell`: `croft completion bash > /etc/bash_completion.d/croft`,
    or `source <(croft completion bash)` in ~/.bashrc; `croft completion zsh > "${fpath[1]}/_croft"`."""
    import sys

    from croft.app.cli import app

    sys.stdout.write(app.generate_completion(prog_name="croft", shell=shell))
    return 0
