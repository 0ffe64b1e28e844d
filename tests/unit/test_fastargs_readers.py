"""`croft stats` and `croft profile` read without cyclopts (croft.app.fastargs.parse_spec): whatever
tokens and DATASET_PATH it answers for, its reading is the cyclopts app's own, value and type; the
rest it leaves to cyclopts; and the answers' defaults are the cyclopts signatures'."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from croft.app import answers
from croft.app.cli import SPEC_COMMANDS, app
from croft.app.fastargs import parse_spec
from croft.app.profile import profile
from croft.app.stats import stats

TOKENS = {
    "stats": ["--json", "--containers", "--path", "--help", "-h", "--json=true", "--no-json", "--bogus",
              "--"],
    "profile": [
        "--cgroup", "--pid", "--dataset", "--from", "--to", "--from-ms", "--to-ms", "--container-id",
        "--help", "--from_ms", "--json", "-p", "--",
    ],
}  # fmt: skip
VALUES = [
    "d7e11b1b", "", " x ", "-1", "0", "00", "007", "12", "1_000", "+5", "0x10", "\u0663", "1e3", "3.5",
    "None", "none", "null", "true", "/system.slice/etl.service", "research/data/nodes", "10m", "2h ago",
    "now", "2026-10-20T14:20:00Z", "99999999999999999999", "--json",
]  # fmt: skip
FUNCTIONS = {"stats": stats, "profile": profile}


@contextmanager
def dataset_path(value: str | None) -> Iterator[None]:
    old = os.environ.pop("DATASET_PATH", None)
    if value is not None:
        os.environ["DATASET_PATH"] = value
    try:
        yield
    finally:
        os.environ.pop("DATASET_PATH", None)
        if old is not None:
            os.environ["DATASET_PATH"] = old


def cyclopts_reading(command: str, tokens: list[str]) -> dict[str, tuple[type, Any]] | None:
    try:
        function, bound, _ = app.parse_args([command, *tokens], exit_on_error=False, print_error=False)
    except Exception:
        return None
    if function is not FUNCTIONS[command]:
        return None
    return {name: (type(value), value) for name, value in bound.arguments.items()}


def spec_reading(command: str, tokens: list[str]) -> dict[str, tuple[type, Any]] | None:
    module, _, spec = SPEC_COMMANDS[command]
    assert module == "croft.app.answers"
    got = parse_spec(getattr(answers, spec), tokens, os.environ)
    return None if got is None else {name: (type(value), value) for name, value in got.items()}


def tokens_of(command: str) -> st.SearchStrategy[list[str]]:
    pair = st.tuples(st.sampled_from(TOKENS[command]), st.sampled_from(VALUES), st.booleans()).map(
        lambda p: [f"{p[0]}={p[1]}"] if p[2] else [p[0], p[1]]
    )
    single = st.sampled_from(TOKENS[command] + VALUES).map(lambda t: [t])
    return st.lists(st.one_of(pair, single), max_size=5).map(lambda parts: [t for p in parts for t in p])


@given(
    st.sampled_from(sorted(SPEC_COMMANDS)).flatmap(lambda c: st.tuples(st.just(c), tokens_of(c))),
    st.one_of(st.none(), st.sampled_from(VALUES)),
)
@example(("stats", ["bench/n12", "--json"]), None)
@example(("stats", []), "/data/croft-dataset.jsonl")
@example(("stats", ["--containers", "--json"]), None)
@example(("profile", ["d7e11b1b", "--dataset", "d", "--from-ms", "5", "--to-ms", "12"]), None)
@example(("profile", ["--cgroup", "/system.slice/etl.service", "--from", "10m", "--to", "now"]), "d")
@example(("profile", ["--pid", "12"]), None)
def test_every_reading_is_the_cyclopts_apps(command_tokens: tuple[str, list[str]], env: str | None) -> None:
    command, tokens = command_tokens
    with dataset_path(env):
        fast = spec_reading(command, tokens)
        if fast is not None:
            assert fast == cyclopts_reading(command, tokens), (command, tokens, env)


def test_plain_options_are_read_and_the_rest_left_to_cyclopts() -> None:
    with dataset_path(None):
        path = (type(Path("d")), Path("d"))
        assert spec_reading("stats", ["d", "--json"]) == {"path": path, "json": (bool, True)}
        assert spec_reading("profile", ["abcd", "--dataset=d", "--from-ms", "5"]) == {
            "container_id": (str, "abcd"),
            "dataset": (type(Path("d")), Path("d")),
            "from_ms": (int, 5),
        }
        for command, tokens in (
            ("stats", ["--help"]),
            ("stats", ["--json", "--json"]),
            ("stats", ["a", "b"]),
            ("profile", ["--pid", "1e3"]),
            ("profile", ["--from", "-5m"]),
            ("profile", ["--bogus", "x"]),
        ):
            assert spec_reading(command, tokens) is None, tokens
    with dataset_path("/data"):
        assert spec_reading("stats", []) == {"path": (type(Path("d")), Path("/data"))}


def test_the_answers_take_the_cyclopts_signatures_defaults() -> None:
    for command, function in FUNCTIONS.items():
        mine = inspect.signature(getattr(answers, command)).parameters
        theirs = inspect.signature(function).parameters
        assert list(mine) == list(theirs)
        assert {n: p.default for n, p in mine.items()} == {n: p.default for n, p in theirs.items()}
        assert {n: p.kind for n, p in mine.items()} == {n: p.kind for n, p in theirs.items()}


def test_stats_and_profile_start_without_cyclopts() -> None:
    """Nor does croft stats' human summary import rich where rich would write it without styles
    and wrap nothing (a pipe, 100 columns); nor does croft stats build the row schema (msgspec)
    or the row's attrs classes when the native fold reads every line."""
    import os
    import subprocess
    import sys

    sample = Path(__file__).resolve().parents[2] / "fixtures" / "datasets" / "sample"
    script = (
        "import sys, contextlib, io\n"
        "from croft.app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    assert main(['stats', {str(sample)!r}, '--json']) == 0\n"
        f"    assert main(['stats', {str(sample)!r}]) == 0\n"
        "    print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'msgspec' or m in "
        "('croft.domain.dataset.row', 'croft.domain.dataset.views', 'croft.domain.dataset.rotation'))),"
        " file=sys.__stdout__)\n"
        f"    main(['profile', 'abcd', '--dataset', {str(sample)!r}])\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('cyclopts', 'rich', 'multiprocessing', 'concurrent'))))\n"
    )
    environ = {**os.environ, "COLUMNS": "100"}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        environ.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=environ
    )
    assert done.stdout.split() == [], done.stdout
