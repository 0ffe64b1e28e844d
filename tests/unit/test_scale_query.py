"""croft scale asks each collector for only the series its estimate reads (`scrape_query`) and
decides from the small answer what it decided from whole pages; a collector of an older version that
ignores the query and answers the whole page gives the same decisions."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.domain.collector import PER_S_DIGITS
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition
from croft.domain.metrics.query import select
from croft.domain.scaling.decision import (
    CollectorScrape,
    Observations,
    PodView,
    ScaleConfig,
    estimate_rate,
    scrape_query,
)
from croft.domain.scaling.record import RecordedPoll, decode_poll, replay
from tests.helpers.scale import SERVED_AT_MS, served_samples

REPO = Path(__file__).resolve().parents[2]
CONFIG = ScaleConfig("sendto", 2.06, 50)


def page_of(samples: tuple[Sample, ...]) -> tuple[bytes, bytes]:
    """(the whole /metrics page, the answer to croft scale's query) of a collector publishing
    `samples`, as croft.adapters.http.metrics renders them."""
    published = SnapshotCollector()
    published.publish(samples)
    page = metrics_page(published, version="0.0-test")
    return exposition_body(page), exposition_body(page, scrape_query(CONFIG))


def with_the_rest(samples: tuple[Sample, ...]) -> tuple[Sample, ...]:
    """`samples` (what croft scale reads) and, for each container in them, the other series a
    collector serves: more syscall rates, counters by syscall, memory, info."""
    extra: list[Sample] = []
    for sample in samples:
        if sample.name != names.CONTAINER_CPU_CORES:
            continue
        labels = sample.labels
        for call, factor in (("read", 3.0), ("futex", 0.5), ("epoll_wait", 1.0)):
            by_call = tuple(sorted((*labels, (names.LABEL_SYSCALL, call))))
            extra.append(Sample(names.CONTAINER_SYSCALL_RATE, by_call, sample.value * 1000 * factor))
            extra.append(Sample(names.CONTAINER_SYSCALLS_TOTAL, by_call, 1e6 * factor))
        sendto = tuple(sorted((*labels, (names.LABEL_SYSCALL, "sendto"))))
        extra.append(Sample(names.CONTAINER_SYSCALLS_TOTAL, sendto, 123456.0))
        extra.append(Sample(names.CONTAINER_MEMORY_USAGE_BYTES, labels, 2e8))
        extra.append(Sample(names.CONTAINER_INFO, (*labels, (names.LABEL_POD, "web")), 1.0))
    return (*samples, *extra)


def answered(poll: RecordedPoll, whole: bool) -> RecordedPoll:
    """`poll` with each collector's body as a collector serving the recorded series and the rest
    answers croft scale: the whole page (`whole`, an older collector) or only what it asked."""
    scrapes = []
    for scrape in poll.observations.scrapes:
        if scrape.body is not None:
            full, asked = page_of(with_the_rest(parse_exposition(scrape.body)))
            scrape = attrs.evolve(scrape, body=(full if whole else asked).decode())
        scrapes.append(scrape)
    return attrs.evolve(poll, observations=attrs.evolve(poll.observations, scrapes=tuple(scrapes)))


@pytest.mark.parametrize(
    ("fixture", "actions"), [("burst", {"up", "down", "hold"}), ("outage", {"up", "hold"})]
)
def test_the_fixtures_decide_the_same_from_the_asked_series_as_from_whole_pages(
    fixture: str, actions: set[str]
) -> None:
    lines = (REPO / "fixtures" / "scale" / f"{fixture}.jsonl").read_text().splitlines()
    polls = [decode_poll(line) for line in lines]
    recorded = [(d.action, d.replicas, d.reason) for _, d in replay(polls, CONFIG)]
    for whole in (False, True):
        decided = [
            (d.action, d.replicas, d.reason) for _, d in replay([answered(p, whole) for p in polls], CONFIG)
        ]
        assert decided == recorded, "whole pages" if whole else "asked series"
    assert {action for action, *_ in recorded} == actions


def test_the_answer_holds_exactly_the_series_read_and_is_a_small_part_of_the_page() -> None:
    line = (REPO / "fixtures" / "scale" / "burst.jsonl").read_text().splitlines()[150]
    body = decode_poll(line).observations.scrapes[0].body or ""
    full, asked = page_of(with_the_rest(parse_exposition(body)))
    assert parse_exposition(asked.decode()) == parse_exposition(body)
    assert len(asked) * 4 < len(full)


hostile = st.sampled_from(['x,container_id="', '"sendto"', "\\", '\\"', "\n", "other", "}", " "]) | st.text(
    max_size=12
)
rates = st.floats(0.001, 1e9, allow_nan=False)


@given(
    ours=st.lists(st.tuples(hostile, rates), min_size=1, max_size=3),
    others=st.lists(
        st.tuples(
            hostile, hostile, st.dictionaries(hostile | st.just("sendto"), rates, min_size=1, max_size=4)
        ),
        max_size=4,
    ),
    whole=st.booleans(),
)
def test_other_containers_on_the_collectors_never_change_the_estimate(
    ours: list[tuple[str, float]], others: list[tuple[str, str, dict[str, float]]], whole: bool
) -> None:
    """What croft scale reads is its pods' sendto rates, whatever the cgroups hold, whatever else the
    collectors serve, and whether they answer its query or the whole page: complete, every container
    counted, the summed rate."""
    ids = [f"{0xD0 + n:064x}" for n in range(len(ours))]
    groups = [
        (cgroup, cid, {"sendto": rate, "read": 1.0}) for (cgroup, rate), cid in zip(ours, ids, strict=True)
    ]
    groups += [group for group in others if group[1] not in ids]
    bodies = [page_of(served_samples(groups[n::2]))[0 if whole else 1].decode() for n in range(2)]
    seen = Observations(
        SERVED_AT_MS,
        tuple(PodView(f"web-{n}", (cid,)) for n, cid in enumerate(ids)),
        tuple(CollectorScrape(f"croft-{n}", SERVED_AT_MS, body) for n, body in enumerate(bodies)),
    )
    estimate = estimate_rate(seen, CONFIG)
    assert estimate.complete, estimate.gaps
    assert estimate.containers_counted == len(ids)
    expected = sum(round(rate, PER_S_DIGITS) for _, rate in ours) / CONFIG.calls_per_request
    assert math.isclose(estimate.request_rate, expected)


def test_with_an_ingress_signal_the_query_asks_for_that_signal_and_the_queues() -> None:
    ours = ((names.LABEL_CONTAINER_ID, "a" * 64),)
    samples = [
        Sample(names.LAST_POLL_TIMESTAMP_SECONDS, (), 1.0),
        Sample(names.CONTAINER_CPU_CORES, ours, 0.5),
        Sample(names.CONTAINER_SYSCALL_RATE, (*ours, (names.LABEL_SYSCALL, "sendto")), 9.0),
        *(
            Sample(names.CONTAINER_INGRESS_RATE, (*ours, (names.LABEL_SIGNAL, signal)), 5.0)
            for signal in names.INGRESS_SIGNALS
        ),
        Sample(names.CONTAINER_LISTEN_BACKLOG, ours, 3.0),
        Sample(names.CONTAINER_UNREAD_BYTES, ours, 300.0),
        Sample(names.CONTAINER_MEMORY_USAGE_BYTES, ours, 1e9),
    ]
    query = scrape_query(attrs.evolve(CONFIG, signal="tcp_connections"))
    kept = [(s.name, s.label(names.LABEL_SIGNAL)) for s in select(samples, query)]
    assert kept == [
        (names.LAST_POLL_TIMESTAMP_SECONDS, None),
        (names.CONTAINER_CPU_CORES, None),
        (names.CONTAINER_INGRESS_RATE, "tcp_connections"),
        (names.CONTAINER_LISTEN_BACKLOG, None),
        (names.CONTAINER_UNREAD_BYTES, None),
    ]
