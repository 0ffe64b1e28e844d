"""`GET /metrics?name[]=<series>&<label>=<value>`: the query (croft.domain.metrics.query) and the
collector answering it over HTTP with only the series asked for (croft.adapters.http.metrics)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, Info

from croft.adapters.http.metrics import MetricsPage, SnapshotCollector, exposition_body
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition, render_exposition
from croft.domain.metrics.query import EVERY, BadQuery, SeriesQuery, parse_query, query_string, select
from croft.domain.scaling.decision import ScaleConfig, scrape_query
from tests.helpers.scale import collector, served_samples

IDS = [f"{n:064x}" for n in range(1, 5)]
TEXT = (
    "croft_last 1\n"
    'croft_a{container_id="aa",syscall="x"} 1\n'
    'croft_a{syscall="y",container_id="aa"} 2\n'
    'croft_a{container_id="bb",syscall="x"} 3\n'
    "croft_a 4\n"
    'croft_b{container_id="bb"} 5\n'
)


def values(query: SeriesQuery) -> list[float]:
    return [s.value for s in select(parse_exposition(TEXT), query)]


def test_names_keep_only_those_series() -> None:
    assert values(SeriesQuery.of({"croft_b", "croft_last"})) == [1, 5]


def test_a_label_keeps_the_series_that_carry_it_with_one_of_the_values_and_those_without_it() -> None:
    assert values(SeriesQuery.of(None, {"syscall": {"x"}})) == [1, 1, 3, 4, 5]
    assert values(SeriesQuery.of({"croft_a"}, {"container_id": {"aa"}, "syscall": {"y", "z"}})) == [2, 4]
    assert values(EVERY) == [1, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("", EVERY),
        ("&&", EVERY),
        ("name[]=croft_a&name%5B%5D=croft_b", SeriesQuery.of({"croft_a", "croft_b"})),
        (
            "syscall=sendto&syscall=other&pod=",
            SeriesQuery.of(None, {"syscall": {"sendto", "other"}, "pod": {""}}),
        ),
        ("cgroup=%2Fkube+pods%2F%22a%22", SeriesQuery.of(None, {"cgroup": {'/kube pods/"a"'}})),
    ],
)
def test_parse_query(text: str, query: SeriesQuery) -> None:
    assert parse_query(text) == query


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("name[]", "not key=value fields"),
        ("name[]=croft_a&oops", "not key=value fields"),
        ("name[]=", "is not a series name"),
        ("name[]=croft-a", "is not a series name"),
        ("container-id=aa", "neither name\\[\\] nor a label name"),
        ("match[]=up", "neither name\\[\\] nor a label name"),
        ("pod=%ff", "not key=value fields"),
        ("&".join(["a=1"] * 10_001), "not key=value fields"),
    ],
)
def test_a_bad_query_is_one_sentence_saying_how_to_ask(text: str, why: str) -> None:
    with pytest.raises(BadQuery, match=why) as raised:
        parse_query(text)
    assert "/metrics?name[]=" in str(raised.value) and "\n" not in str(raised.value)


series_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)
queries = st.builds(
    SeriesQuery.of,
    st.none() | st.sets(series_names, min_size=1, max_size=3),
    st.dictionaries(label_names, st.sets(st.text(max_size=8), min_size=1, max_size=3), max_size=3),
)


@given(queries)
def test_a_query_reads_back_from_its_url(query: SeriesQuery) -> None:
    assert parse_query(query_string(query)) == query


label_sets = st.dictionaries(
    st.sampled_from(["container_id", "syscall", "x"]), st.sampled_from(["", "1", "2"])
)
sample_lists = st.lists(
    st.builds(
        Sample,
        name=st.sampled_from(["croft_a", "croft_b", "croft_c"]),
        labels=label_sets.map(lambda d: tuple(sorted(d.items()))),
        value=st.floats(allow_nan=False),
    ),
    max_size=8,
)


@given(sample_lists, queries)
def test_select_keeps_in_order_exactly_the_series_whose_name_and_labels_are_asked_for(
    samples: list[Sample], query: SeriesQuery
) -> None:
    kept = select(samples, query)
    assert list(kept) == [s for s in samples if s in kept]  # in order, nothing made up
    rules = dict(query.labels)
    for sample in samples:
        name_asked = query.names is None or sample.name in query.names
        labels_asked = all(value in rules[label] for label, value in sample.labels if label in rules)
        assert (sample in kept) == (name_asked and labels_asked)


GROUPS = [
    ("/kubepods/pod-a/" + IDS[0], IDS[0], {"sendto": 10.0, "read": 5.0, "futex": 1.0}),
    ('/odd "cgroup"\\path\n', IDS[1], {"sendto": 2.0, "recvfrom": 3.0}),
    ("/user.slice/x", "", {"write": 1.0}),
]


def test_the_collector_answers_only_the_series_asked_for_and_everything_without_a_query() -> None:
    samples = served_samples(GROUPS)
    query = SeriesQuery.of(
        {names.CONTAINER_SYSCALL_RATE, names.CONTAINER_CPU_CORES, names.LAST_POLL_TIMESTAMP_SECONDS},
        {names.LABEL_SYSCALL: {"sendto", "other"}, names.LABEL_CONTAINER_ID: {IDS[1]}},
    )
    with collector(samples) as (url, _):
        whole = httpx.get(f"{url}/metrics").text
        asked = httpx.get(f"{url}/metrics?{query_string(query)}").text
    assert asked == render_exposition(select(samples, query))
    assert [(s.name, s.label("container_id"), s.label("syscall")) for s in parse_exposition(asked)] == [
        (names.CONTAINER_SYSCALL_RATE, IDS[1], "sendto"),
        (names.CONTAINER_CPU_CORES, IDS[1], None),
        (names.LAST_POLL_TIMESTAMP_SECONDS, None, None),
    ]
    assert whole.startswith(render_exposition(samples))  # then the registry's: build info, process_*
    assert "process_cpu_seconds_total" in whole and "croft_build_info" in whole


def test_the_collectors_own_registry_is_filtered_sample_by_sample_by_the_same_query() -> None:
    registry = CollectorRegistry()
    Info(names.BUILD, "The croft version.", registry=registry).info({"version": "1.2"})
    Histogram(names.POLL_SECONDS, "Poll seconds.", buckets=(0.1, 1.0), registry=registry).observe(0.5)
    Counter("croft_things", "Things.", ["container_id"], registry=registry).labels(IDS[0]).inc(3)
    published = SnapshotCollector()
    published.publish(served_samples(GROUPS))
    page = MetricsPage(published, registry)
    # a query every series passes: the whole page, byte for byte
    assert exposition_body(page, parse_query("no_such_label=1")) == exposition_body(page)
    histogram = exposition_body(page, parse_query("name[]=croft_poll_seconds_count&name[]=croft_build_info"))
    assert histogram.decode().splitlines() == [
        "# HELP croft_build_info The croft version.",
        "# TYPE croft_build_info gauge",
        'croft_build_info{version="1.2"} 1.0',
        "# HELP croft_poll_seconds Poll seconds.",
        "# TYPE croft_poll_seconds histogram",
        "croft_poll_seconds_count 1.0",
    ]
    others = exposition_body(page, parse_query(f"name[]=croft_things_total&container_id={IDS[1]}"))
    assert others == b""
    assert b"croft_things_total" in exposition_body(page, parse_query(f"container_id={IDS[0]}"))


def test_a_bad_query_is_answered_400_with_its_sentence_and_the_collector_serves_on() -> None:
    with collector(served_samples(GROUPS)) as (url, _):
        bad = httpx.get(f"{url}/metrics?container-id=1")
        good = httpx.get(f"{url}/metrics?name[]={names.LAST_POLL_TIMESTAMP_SECONDS}")
    assert bad.status_code == 400
    assert bad.text.startswith("/metrics query: 'container-id' is neither name[] nor a label name")
    assert good.status_code == 200
    assert [s.name for s in parse_exposition(good.text)] == [names.LAST_POLL_TIMESTAMP_SECONDS]


def test_croft_scales_query_is_a_few_lines_of_a_busy_collectors_page() -> None:
    """Per container the scaler reads its CPU and two syscall rates of the ~40 series served."""
    calls = {f"call{c}": float(c + 1) for c in range(30)} | {"sendto": 9.0}
    groups = [(f"/kubepods/pod{n}/{n:064x}", f"{n:064x}", calls) for n in range(15)]
    samples = served_samples(groups)
    with collector(samples) as (url, _):
        whole = httpx.get(f"{url}/metrics").text
        asked = httpx.get(f"{url}/metrics?{query_string(scrape_query(ScaleConfig('sendto', 2.0, 50)))}").text
    assert len(parse_exposition(asked)) == 15 * 3 + 1
    assert len(asked) * 15 < len(whole)
