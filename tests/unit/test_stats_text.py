"""croft stats' human summary without rich: wherever it writes the summary itself, the text is the
very text rich writes (without styles) at that width; it takes rich's width and its choice of
styles from the same environment."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from croft.app.answers import render_rich
from croft.app.console import PipeConsole
from croft.app.stats_text import plain_lines, plain_width
from croft.domain.dataset.row import WORKLOADS
from croft.domain.dataset.summary import FileFacts, Stats

# names as datasets hold them, and now and then one that rich reads as markup, an emoji code or
# wide characters (then rich lays the summary out, and the test compares nothing)
plain_names = st.text(alphabet="abcxyz-_.0123", min_size=1, max_size=16)
odd_names = st.sampled_from(
    ["[bold]x", "a:smile:b", ":100:", "\u00e9", "\u65e5\u672c", "back\\slash", "x]y", "t\tb", ""]
)
names = st.integers(0, 30).flatmap(lambda n: odd_names if n == 0 else plain_names)
counts = st.integers(0, 10**15)
rates = st.floats(0, 1e7) | st.sampled_from([0.05, 0.04999, 1e20, math.inf])
times = st.integers(0, 4_102_444_800_000)


@st.composite
def summaries(draw: st.DrawFn) -> Stats:
    files = draw(st.integers(1, 10_000))
    first = draw(times)
    return Stats(
        files=FileFacts(files, draw(st.integers(0, files)), draw(st.integers(0, 2**50))),
        rows=draw(st.integers(1, 10**12)),
        skipped_lines=draw(counts),
        first_ms=draw(st.none() | st.just(first)),
        last_ms=first + draw(st.integers(0, 10**10)),
        polls=draw(counts),
        nodes=tuple(sorted(draw(st.lists(names, min_size=1, max_size=5, unique=True)))),
        containers=draw(counts),
        processes=draw(counts),
        workloads=tuple(
            sorted(draw(st.dictionaries(st.sampled_from(WORKLOADS) | names, counts, max_size=5)).items())
        ),
        frameworks=tuple(sorted(draw(st.dictionaries(names, counts, max_size=8)).items())),
        busiest_syscalls=tuple(draw(st.lists(st.tuples(names, rates), max_size=10))),
    )


def rich_text(path: Path, s: Stats, width: int) -> str:
    out = io.StringIO()
    render_rich(path, s, PipeConsole(highlight=False, file=out, width=width, color_system=None))
    return out.getvalue()


paths = st.sampled_from(["/var/lib/croft/croft-dataset.jsonl", "data", "bench-data/summaries/n12"]) | st.text(
    alphabet="ab/.", max_size=30
)
odd_paths = st.sampled_from(["a/[bold]b", "x:smile:", "d\u00e9j\u00e0"])


@settings(max_examples=300, deadline=None)
@given(summaries(), paths | odd_paths, st.integers(60, 160) | st.integers(1, 260))
def test_the_plain_text_is_the_text_rich_writes_at_that_width(s: Stats, path: str, width: int) -> None:
    lines = plain_lines(Path(path), s, width)
    event("written without rich" if lines is not None else "left to rich")
    if lines is not None:
        assert "".join(line + "\n" for line in lines) == rich_text(Path(path), s, width)


ORDINARY = Stats(
    files=FileFacts(36, 36, 176_000_000),
    rows=2_400_000,
    skipped_lines=0,
    first_ms=1_792_246_750_473,
    last_ms=1_792_419_548_473,
    polls=97_200,
    nodes=("node-a", "node-b", "node-c"),
    containers=72,
    processes=130,
    workloads=(("gpu-held", 10), ("no-gpu", 2_399_990)),
    frameworks=(("pytorch", 70), ("vllm", 2)),
    busiest_syscalls=(("futex", 1234.5), ("clock_nanosleep", 2.25), ("read", 0.0)),
)


@pytest.mark.parametrize("width", [62, 79, 80, 100, 200])
def test_an_ordinary_summary_is_written_without_rich_and_the_same(width: int) -> None:
    lines = plain_lines(Path("/data"), ORDINARY, width)
    assert lines is not None
    assert "".join(line + "\n" for line in lines) == rich_text(Path("/data"), ORDINARY, width)


def test_what_rich_would_wrap_or_read_as_markup_is_left_to_rich() -> None:
    assert plain_lines(Path("/data"), ORDINARY, 30) is None  # the totals are wider
    assert plain_lines(Path("/da[bold]ta"), ORDINARY, 100) is None
    assert plain_lines(Path("/data"), attrs.evolve(ORDINARY, nodes=("a:smile:",)), 100) is None
    assert plain_lines(Path("/data"), attrs.evolve(ORDINARY, nodes=("n\u00e9",)), 100) is None
    wide = attrs.evolve(ORDINARY, busiest_syscalls=(("x" * 40, 1.0),))
    assert plain_lines(Path("/data"), wide, 80) is None  # side by side it would not fit
    assert plain_lines(Path("/data"), wide, 120) is not None


class Stdout(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.mark.parametrize(
    ("environ", "terminal", "width"),
    [
        ({"COLUMNS": "123"}, False, 123),
        ({"COLUMNS": "123"}, True, None),  # rich styles a terminal's output
        ({"COLUMNS": "123", "NO_COLOR": "1"}, True, 123),
        ({"COLUMNS": "123", "FORCE_COLOR": "1"}, False, None),
        ({"COLUMNS": "123", "FORCE_COLOR": ""}, True, 123),
        ({"COLUMNS": "123", "TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True, 123),
        ({"COLUMNS": "123", "TTY_COMPATIBLE": "1"}, False, None),
        ({"COLUMNS": "123", "TERM": "dumb"}, True, 80),
        ({"COLUMNS": "123", "LINES": "40", "TERM": "dumb"}, True, 123),
        ({"COLUMNS": "12x"}, False, 0),  # the test's own terminal's width, or 80
    ],
)
def test_the_width_and_the_styles_are_rich_own(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], terminal: bool, width: int | None
) -> None:
    for name in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    stdout = Stdout(terminal)
    got = plain_width(os.environ, stdout)
    console = PipeConsole(file=stdout)
    if width is None:
        assert got is None and console.color_system is not None
    else:
        assert console.color_system is None and got == console.width
        assert width == 0 or got == width


# benchmarks/summaries.py's dataset: side by side, its tables are 81 columns wide
CROWDED = attrs.evolve(
    ORDINARY,
    workloads=(("gpu-held", 873_929), ("gpu-onset", 29_739), ("no-gpu", 1_483_946)),
    frameworks=(("jax", 9), ("ollama", 9), ("pytorch", 18), ("ray", 9), ("vllm", 9)),
    busiest_syscalls=(("clock_nanosleep", 4_487.8), ("munmap", 4_247.3), ("futex", 3_950.4)),
)


def test_tables_wider_than_the_terminal_are_narrowed_as_rich_narrows_them() -> None:
    """rich narrows the widest value column and wraps its header ("mean" over "calls/s"); so does
    the plain text, at every width where no word would be cut."""
    written = []
    for width in range(50, 130):
        lines = plain_lines(Path("/data"), CROWDED, width)
        if lines is not None:
            written.append(width)
            assert "".join(line + "\n" for line in lines) == rich_text(Path("/data"), CROWDED, width), width
    assert 80 in written and 70 in written
    assert any(line.rstrip().endswith("mean") for line in plain_lines(Path("/data"), CROWDED, 80) or [])


@given(st.text(alphabet=st.sampled_from("ab 1:9[]\\\t\u00e9-") | st.characters(), max_size=20))
def test_what_is_plain_and_where_words_end_are_rich_own_patterns(text: str) -> None:
    import re

    from croft.app.stats_text import _plain, _words

    rich_word = re.compile(r"\s*\S+\s*")  # rich._wrap.re_word
    emoji = re.compile(r":(\S*?):")  # rich's emoji codes, without their -emoji/-text suffix
    plain = re.fullmatch(r"[ -Z^-~]*", text) is not None and all(
        len(found[1]) == 2 and found[1].isdigit() for found in emoji.finditer(text)
    )
    assert _plain(text) == plain
    assert _words(text) == rich_word.findall(text)
