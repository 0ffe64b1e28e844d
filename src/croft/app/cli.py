"""The `croft` console command. Every command is imported lazily, so `croft --help` stays instant
and never imports bcc, pynvml or kubernetes. `croft collect` with plain options does not even build
the cyclopts app (`croft.app.fastargs`): its start is most of a local copy's time."""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING, Any

from croft.errors import UserError

if TYPE_CHECKING:
    from cyclopts import App

GC_YOUNG_OBJECTS = 10_000  # the young generation's gc threshold in croft stats and profile (`entrypoint`)
# command -> (module, function) read by `croft.app.fastargs` when its options are plain
FAST_COMMANDS = {"collect": ("croft.app.collect", "collect")}
# command -> (module, function, spec): read by `croft.app.fastargs.parse_spec` when its options are
# plain; the cyclopts signature (and help) stays in croft.app.stats / croft.app.profile
SPEC_COMMANDS = {
    "stats": ("croft.app.answers", "stats", "STATS"),
    "profile": ("croft.app.answers", "profile", "PROFILE"),
}


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
    app.command("croft.app.top:top", name="top", help="processes of the newest poll")
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
    app.command("croft.app.export:export", name="export", help="a dataset as hive-partitioned Parquet")
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
        fast = _fast_command(tokens)
        result = fast() if fast is not None else the_app()(tokens, exit_on_error=True)
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


def _fast_command(tokens: list[str]) -> Any:
    """The command `tokens` name, bound to their options, when `croft.app.fastargs` reads them all;
    else None (cyclopts reads them)."""
    if not tokens or (tokens[0] not in FAST_COMMANDS and tokens[0] not in SPEC_COMMANDS):
        return None
    import functools
    import importlib

    if tokens[0] in SPEC_COMMANDS:
        import os

        from croft.app.fastargs import parse_spec

        module, name, spec = SPEC_COMMANDS[tokens[0]]
        loaded = importlib.import_module(module)
        function = getattr(loaded, name)
        kwargs = parse_spec(getattr(loaded, spec), tokens[1:], os.environ)
        return None if kwargs is None else functools.partial(function, **kwargs)
    from croft.app.fastargs import parse

    module, name = FAST_COMMANDS[tokens[0]]
    function = getattr(importlib.import_module(module), name)
    kwargs = parse(function, tokens[1:])
    return None if kwargs is None else functools.partial(function, **kwargs)


def entrypoint() -> None:
    """The `croft` console script (and `python -m croft`): `main` in a process of its own.

    `croft stats` and `croft profile` answer and exit, and most of a summarized answer's time is
    their start: importing their modules makes tens of thousands of objects, next to none of them
    garbage, which the collector's young generation (700 objects by default) walks again and again.
    For them it is 10,000 (about 10 M of a summarized `croft stats`' ~270 M instructions), and once
    the answer is written what is left is frozen, so that the interpreter's collections at exit do
    not walk it (another ~19 M): they keep no file open past their return, so nothing is left for
    a finalizer to flush. The other commands (the collector among them) run as they always did."""
    short = sys.argv[1:2] in (["stats"], ["profile"])
    if short:
        gc.set_threshold(GC_YOUNG_OBJECTS)
    code = main()
    if short:
        gc.freeze()
    sys.exit(code)
