"""signals.py's parsing: the steps, the pod's series in a real exposition, and polls as records."""

from __future__ import annotations

import pytest

import signals
from croft.domain.metrics.exposition import Sample, render_exposition
from croft.runs.load import RequestOutcome
from croft.runs.signals import Step

CID = "ab" * 32
OTHER = "cd" * 32


def body() -> str:
    def labels(cid: str, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((("cgroup", f"/kubepods/{cid}"), ("container_id", cid), *extra)))

    samples = [
        Sample("croft_container_syscall_rate", labels(CID, ("syscall", "sendto")), 20.0),
        Sample("croft_container_syscall_rate", labels(CID, ("syscall", "futex")), 99.0),
        Sample("croft_container_syscall_rate", labels(OTHER, ("syscall", "sendto")), 7.0),
        Sample("croft_container_ingress_rate", labels(CID, ("signal", "tcp_data_segments")), 10.0),
        Sample("croft_container_listen_backlog", labels(CID), 3.0),
        Sample("croft_container_unread_bytes", labels(CID), 300.0),
        Sample("croft_last_poll_timestamp_seconds", (), 1700000000.5),
    ]
    return render_exposition(samples)


def test_steps_parse_and_bad_ones_say_so() -> None:
    assert signals.parse_steps("5:40,10:30") == (Step(0, 40, 5.0), Step(40, 70, 10.0))
    with pytest.raises(SystemExit, match="rate:seconds"):
        signals.parse_steps("5-40")


def test_the_pods_series_are_picked_by_container_id_or_cgroup() -> None:
    last, values = signals.values_of(body(), signals.Pick(container_id=CID[:12]))
    assert last == 1700000000.5
    assert values == {
        "syscall:sendto": 20.0,
        "syscall:recvfrom": 0.0,
        "ingress:tcp_data_segments": 10.0,
        "listen_backlog": 3.0,
        "unread_bytes": 300.0,
    }
    assert signals.values_of(body(), signals.Pick(cgroup=f"/kubepods/{OTHER}"))[1]["syscall:sendto"] == 7.0


def test_records_rate_what_was_answered_between_polls() -> None:
    profile = signals.profile_of((Step(0, 10, 4.0),))
    outcomes = [RequestOutcome(s, s, 0.1, "ok") for s in (0.5, 1.0, 2.5, 3.0, 3.5)]
    polls = [(100.0, {"x": 1.0}), (102.0, {"x": 2.0}), (104.0, {"x": 3.0})]
    records = signals.records(polls, outcomes, 100.0, profile)
    assert [(r.t_s, r.offered_rps, r.served_rps, r.sent_rps) for r in records] == [
        (2.0, 4.0, 1.0, 1.0),
        (4.0, 4.0, 1.5, 1.5),
    ]
