"""The Prometheus text exposition subset: parsing, escaping and a render/parse round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.metrics.exposition import (
    BadExposition,
    Sample,
    escape_label_value,
    format_value,
    parse_exposition,
    render_exposition,
)

TEXT = r"""# HELP croft_container_syscall_rate Syscalls per second.
# TYPE croft_container_syscall_rate gauge
croft_container_syscall_rate{container_id="abc",syscall="sendto"} 20.5
croft_container_syscall_rate{syscall="read", container_id="abc",} 3e2 1700000000000
# a comment

croft_rows_written_total 12
croft_odd{cgroup="/kube\"pods\"/a\\b\nc"} NaN
croft_inf{} +Inf
"""


def test_parses_samples_labels_values_and_timestamps() -> None:
    samples = parse_exposition(TEXT)
    assert [s.name for s in samples] == [
        "croft_container_syscall_rate",
        "croft_container_syscall_rate",
        "croft_rows_written_total",
        "croft_odd",
        "croft_inf",
    ]
    assert samples[0].labels == (("container_id", "abc"), ("syscall", "sendto"))
    assert samples[0].value == 20.5
    assert samples[1].label("syscall") == "read"
    assert samples[1].value == 300.0
    assert samples[1].timestamp_ms == 1700000000000
    assert samples[2].labels == ()
    assert samples[3].label("cgroup") == '/kube"pods"/a\\b\nc'
    assert math.isnan(samples[3].value)
    assert samples[4].value == math.inf


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('croft_a{x="1" 2', "malformed label set"),
        ('croft_a{x="1"}', "expected a value"),
        ("croft_a twelve", "is not a sample value"),
        ("croft_a 1 2 3", "expected a value"),
        ("croft_a 1 soon", "is not a timestamp"),
        ('croft_a{x="\\q"} 1', "unknown escape"),
        ("{x} 1", "no metric name"),
    ],
)
def test_malformed_lines_raise_naming_the_line(line: str, why: str) -> None:
    with pytest.raises(BadExposition, match=f"line 2: .*{why}"):
        parse_exposition("croft_ok 1\n" + line + "\n")


label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)
samples = st.builds(
    Sample,
    name=st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True),
    labels=st.dictionaries(label_names, st.text(max_size=12), max_size=3).map(
        lambda d: tuple(sorted(d.items()))
    ),
    value=st.floats(allow_nan=False),
    timestamp_ms=st.none() | st.integers(0, 2**53),
)


@given(st.lists(samples, max_size=8))
def test_render_then_parse_is_identity(items: list[Sample]) -> None:
    first = [item.name for item in items]
    grouped = sorted(items, key=lambda item: first.index(item.name))  # stable: each name's first place
    assert parse_exposition(render_exposition(items)) == tuple(grouped)


blanks = st.sampled_from(["", " ", "\t", " \t"])


@st.composite
def loose_text(draw: st.DrawFn, items: list[Sample]) -> str:
    """`items` written with the freedom the format gives: blanks around the line, the labels and
    their `=`, labels in any order, a trailing comma, `{}` for no labels, a tab before the value;
    comments between lines (naming metrics too), and a name's lines not always together."""
    lines = []
    for sample in items:
        pairs = [
            f'{draw(blanks)}{key}{draw(blanks)}={draw(blanks)}"{escape_label_value(value)}"{draw(blanks)}'
            for key, value in draw(st.permutations(sample.labels))
        ]
        block = ",".join(pairs) + ("," if pairs and draw(st.booleans()) else "")
        head = f"{sample.name}{{{block}}}" if pairs or draw(st.booleans()) else sample.name
        tail = "" if sample.timestamp_ms is None else f"{draw(blanks)} {sample.timestamp_ms}"
        if draw(st.booleans()):  # a comment between lines, as between families
            lines.append(f"# HELP {sample.name} {draw(st.sampled_from(['h', sample.name]))}")
        lead = draw(st.sampled_from(["", " ", "\t", "\r"]))
        lines.append(f"{lead}{head}{draw(st.sampled_from([' ', chr(9)]))}{format_value(sample.value)}{tail}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@given(st.data(), st.lists(samples, max_size=6))
def test_parses_every_spelling_the_format_allows(data: st.DataObject, items: list[Sample]) -> None:
    assert parse_exposition(data.draw(loose_text(items))) == tuple(items)
