"""The Prometheus text exposition format (version 0.0.4), the subset croft's /metrics serves.

Parsed: `# HELP` / `# TYPE` / other comments (skipped), blank lines, and sample lines
`name{label="value",...} value [timestamp_ms]` with the format's escapes in label values (`\\\\`,
`\\"`, `\\n`) and the values `NaN`, `+Inf`, `-Inf`. A malformed line raises `BadExposition` naming the
line: a collector serving garbage is a collector that did not answer, never a partial truth.

Format: https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping

import attrs

from croft.domain.metrics import names as names

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME_RE = re.compile(_NAME)
_LABEL_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,|\})')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_VALUES = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}


class BadExposition(ValueError):
    """A line that is not valid exposition text; the message names the line number and why."""


@attrs.frozen
class Sample:
    """One sample: a metric name, its labels (sorted by name), a value and an optional timestamp."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp_ms: int | None = None

    def label(self, key: str) -> str | None:
        """The value of label `key`, or None when the sample does not carry it."""
        for name, value in self.labels:
            if name == key:
                return value
        return None


def _unescape(text: str, line_no: int) -> str:
    if "\\" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        char = match.group(1)
        if char not in _UNESCAPES:
            raise BadExposition(f"line {line_no}: unknown escape \\{char} in a label value")
        return _UNESCAPES[char]

    return _UNESCAPE_RE.sub(one, text)


def _parse_value(text: str, line_no: int) -> float:
    if text in _VALUES:
        return _VALUES[text]
    try:
        return float(text)
    except ValueError:
        raise BadExposition(f"line {line_no}: {text!r} is not a sample value") from None


def _parse_labels(line: str, start: int, line_no: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """Labels from the `{` at `start`; returns them sorted and the index after the closing `}`."""
    pos = start + 1
    labels: list[tuple[str, str]] = []
    rest = line[pos:].lstrip(" \t")
    if rest.startswith("}"):
        return (), line.index("}", pos) + 1
    while True:
        match = _LABEL_RE.match(line, pos)
        if match is None:
            raise BadExposition(f"line {line_no}: malformed label set")
        labels.append((match.group(1), _unescape(match.group(2), line_no)))
        pos = match.end()
        if match.group(3) == "}":
            break
        if line[pos:].lstrip(" \t").startswith("}"):
            pos = line.index("}", pos) + 1
            break
    labels.sort()
    return tuple(labels), pos


def parse_line(line: str, line_no: int = 1) -> Sample:
    """One sample line (not a comment, not blank) as a `Sample`; raises `BadExposition`."""
    name_match = _NAME_RE.match(line)
    if name_match is None:
        raise BadExposition(f"line {line_no}: no metric name at the start")
    name = name_match.group(0)
    pos = name_match.end()
    labels: tuple[tuple[str, str], ...] = ()
    if pos < len(line) and line[pos] == "{":
        labels, pos = _parse_labels(line, pos, line_no)
    fields = line[pos:].split()
    if not fields or len(fields) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise BadExposition(f"line {line_no}: expected a value and an optional timestamp after the name")
    timestamp_ms = None
    if len(fields) == 2:
        try:
            timestamp_ms = int(fields[1])
        except ValueError:
            raise BadExposition(f"line {line_no}: {fields[1]!r} is not a timestamp in ms") from None
    return Sample(name, labels, _parse_value(fields[0], line_no), timestamp_ms)


def _other_value(line: str, key: str, values: frozenset[str]) -> bool:
    """Whether `line` writes the label `key` (`name="`) as a label of its own with a plain value
    that is not in `values`."""
    at = line.find(key)
    if at <= 0 or line[at - 1] not in "{, \t":
        return False
    start = at + len(key)
    end = line.find('"', start)
    if end < 0:
        return False
    value = line[start:end]
    return "\\" not in value and value not in values


def _needles(needle: str | tuple[str, ...]) -> tuple[str, ...]:
    return (needle,) if isinstance(needle, str) else needle


def parse_exposition(
    text: str,
    names: Collection[str] | None = None,
    containing: Mapping[str, str | tuple[str, ...]] | None = None,
    only: tuple[str, frozenset[str]] | None = None,
) -> tuple[Sample, ...]:
    """Every sample of `text`, in order. With `names`, only samples of those metrics (other lines are
    skipped unparsed); with `containing`, a line of metric `name` is parsed only if it contains
    `containing[name]` as text, or one of them when a tuple (a cheap pre-filter: a caller wanting
    `syscall="sendto"` passes `'"sendto"'`); with `only` = (label, values) and `names`, a line whose
    `label` is written with a plain value (no escapes) outside `values` is skipped unparsed (so the
    cost follows the values wanted, not every series served). Raises `BadExposition` for a malformed
    line it parses."""
    samples: list[Sample] = []
    wanted = tuple(names) if names is not None else None
    key, values = (f'{only[0]}="', only[1]) if only is not None else ("", frozenset[str]())
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip() if raw[:1].isspace() or raw[-1:].isspace() else raw
        if wanted is not None:
            if not line.startswith(wanted) or (key and _other_value(line, key, values)):
                continue
            name_match = _NAME_RE.match(line)
            name = name_match.group(0) if name_match else ""
            if name not in wanted:
                continue
            needle = containing.get(name) if containing else None
            if needle is not None and not any(n in line for n in _needles(needle)):
                continue
        elif not line or line.startswith("#"):
            continue
        samples.append(parse_line(line, line_no))
    return tuple(samples)


def escape_label_value(value: str) -> str:
    """`value` escaped for a label: backslash, double quote and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as prometheus_client writes it (`floatToGoString`): `NaN`, `+Inf`, `-Inf`;
    a positive value with 7 or more digits before the point in Go's exponent form
    (`1234567.0` -> `1.234567e+06`); else Python's shortest repr."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _help_line(name: str) -> str:
    return names.HELP.get(name, name).replace("\\", "\\\\").replace("\n", "\\n")


def render_exposition(samples: Iterable[Sample]) -> str:
    """`samples` as the text /metrics serves for them: the one renderer of croft's series, used by the
    collector's /metrics (croft.adapters.http.metrics), croft.sim and croft scale's fixtures. Samples
    of one name are written together, as an exposition must, names in the order of their first
    sample (so a caller may pass them interleaved); a `# HELP` (the text of `names.HELP`, else the
    name) and a `# TYPE` (`counter` for `_total`, else `gauge`) line start each. Byte-equal to what
    prometheus_client's `generate_latest` writes for the same families (tests/unit/test_metrics_export.py
    proves it), and `parse_exposition(render_exposition(s)) == s` for samples grouped by name with
    sorted labels."""
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.name, []).append(sample)
    lines: list[str] = []
    family = None
    for sample in (s for members in families.values() for s in members):
        if sample.name != family:
            family = sample.name
            lines.append(f"# HELP {family} {_help_line(family)}")
            lines.append(f"# TYPE {family} {'counter' if family.endswith('_total') else 'gauge'}")
        labels = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in sample.labels)
        head = f"{sample.name}{{{labels}}}" if labels else sample.name
        tail = "" if sample.timestamp_ms is None else f" {sample.timestamp_ms}"
        lines.append(f"{head} {format_value(sample.value)}{tail}")
    return "\n".join(lines) + "\n" if lines else ""
