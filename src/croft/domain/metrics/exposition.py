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
from collections.abc import Iterable

import attrs

from croft.domain.metrics import names as names

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME_RE = re.compile(_NAME)
# A label value: anything but a quote, a backslash or a newline, and escapes (written unrolled, as
# `(?:[^"\\\n]|\\.)*` is the same text for the regex engine to match but several times slower).
_VALUE = r'[^"\\\n]*(?:\\.[^"\\\n]*)*'
_LABEL_RE = re.compile(rf'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"({_VALUE})"[ \t]*(,|\}})')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_VALUES = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}
_PAIR = rf'[a-zA-Z_][a-zA-Z0-9_]*="{_VALUE}"'
# A sample line as /metrics writes it: name, `{k="v",...}` (no blanks), one space, the value and
# maybe one space and a timestamp; what `parse_line` reads the long way reads the same from it.
_CANON_LINE_RE = re.compile(rf"({_NAME})(?:\{{((?:{_PAIR})(?:,{_PAIR})*)?\}})? (\S+)(?: (\S+))?")
_CANON_PAIR_RE = re.compile(rf'([a-zA-Z_][a-zA-Z0-9_]*)="({_VALUE})"')
# The same for a line without backslashes or newlines (nearly every line /metrics serves): a value is
# then anything up to the next quote, which the regex engine runs through several times faster.
_PLAIN_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"'
_PLAIN_LINE_RE = re.compile(rf"({_NAME})(?:\{{((?:{_PLAIN_PAIR})(?:,{_PLAIN_PAIR})*)?\}})? (\S+)(?: (\S+))?")
_PLAIN_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


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
    plain = "\\" not in line and "\n" not in line
    canon = (_PLAIN_LINE_RE if plain else _CANON_LINE_RE).fullmatch(line)
    if canon is not None:  # as /metrics writes it: the same sample, found with fewer steps
        name, block, value, stamp = canon.groups()
        if not block:
            labels: tuple[tuple[str, str], ...] = ()
        elif plain:
            labels = tuple(sorted(_PLAIN_PAIR_RE.findall(block)))
        else:
            labels = tuple(sorted((k, _unescape(v, line_no)) for k, v in _CANON_PAIR_RE.findall(block)))
        timestamp = None if stamp is None else _stamp(stamp, line_no)
        return Sample(name, labels, _parse_value(value, line_no), timestamp)
    name_match = _NAME_RE.match(line)
    if name_match is None:
        raise BadExposition(f"line {line_no}: no metric name at the start")
    name = name_match.group(0)
    pos = name_match.end()
    labels = ()
    if pos < len(line) and line[pos] == "{":
        labels, pos = _parse_labels(line, pos, line_no)
    fields = line[pos:].split()
    if not fields or len(fields) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise BadExposition(f"line {line_no}: expected a value and an optional timestamp after the name")
    timestamp_ms = _stamp(fields[1], line_no) if len(fields) == 2 else None
    return Sample(name, labels, _parse_value(fields[0], line_no), timestamp_ms)


def _stamp(text: str, line_no: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadExposition(f"line {line_no}: {text!r} is not a timestamp in ms") from None


def parse_exposition(text: str) -> tuple[Sample, ...]:
    """The samples of `text`, in order: every sample line is parsed; raises `BadExposition` naming
    the first malformed line. A reader that wants some series picks them from the result
    (`croft.domain.metrics.query.select`); croft scale asks the collector for only those, so the
    text it parses is small."""
    samples: list[Sample] = []
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip() if raw[:1].isspace() or raw[-1:].isspace() else raw
        if line and not line.startswith("#"):
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


def render_openmetrics(samples: Iterable[Sample]) -> str:
    """`samples` in the OpenMetrics text format (1.0.0), for a scraper that asks for it: a family
    per name, as `render_exposition` groups them; a counter's family is named without its `_total`
    (OpenMetrics' rule) and its samples keep it; HELP escapes a double quote too. Without the
    closing `# EOF`, which the page writes once, after every family it holds."""
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.name, []).append(sample)
    lines: list[str] = []
    for name, members in families.items():
        counter = name.endswith("_total")
        family = name.removesuffix("_total") if counter else name
        lines.append(f"# HELP {family} {_help_line(name).replace(chr(34), chr(92) + chr(34))}")
        lines.append(f"# TYPE {family} {'counter' if counter else 'gauge'}")
        for sample in members:
            labels = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in sample.labels)
            head = f"{sample.name}{{{labels}}}" if labels else sample.name
            tail = "" if sample.timestamp_ms is None else f" {sample.timestamp_ms / 1000}"
            lines.append(f"{head} {format_value(sample.value)}{tail}")
    return "\n".join(lines) + "\n" if lines else ""


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
