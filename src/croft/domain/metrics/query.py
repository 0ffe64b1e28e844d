"""Which series a /metrics answer holds: the query of `GET /metrics?name[]=<series>&<label>=<value>`.

- `name[]=<series>` (repeatable): only the series of those names, as prometheus_client's own HTTP
  server reads it (a name is what starts a line: a histogram's are `<name>_bucket`, `_sum`, `_count`);
- `<label>=<value>` (repeatable; the values of one label are alternatives): of the series that carry
  `label`, only those whose value is one given; a series without the label stays (so
  `container_id=<id>` keeps the collector's own series beside the container's).

Without a query, every series: what /metrics serves Prometheus. croft owns both ends: the collector
renders `select(samples, query)` (croft.adapters.http.metrics), croft scale asks with
`query_string(query)` and applies `select` to what it parsed, so a collector of a version that
ignores the query (and answers every series) gives it the same samples.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from urllib.parse import parse_qsl, urlencode

import attrs

from croft.domain.metrics.exposition import Sample

NAMES_PARAM = "name[]"
MAX_FIELDS = 10_000
"""The most `key=value` fields a query may hold (a bound on what one request makes the collector do)."""

_SERIES_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_EXAMPLE = "e.g. /metrics?name[]=croft_container_cpu_cores&container_id=<64-hex id>"


class BadQuery(ValueError):
    """A /metrics query that is not `name[]=<series>&<label>=<value>`; the message says what and how
    to ask instead."""


@attrs.frozen
class SeriesQuery:
    """`names`: the series names kept (None: every name); `labels`: (label, values) sorted by label,
    each keeping, of the series that carry the label, those whose value is one of `values`."""

    names: frozenset[str] | None = None
    labels: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def of(
        cls, names: Collection[str] | None = None, labels: Mapping[str, Collection[str]] | None = None
    ) -> SeriesQuery:
        """The query for `names` (None: every name) and `labels` (label: its values)."""
        rules = tuple(sorted((label, frozenset(values)) for label, values in (labels or {}).items()))
        return cls(None if names is None else frozenset(names), rules)

    @property
    def everything(self) -> bool:
        """True for the empty query: every series, what /metrics serves without one."""
        return self.names is None and not self.labels

    def keeps(self, name: str, labels: Iterable[tuple[str, str]]) -> bool:
        """Whether the series `name` with `labels` ((label, value) pairs) is one the query asks for."""
        if self.names is not None and name not in self.names:
            return False
        for label, value in labels:
            for rule_label, values in self.labels:
                if label == rule_label and value not in values:
                    return False
        return True


EVERY = SeriesQuery()
"""The empty query: every series."""


def select(samples: Iterable[Sample], query: SeriesQuery) -> tuple[Sample, ...]:
    """The samples the query keeps, in their order (all of them for the empty query)."""
    if query.everything:
        return tuple(samples)
    return tuple(s for s in samples if query.keeps(s.name, s.labels))


def parse_query(text: str) -> SeriesQuery:
    """The query of a /metrics URL (the part after `?`, percent-encoded as a browser or httpx writes
    it; empty fields are ignored); raises `BadQuery` naming the first field that is neither
    `name[]=<series name>` nor `<label name>=<value>`."""
    fields = "&".join(field for field in text.split("&") if field)
    try:
        pairs = parse_qsl(
            fields, keep_blank_values=True, strict_parsing=True, errors="strict", max_num_fields=MAX_FIELDS
        )
    except ValueError as exc:  # a field without `=`, too many fields, percent-escapes that are not UTF-8
        raise BadQuery(f"/metrics query {text[:80]!r} is not key=value fields ({exc}); {_EXAMPLE}") from None
    names: set[str] | None = None
    labels: dict[str, set[str]] = {}
    for key, value in pairs:
        if key == NAMES_PARAM:
            if _SERIES_NAME.fullmatch(value) is None:
                raise BadQuery(f"/metrics query: name[]={value[:80]!r} is not a series name; {_EXAMPLE}")
            names = (names or set()) | {value}
        elif _LABEL_NAME.fullmatch(key) is not None:
            labels.setdefault(key, set()).add(value)
        else:
            raise BadQuery(
                f"/metrics query: {key[:80]!r} is neither name[] nor a label name; ask for series with "
                f"name[]=<series> and for label values with <label>=<value>, {_EXAMPLE}"
            )
    return SeriesQuery.of(names, labels)


def query_string(query: SeriesQuery) -> str:
    """`query` as the part of a /metrics URL after `?` (empty for the empty query), in a fixed order:
    `parse_query(query_string(q)) == q`."""
    names = [(NAMES_PARAM, name) for name in sorted(query.names or ())]
    labels = [(label, value) for label, values in query.labels for value in sorted(values)]
    return urlencode(names + labels)
