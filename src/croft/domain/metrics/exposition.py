"""The Prometheus text exposition format (version 0.0.4), the subset croft's /metrics serves.

Parsed: `# HELP` / `# TYPE` / other comments (skipped), blank lines, and sample lines
`name{label="value",...} value [timestamp_ms]` with the format's escapes in label values (`\\\\`,
`\\"`, `\\n`) and the values `NaN`, `+Inf`, `-Inf`. A malformed line raises `BadExposition` naming the
line: a collector serving garbage is a collector that did not answer, never a partial truth.

Format: https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterable, Mapping

import attrs

from croft.domain.metrics import names as names

try:  # built with the package (setup.py); without it the lines are found the Python way
    from croft.domain.metrics import _linescan
except ImportError:  # pragma: no cover - tests/unit/test_exposition_filters.py runs both ways
    _linescan = None  # type: ignore[assignment]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME_RE = re.compile(_NAME)
# A label value: anything but a quote, a backslash or a newline, and escapes (written unrolled, as
# `(?:[^"\\\n]|\\.)*` is the same text for the regex engine to match but several times slower).
_VALUE = r'[^"\\\n]*(?:\\.[^"\\\n]*)*'
_LABEL_RE = re.compile(rf'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"({_VALUE})"[ \t]*(,|\}})')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_VALUES = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}
_NAME_CHARS = "a-zA-Z0-9_:"
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


LabelRule = tuple[str, Collection[str]]
"""(label, values): a filter on one label of a sample."""


@functools.lru_cache(maxsize=64)
def _head(names: frozenset[str], only: str) -> re.Pattern[str]:
    """At a line's start: blanks and a wanted name (group 1); with `only`, group 2 is `"value` of the
    line's first `only` label when the labels up to it are written as /metrics writes them
    (`k="v",...`, no blanks; the walk reads whole values, so a label's text never passes for a
    label), else empty. The walk takes a value to run to the next quote: that is the value only
    where the match holds no backslash and no newline, which the caller checks."""
    walk = f'(?:\\{{(?:{_PLAIN_PAIR},)*?{re.escape(only)}=("[^"]*)")?' if only else "()"
    alternatives = "|".join(re.escape(n) for n in sorted(names))
    return re.compile(f"[^\\S\\n]*({alternatives})(?![{_NAME_CHARS}]){walk}")


@functools.lru_cache(maxsize=64)
def _line_of(name: str) -> re.Pattern[str]:
    """A newline, blanks and `name`: where a line of `name` starts (one position before)."""
    return re.compile(f"\\n[^\\S\\n]*{re.escape(name)}(?![{_NAME_CHARS}])")


def _candidates(
    text: str, wanted: frozenset[str], rules: Mapping[str, tuple[str, frozenset[str]]]
) -> list[int]:
    """The starts of the lines of `text` that may hold a wanted sample, in text order (a superset:
    each is judged by `_head` and the parse). Every line of a name lies in its `_span` (found by
    `str.find`, much faster than the regex engine), so only that part is searched: a family written
    together, as an exposition must, and nothing else. In it, the lines of a name with a `where`
    rule are those around an occurrence of one of the rule's values as a label writes it
    (`"value"`, escaped: a value has one written form, so a line without it cannot carry it); the
    lines of another name are found by `_line_of`."""
    starts: set[int] = set()
    for name in wanted:
        span = _span(text, name)
        if span is None:
            continue
        begin, stop = span
        rule = rules.get(name)
        if rule is None:
            starts.add(begin)
            starts.update(m.start() + 1 for m in _line_of(name).finditer(text, begin, stop))
            continue
        for value in rule[1]:
            written = _quoted(value)
            at = text.find(written, begin, stop)
            while at >= 0:
                starts.add(text.rfind("\n", 0, at) + 1)
                at = text.find(written, at + 1, stop)
    return sorted(starts)


def _line_starts(
    text: str, wanted: frozenset[str], rules: Mapping[str, tuple[str, frozenset[str]]]
) -> list[int]:
    """`_candidates`, in one pass of the native scanner (_linescan.c: the lines that start with a
    wanted name and, for a name with a `where` rule, hold one of its values as a label writes it)
    where it is built and the text is latin-1, else the Python way."""
    if _linescan is not None:
        names = tuple(wanted)
        needles = tuple(
            None if name not in rules else tuple(_quoted(value) for value in rules[name][1]) for name in names
        )
        found = _linescan.starts(text, names, needles)
        if found is not None:
            return found
    return _candidates(text, wanted, rules)


def _span(text: str, name: str) -> tuple[int, int] | None:
    """(start, end) of the part of `text` that holds every line starting with `name` (None: no
    line can): from the line of its first occurrence to the comment that ends its first block of
    lines when `name` does not occur after it (a family written together, as an exposition must:
    the rest is then read once, forward, by `str.find`), else to the end of the line of its last
    occurrence."""
    first = text.find(name)
    if first < 0:
        return None
    begin = text.rfind("\n", 0, first) + 1
    line = _line_of(name).search(text, max(begin - 1, 0))
    if line is not None:
        # `# HELP`, which starts each family as croft and prometheus_client write them: a longer
        # needle, which str.find runs through about twice as fast as `\n#`
        after = text.find("\n# HELP ", line.end())
        if after < 0:
            after = text.find("\n#", line.end())
        if after < 0:
            return begin, len(text)
        if text.find(name, after) < 0:
            return begin, after
    stop = text.find("\n", text.rfind(name))
    return begin, len(text) if stop < 0 else stop


def parse_exposition(
    text: str,
    names: Collection[str] | None = None,
    where: Mapping[str, LabelRule] | None = None,
    only: LabelRule | None = None,
) -> tuple[Sample, ...]:
    """The samples of `text`, in order; raises `BadExposition` for a malformed line it parses.

    Without filters, every sample (every line is parsed). With `names`, exactly the samples of
    `parse_exposition(text)` that pass the filters (on any text that parses): `names`, only those
    metrics; `where[name] = (label, values)`, a sample of `name` only when its `label` is one of
    `values`; `only = (label, values)`, a sample that carries `label` only when it is one of
    `values`. Lines that cannot pass are skipped unparsed where that is cheap to tell (other
    metrics, lines without a `where` value, lines whose `only` label /metrics wrote with another
    value; see `_candidates`), so the cost follows the samples wanted, not every series served;
    such a line, even malformed, is not judged."""
    rules = {name: (label, frozenset(values)) for name, (label, values) in (where or {}).items()}
    key, values = (only[0], frozenset(only[1])) if only is not None else ("", frozenset[str]())
    if names is None:
        found = _parse_all(text)
    else:
        wanted = frozenset(names)
        head = _head(wanted, key)
        found = []
        for start in _line_starts(text, wanted, rules):
            match = head.match(text, start)
            if match is None:
                continue
            first, walked = match.group(2), match.group(0)
            if first and first[1:] not in values and "\\" not in walked and "\n" not in walked:
                continue
            end = text.find("\n", start)
            raw = text[start:] if end < 0 else text[start:end]
            line = raw.strip() if raw[:1].isspace() or raw[-1:].isspace() else raw
            try:
                found.append(parse_line(line, 0))
            except BadExposition:
                parse_line(line, text.count("\n", 0, start) + 1)
                raise
    if not rules and not key:
        return tuple(found)
    return tuple(s for s in found if _passes(s, rules, key, values))


def _passes(
    sample: Sample, rules: Mapping[str, tuple[str, frozenset[str]]], key: str, values: frozenset[str]
) -> bool:
    rule = rules.get(sample.name)
    if rule is not None and sample.label(rule[0]) not in rule[1]:
        return False
    value = sample.label(key) if key else None
    return value is None or value in values


def _parse_all(text: str) -> list[Sample]:
    samples: list[Sample] = []
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip() if raw[:1].isspace() or raw[-1:].isspace() else raw
        if line and not line.startswith("#"):
            samples.append(parse_line(line, line_no))
    return samples


def _quoted(value: str) -> str:
    """`value` as a label writes it, quotes included: its one written form, which a line that
    carries the value must hold."""
    return f'"{escape_label_value(value)}"'


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
