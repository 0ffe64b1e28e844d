"""The `croft` console command: one cyclopts app. Every command's module is imported only when it
runs, so `croft --help` stays quick and never imports bcc, pynvml or kubernetes."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from croft.errors import UserError

if TYPE_CHECKING:
    from cyclopts import App


def build_app() -> App:
    """The cyclopts app of every command (each command's module imported when it runs)."""
    from cyclopts import App

    from croft import __version__

    app = App(
        name="croft",
        help="Per-process kernel, container and GPU telemetry, kept as a rotating zstd JSONL dataset.\n\n"
        "Paths default to /var/lib/croft/croft-dataset.jsonl, or DATASET_PATH.",
        version=__version__,
    )
    app.command("croft.app.run:run", name="run", help="the collector; needs root")
    app.command("croft.app.top:top", name="top", help="each process's latest row of the last 15 polls")
    app.command("croft.app.stats:stats", name="stats", help="dataset summary")
    app.command(
        "croft.app.profile:profile", name="profile", help="resource profile of one container, as JSON"
    )
    app.command("croft.app.index:index", name="index", help="write summaries for segments that lack one")
    app.command(
        "croft.app.deploy:deploy_app", name="deploy", help="start the collector on Docker or Kubernetes"
    )
    app.command(
        "croft.app.collect:collect", name="collect", help="pull each node's dataset from the DaemonSet"
    )
    app.command("croft.app.export:export", name="export", help="the dataset as hive-partitioned Parquet")
    app.command(
        "croft.app.completion:completion", name="completion", help="shell completion script (bash, zsh, fish)"
    )
    app.command(
        "croft.app.scale:scale",
        name="scale",
        help="add replicas from the request rate, ahead of the HPA",
    )
    return app


_built: list[App] = []


def the_app() -> App:
    """The cyclopts app, built on first use."""
    if not _built:
        _built.append(build_app())
    return _built[0]


def __getattr__(name: str) -> Any:
    """`croft.app.cli.app`: the cyclopts app, built on first use."""
    if name == "app":
        return the_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Run `croft`; a `UserError` becomes `croft: <message>` on stderr and its exit code."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if callable(reconfigure):  # PYTHONIOENCODING=ascii: a character it lacks becomes ?, not a traceback
        reconfigure(errors="replace")
    tokens = sys.argv[1:] if argv is None else list(argv)
    try:
        result = the_app()(tokens, exit_on_error=True)
    except UserError as exc:
        print(f"croft: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        from croft.app.console import silence_stdout

        silence_stdout()  # the reader went away (`croft stats | head -1`): end quietly
        return 0
    return result if isinstance(result, int) else 0


def entrypoint() -> None:
    """The `croft` console script (and `python -m croft`)."""
    sys.exit(main())
