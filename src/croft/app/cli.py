"""The `croft` console command. Every command is imported lazily, so `croft --help` stays instant
and never imports bcc, pynvml or kubernetes."""

from __future__ import annotations

import sys

from cyclopts import App

from croft import __version__
from croft.errors import UserError

app = App(
    name="croft",
    help="Per-process kernel, container and GPU telemetry, kept as a rotating zstd JSONL dataset.\n\n"
    "Paths default to /var/lib/croft/croft-dataset.jsonl, or DATASET_PATH.",
    version=__version__,
)
app.command("croft.app.run:run", name="run", help="the collector; needs root")
app.command("croft.app.top:top", name="top", help="processes of the newest poll")
app.command("croft.app.stats:stats", name="stats", help="dataset summary")
app.command("croft.app.profile:profile", name="profile", help="resource profile of one container, as JSON")
app.command("croft.app.index:index", name="index", help="write summaries for segments that lack one")
app.command("croft.app.deploy:deploy_app", name="deploy", help="start the collector on Docker or Kubernetes")
app.command("croft.app.collect:collect", name="collect", help="pull each node's dataset from the DaemonSet")
app.command("croft.app.export:export", name="export", help="a dataset as hive-partitioned Parquet")
app.command(
    "croft.app.completion:completion", name="completion", help="shell completion script (bash, zsh, fish)"
)
app.command(
    "croft.app.scale:scale",
    name="scale",
    help="add replicas from the request rate, ahead of the HPA",
)


def main(argv: list[str] | None = None) -> int:
    """Run `croft`; a `UserError` becomes `croft: <message>` on stderr and its exit code."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if callable(reconfigure):  # PYTHONIOENCODING=ascii: a character it lacks becomes ?, not a traceback
        reconfigure(errors="replace")
    try:
        result = app(argv, exit_on_error=True)
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
    sys.exit(main())
