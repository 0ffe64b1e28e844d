"""parse_exposition's filters (what croft scale reads: some names, a label among some values, the
Deployment's containers) give exactly the samples of the full parse that pass them, on any body the
collector's real serving path writes (croft.domain.metrics.series, then /metrics' exposition_body,
whatever the cgroups, container ids and syscall names hold) and on any text that writes the same
samples with the blanks, label order and trailing commas the format allows; and croft scale's
estimate from such bodies is its pods' rate, whatever else the collectors serve."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.domain.collector import PER_S_DIGITS
from croft.domain.dataset.row import Process
from croft.domain.metrics import exposition as exposition
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import (
    BadExposition,
    Sample,
    escape_label_value,
    format_value,
    parse_exposition,
)
from croft.domain.metrics.series import MetricsMemory, series
from croft.domain.scaling.decision import CollectorScrape, Observations, PodView, ScaleConfig, estimate_rate
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, poll, proc

Rule = tuple[str, frozenset[str]]


def reference(text: str, wanted: frozenset[str], where: dict[str, Rule], only: Rule) -> tuple[Sample, ...]:
    """The law's right side: the full parse, then the filters as their docstring states them."""
    kept = []
    for sample in parse_exposition(text):
        rule = where.get(sample.name)
        value = sample.label(only[0])
        if (
            sample.name in wanted
            and (rule is None or sample.label(rule[0]) in rule[1])
            and (value is None or value in only[1])
        ):
            kept.append(sample)
    return tuple(kept)


@contextmanager
def python_scanner() -> Iterator[None]:
    """parse_exposition finding its lines the Python way (exposition._candidates), as where the native
    scanner is not built or the text is not latin-1."""
    native = exposition._linescan
    exposition._linescan = None  # type: ignore[assignment]
    try:
        yield
    finally:
        exposition._linescan = native


def filtered_both_ways(
    text: str, wanted: Collection[str], where: dict[str, Rule], only: Rule
) -> tuple[tuple[Sample, ...], tuple[Sample, ...]]:
    """parse_exposition's filtered samples with the native line scanner, then the Python way."""
    native = parse_exposition(text, wanted, where, only)
    with python_scanner():
        return native, parse_exposition(text, wanted, where, only)


def served(groups: list[tuple[str, str, dict[str, float]]]) -> str:
    """/metrics as the collector serves it after one poll of `groups` (cgroup, container id, syscalls)."""
    rows = []
    for tgid, (cgroup, container_id, syscalls) in enumerate(groups, start=1):
        process = Process(comm="x", exe="x", cgroup=cgroup, container_id=container_id or None, cwd="/")
        rows.append(msgspec.structs.replace(member_row(WATCHED, tgid, syscalls), process=process))
    samples, _ = series(poll(2, (proc(1),)), rows, HEALTH, MetricsMemory())
    collector = SnapshotCollector()
    collector.publish(samples)
    return exposition_body(metrics_page(collector, version="0.0-test")).decode("utf-8")


IDS = [f"{n:064x}" for n in range(1, 5)]
# Texts that look like the parts of a label set the filters look for, and the escapes.
TRAPS = [
    "x,container_id=",
    'a",container_id="' + IDS[0],
    '"sendto"',
    'syscall="sendto"',
    "\\",
    '\\"',
    "\n",
    "other",
    "}",
    " ",
]
hostile = st.sampled_from(TRAPS) | st.text(max_size=12)
container_ids = st.sampled_from(IDS) | hostile
syscall_names = st.sampled_from(["sendto", "read", "other", *TRAPS]) | st.text(min_size=1, max_size=8)
WANTABLE = [
    names.CONTAINER_SYSCALL_RATE,
    names.CONTAINER_CPU_CORES,
    names.LAST_POLL_TIMESTAMP_SECONDS,
    names.CONTAINER_SYSCALLS_TOTAL,
    names.CONTAINER_INFO,
    "croft_container_syscall",  # a prefix of a served name
    "process_cpu_seconds_total",  # prometheus_client's, after croft's series
]
rates = st.floats(0.001, 1e9, allow_nan=False)


@given(
    groups=st.lists(
        st.tuples(hostile, container_ids, st.dictionaries(syscall_names, rates, min_size=1, max_size=4)),
        min_size=1,
        max_size=4,
    ),
    wanted=st.sets(st.sampled_from(WANTABLE), min_size=1),
    data=st.data(),
)
@example(
    groups=[("x,container_id=", IDS[0], {"sendto": 1.0}), ('"sendto"', IDS[1], {"read": 2.0})],
    wanted={names.CONTAINER_SYSCALL_RATE, names.CONTAINER_CPU_CORES},
    data=None,
)
@example(
    groups=[('\\"\n', '\\"\n', {"\n": 2.0, '\\"': 1.0})],
    wanted={names.CONTAINER_SYSCALL_RATE, names.CONTAINER_CPU_CORES},
    data=None,
)
def test_filters_keep_exactly_the_full_parse_samples_that_pass_on_the_served_body(
    groups: list[tuple[str, str, dict[str, float]]], wanted: set[str], data: st.DataObject | None
) -> None:
    body = served(groups)
    # the values to keep: some of those served (and maybe others), so that the filters bite
    served_ids = [container_id for _, container_id, _ in groups]
    served_calls = sorted({call for *_, calls in groups for call in calls})
    if data is None:  # an example: the first container, every syscall
        syscalls, ours = set(served_calls), {served_ids[0]}
    else:
        syscalls = data.draw(st.sets(st.sampled_from(served_calls) | syscall_names, max_size=2))
        ours = data.draw(st.sets(st.sampled_from(served_ids) | container_ids, max_size=3))
    where = {names.CONTAINER_SYSCALL_RATE: (names.LABEL_SYSCALL, frozenset(syscalls))}
    only = (names.LABEL_CONTAINER_ID, frozenset(ours))
    expected = reference(body, frozenset(wanted), where, only)
    assert filtered_both_ways(body, wanted, where, only) == (expected, expected)


label_keys = st.sampled_from(["container_id", "syscall", "cgroup", "xcontainer_id", "container_idx", "a"])
blanks = st.sampled_from(["", " ", "\t", " \t"])
NAMES = ["croft_a", "croft_ab", "croft_b", "c"]
free_samples = st.builds(
    Sample,
    name=st.sampled_from(NAMES),
    labels=st.dictionaries(label_keys, st.sampled_from(IDS) | hostile, max_size=3).map(
        lambda d: tuple(sorted(d.items()))
    ),
    value=st.floats(allow_nan=False),
    timestamp_ms=st.none() | st.integers(0, 2**53),
)


@st.composite
def loose_text(draw: st.DrawFn, samples: list[Sample]) -> str:
    """`samples` written with the freedom the format gives: blanks around the line, the labels and
    their `=`, labels in any order, a trailing comma, `{}` for no labels, a tab before the value;
    comments between lines (naming metrics too), and a name's lines not always together."""
    lines = []
    for sample in samples:
        pairs = [
            f'{draw(blanks)}{key}{draw(blanks)}={draw(blanks)}"{escape_label_value(value)}"{draw(blanks)}'
            for key, value in draw(st.permutations(sample.labels))
        ]
        block = ",".join(pairs) + ("," if pairs and draw(st.booleans()) else "")
        head = f"{sample.name}{{{block}}}" if pairs or draw(st.booleans()) else sample.name
        tail = "" if sample.timestamp_ms is None else f"{draw(blanks)} {sample.timestamp_ms}"
        if draw(st.booleans()):  # a comment between lines, as between families
            lines.append(f"# HELP {sample.name} {draw(st.sampled_from(['h', *NAMES]))}")
        lead = draw(st.sampled_from(["", " ", "\t", "\r"]))
        lines.append(f"{lead}{head}{draw(st.sampled_from([' ', chr(9)]))}{format_value(sample.value)}{tail}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@given(st.data(), st.lists(free_samples, max_size=6))
def test_filters_keep_exactly_the_full_parse_samples_that_pass_on_loose_text(
    data: st.DataObject, samples: list[Sample]
) -> None:
    text = data.draw(loose_text(samples))
    assert parse_exposition(text) == tuple(samples)
    wanted = frozenset(data.draw(st.sets(st.sampled_from(["croft_a", "croft_b", "croft_zz"]), min_size=1)))
    present = st.sampled_from(sorted({value for s in samples for _, value in s.labels} | set(IDS)))
    where = {"croft_a": ("syscall", frozenset(data.draw(st.sets(present | hostile, max_size=2))))}
    only = ("container_id", frozenset(data.draw(st.sets(present | hostile, max_size=2))))
    expected = reference(text, wanted, where, only)
    assert filtered_both_ways(text, wanted, where, only) == (expected, expected)


def starts_as_specified(
    text: str, names: tuple[str, ...], needles: tuple[tuple[str, ...] | None, ...]
) -> list[int]:
    """_linescan.starts as its comment states it, line by line: after blanks (whitespace but the
    newline), a name not followed by a name's character, and for a name with needles one of them."""
    found, at = [], 0
    for line in text.split("\n"):
        rest = line[re.match(r"[^\S\n]*", line).end() :]  # type: ignore[union-attr]
        for name, rule in zip(names, needles, strict=True):
            after = rest[len(name) : len(name) + 1]
            if (
                name
                and rest.startswith(name)
                and re.fullmatch(r"[a-zA-Z0-9_:]", after) is None
                and (rule is None or any(needle in line for needle in rule))
            ):
                found.append(at)
                break
        at += len(line) + 1
    return found


def test_the_native_line_scanner_is_built() -> None:
    assert exposition._linescan is not None, "make install builds it (setup.py)"


# Names, their prefixes and what follows them; quotes and braces; ASCII and latin-1 blanks (\x1c,
# \x85, \xa0 are blanks to str.isspace); é (latin-1, not a blank); \u2003 (a blank above latin-1).
NEEDLES = ['"1"', "1", "}", "a b", " a", "\u2003", "a\nb"]
TEXT_PIECES = [
    "a",
    "ab",
    "b",
    ":",
    "_",
    "1",
    "{",
    "}",
    '"',
    '"1"',
    " ",
    "\t",
    "\r",
    "\n",
    "\x1c",
    "\x85",
    "\xa0",
    "é",
]


@given(
    st.lists(st.sampled_from([*TEXT_PIECES, "\u2003"]), max_size=30).map("".join),
    st.lists(
        st.tuples(
            st.sampled_from(["a", "ab", "b", "a:", "é", "\u2003a"]),
            st.none() | st.lists(st.sampled_from(NEEDLES), max_size=2).map(tuple),
        ),
        max_size=3,
    ),
)
@example(text="ab 1\na 1", wanted=[("a", None)])  # a name goes on: another name
@example(text="\x85a 1\n\x1cb 2", wanted=[("a", None), ("b", None)])  # blanks above ASCII
@example(text=" a 1", wanted=[("a", (" a",))])  # a needle in the blanks before the name
def test_the_native_line_scanner_finds_the_lines_its_comment_states(
    text: str, wanted: list[tuple[str, tuple[str, ...] | None]]
) -> None:
    assert exposition._linescan is not None
    names_, needles = tuple(name for name, _ in wanted), tuple(rule for _, rule in wanted)
    found = exposition._linescan.starts(text, names_, needles)
    if any(ord(char) > 255 for char in text):
        assert found is None  # the caller reads such a text the Python way
    else:
        assert found == starts_as_specified(text, names_, needles)


def test_a_malformed_line_the_filters_want_raises_naming_its_line() -> None:
    text = f'croft_ok 1\ncroft_a{{container_id="{IDS[0]}"}} 1\ncroft_a{{container_id="{IDS[0]}" 2\n'
    with pytest.raises(BadExposition, match="line 3: malformed label set"):
        parse_exposition(text, {"croft_a"}, None, ("container_id", {IDS[0]}))
    # another container's line, or one without the wanted syscall, is skipped unparsed
    assert parse_exposition(text, {"croft_a"}, None, ("container_id", {IDS[1]})) == ()
    assert parse_exposition(text, {"croft_a"}, {"croft_a": ("syscall", {"sendto"})}) == ()


@given(
    ours=st.lists(st.tuples(hostile, rates), min_size=1, max_size=3),
    others=st.lists(
        st.tuples(hostile, container_ids, st.dictionaries(syscall_names, rates, min_size=1, max_size=4)),
        max_size=4,
    ),
)
def test_other_containers_on_the_collectors_never_change_the_estimate(
    ours: list[tuple[str, float]], others: list[tuple[str, str, dict[str, float]]]
) -> None:
    """What croft scale reads from the served bodies is its pods' sendto rates, whatever the cgroups
    hold and whatever else the collectors serve: complete, every container counted, the summed rate."""
    ids = [f"{0xD0 + n:064x}" for n in range(len(ours))]
    groups = [
        (cgroup, cid, {"sendto": rate, "read": 1.0}) for (cgroup, rate), cid in zip(ours, ids, strict=True)
    ]
    groups += [group for group in others if group[1] not in ids]
    bodies = [served(groups[0::2]), served(groups[1::2])]
    now_ms = 1_700_000_002_000  # the poll of `served`
    seen = Observations(
        now_ms,
        tuple(PodView(f"web-{n}", (cid,)) for n, cid in enumerate(ids)),
        tuple(CollectorScrape(f"croft-{n}", now_ms, body) for n, body in enumerate(bodies)),
    )
    config = ScaleConfig("sendto", 2.0, 50)
    estimate = estimate_rate(seen, config)
    assert estimate.complete, estimate.gaps
    assert estimate.containers_counted == len(ids)
    assert math.isclose(estimate.request_rate, sum(round(rate, PER_S_DIGITS) for _, rate in ours) / 2.0)
