"""`croft collect`'s options read without cyclopts (croft.app.fastargs): whatever tokens it answers
for, its reading is the cyclopts app's own, value and type; the rest it leaves to cyclopts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from croft.app.cli import FAST_COMMANDS, app, main
from croft.app.collect import collect
from croft.app.fastargs import parse

OPTIONS = [
    "--namespace", "--out", "--kubeconfig", "--selector", "--port", "--url", "--timeout", "--deadline",
    "--help", "-h", "--version", "--empty-url", "--time-out", "--bogus", "--", "-p", "--url_x",
]  # fmt: skip
VALUES = [
    "croft", "", " x ", "-1", "0", "00", "007", "9464", "1_000", "+5", "0x10", "\u0663", "1e3", "3.5", "1.",
    ".5", "0.25", "nan", "inf", "None", "none", "null", "true", "a=http://127.0.0.1:1", "b=https://h/p",
    "research/data/nodes", "/tmp/k config", "--out", "-", "99999999999999999999",
]  # fmt: skip


def cyclopts_reading(tokens: list[str]) -> dict[str, tuple[type, Any]] | None:
    """What the cyclopts app binds for `croft collect TOKENS` (value and type), None when it refuses."""
    try:
        function, bound, _ = app.parse_args(["collect", *tokens], exit_on_error=False, print_error=False)
    except Exception:
        return None
    if function is not collect:
        return None  # --help, --version
    return {name: (type(value), value) for name, value in bound.arguments.items()}


pair = st.tuples(st.sampled_from(OPTIONS[:8] * 3 + OPTIONS[8:]), st.sampled_from(VALUES), st.booleans()).map(
    lambda p: [f"{p[0]}={p[1]}"] if p[2] else [p[0], p[1]]
)
tokens_strategy = st.one_of(
    st.lists(pair, max_size=5).map(lambda pairs: [t for p in pairs for t in p]),
    st.lists(st.sampled_from(OPTIONS + VALUES), max_size=8),
)


@given(tokens_strategy)
@example(["--url", "a=http://127.0.0.1:1", "--url", "b=http://h:2", "--out", "o", "--port", "12"])
@example(
    ["--timeout=2.5", "--deadline", "60", "--kubeconfig", "/k", "--namespace", "ns", "--selector", "a=b"]
)
def test_every_reading_is_the_cyclopts_apps(tokens: list[str]) -> None:
    fast = parse(collect, tokens)
    if fast is not None:
        assert {name: (type(value), value) for name, value in fast.items()} == cyclopts_reading(tokens)


def test_plain_options_are_read_and_the_rest_left_to_cyclopts() -> None:
    assert parse(collect, ["--url", "a=http://h:1", "--url=b=http://h:2", "--out", "o", "--port", "1"]) == {
        "url": ("a=http://h:1", "b=http://h:2"),
        "out": Path("o"),
        "port": 1,
    }
    assert parse(collect, []) == {}
    for tokens in (["--help"], ["--port", "1e3"], ["--out", "a", "--out", "b"], ["--empty-url"], ["x"]):
        assert parse(collect, tokens) is None, tokens
    assert set(FAST_COMMANDS) == {"collect"}


def test_a_bad_value_gets_cyclopts_words_and_exit_code(capsys: Any) -> None:
    try:
        code = main(["collect", "--port", "many"])
    except SystemExit as exc:
        code = exc.code
    assert code != 0
    assert "--port" in capsys.readouterr().err
