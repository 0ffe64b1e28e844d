"""/metrics by the conventions Prometheus users know (cAdvisor's and node_exporter's): an OOM-kill
counter, memory named for what it is, syscalls counted whole, no stray `_created` gauge, pressure
as a 0-1 ratio once, a bounded and steady set of syscall series, gzip and OpenMetrics when asked.
The pages are checked by Prometheus' own promtool and prometheus_client's OpenMetrics parser."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from croft.adapters.http.metrics import (
    CONTENT_TYPE,
    OPENMETRICS_TYPE,
    SnapshotCollector,
    metrics_handler,
    metrics_page,
)
from croft.adapters.http.server import Request
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition
from croft.domain.metrics.series import MetricsMemory, series
from tests.helpers.cli import croft
from tests.helpers.rows import member_row
from tests.helpers.snapshots import HEALTH, WATCHED, poll, proc


def run(
    rates_by_poll: list[dict[str, float]], syscall_names: frozenset[str] | None = None
) -> tuple[Sample, ...]:
    """The samples after polls 2 s apart of one watched process making `rates_by_poll` calls/s."""
    memory = MetricsMemory()
    samples: tuple[Sample, ...] = ()
    for at, rates in enumerate(rates_by_poll):
        current = poll(2 * (at + 1), (proc(1),))
        samples, memory = series(current, [member_row(WATCHED, 1, rates)], HEALTH, memory, syscall_names)
    return samples


def named(samples: tuple[Sample, ...], name: str) -> dict[str, float]:
    return {s.label(names.LABEL_SYSCALL): s.value for s in samples if s.name == name}


def test_syscalls_are_counted_whole() -> None:
    """18.5 calls/s over 2 s is 37 calls; a rate the kernel's count makes (count / 2 s) counts it
    back exactly, never 36.998 or 37.000001."""
    counted = named(run([{"execve": 18.5, "read": 0.5}] * 4), names.CONTAINER_SYSCALLS_TOTAL)
    assert counted == {"execve": 37.0 * 3, "read": 1.0 * 3}  # the first poll has no interval yet
    assert all(value.is_integer() for value in counted.values())


def test_the_gauges_named_syscalls_are_the_ones_counted_most_and_do_not_move_with_one_poll() -> None:
    """30 syscalls, 24 named: the busiest so far keep their series when one poll's counts reorder
    them (every exec'd program makes execve, brk, ... once: counts that differ by one)."""
    steady = {f"s{i:02}": 100.0 - i for i in range(30)}
    noisy = {**steady, "s24": 78.0}  # one poll where the 25th is busier than the 24th (77/s)
    before = named(run([steady] * 5), names.CONTAINER_SYSCALL_RATE)
    after = named(run([steady] * 5 + [noisy]), names.CONTAINER_SYSCALL_RATE)
    assert set(before) == set(after) == {f"s{i:02}" for i in range(24)} | {"other"}
    assert after["other"] == pytest.approx(sum(noisy[f"s{i:02}"] for i in range(24, 30)))
    # without a past, one poll's rates decide (the first poll of a container)
    assert "s24" in named(run([noisy]), names.CONTAINER_SYSCALL_RATE)


def test_an_operators_list_names_only_those_syscalls_in_the_gauge_and_the_counter() -> None:
    rates = {"read": 10.0, "write": 5.0, "futex": 2.5, "epoll_wait": 0.5}
    samples = run([rates] * 3, frozenset({"read", "write", "sendto"}))
    assert named(samples, names.CONTAINER_SYSCALL_RATE) == {"read": 10.0, "write": 5.0, "other": 3.0}
    assert named(samples, names.CONTAINER_SYSCALLS_TOTAL) == {"read": 40.0, "write": 20.0, "other": 12.0}
    every = run([rates] * 3)
    assert set(named(every, names.CONTAINER_SYSCALLS_TOTAL)) == set(rates)


def test_oom_kills_are_a_counter_and_memory_says_which_memory_it_is() -> None:
    row = member_row(WATCHED, 1, {"read": 1.0})
    killed = msgspec.structs.replace(row, cgroup_usage=msgspec.structs.replace(row.cgroup_usage, oom_kills=3))
    samples, _ = series(poll(2, (proc(1),)), [killed], HEALTH, MetricsMemory())
    (oom,) = [s for s in samples if s.name == names.CONTAINER_OOM_EVENTS_TOTAL]
    assert oom.value == 3.0 and names.CONTAINER_OOM_EVENTS_TOTAL == "croft_container_oom_events_total"
    assert any(s.name == "croft_container_memory_usage_bytes" for s in samples)
    unread = msgspec.structs.replace(
        row, cgroup_usage=msgspec.structs.replace(row.cgroup_usage, oom_kills=None)
    )
    samples, _ = series(poll(2, (proc(1),)), [unread], HEALTH, MetricsMemory())
    assert not any(s.name == names.CONTAINER_OOM_EVENTS_TOTAL for s in samples)  # unread: no series
    served = {s.name for s in samples}
    assert names.CONTAINER_PRESSURE_RATIO in served  # pressure once, as a 0-1 ratio
    assert not any(name.endswith("_avg10") for name in served)


def page(accept: str = "", encoding: str = "") -> tuple[int, str, dict[str, str], bytes]:
    collector = SnapshotCollector()
    collector.publish(run([{"read": 12.0, "futex": 3.5}] * 3), 0.01)
    handler = metrics_handler(metrics_page(collector, "9.9.9"))
    headers = tuple((k, v) for k, v in (("Accept", accept), ("Accept-Encoding", encoding)) if v)
    answer = handler(Request("GET", "/metrics", "", headers))
    assert isinstance(answer.body, bytes)
    return answer.status, answer.content_type, dict(answer.headers), answer.body


def test_the_text_page_has_no_created_gauge_and_is_what_promtool_accepts() -> None:
    status, kind, _, body = page()
    assert (status, kind) == (200, CONTENT_TYPE)
    text = body.decode()
    assert "_created" not in text and "croft_poll_seconds_bucket" in text
    promtool_check(body)


def test_openmetrics_when_asked_as_prometheus_asks_and_its_parser_reads_it() -> None:
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    status, kind, _, body = page(accept)
    assert (status, kind) == (200, OPENMETRICS_TYPE)
    text = body.decode()
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["croft_container_syscalls"].type == "counter"
    assert families["croft_container_cpu_cores"].type == "gauge"
    assert families["croft_poll_seconds"].type == "histogram"
    calls = {s.labels["syscall"]: s.value for s in families["croft_container_syscalls"].samples}
    assert calls == {"read": 48.0, "futex": 14.0}
    # the same series as the text page
    text_page = {(s.name, s.labels, s.value) for s in parse_exposition(page()[3].decode())}
    om = {(s.name, tuple(sorted(s.labels.items())), s.value) for f in families.values() for s in f.samples}
    assert {x for x in text_page if x[0].startswith("croft_container_")} == {
        x for x in om if x[0].startswith("croft_container_")
    }


def test_gzip_when_the_client_accepts_it_as_the_go_client_answers() -> None:
    def steady(body: bytes) -> list[bytes]:  # the collector process's own figures move between two
        return [line for line in body.splitlines() if not line.startswith((b"process_", b"# HELP process_"))]

    plain = page()[3]
    status, _, headers, body = page(encoding="gzip, deflate")
    assert status == 200
    assert headers.get("Content-Encoding") == "gzip" and steady(gzip.decompress(body)) == steady(plain)
    assert "Content-Encoding" not in page(encoding="identity")[2]
    assert "Content-Encoding" not in page(encoding="gzip;q=0")[2]


def promtool_check(body: bytes) -> None:
    """Prometheus' own linter of an exposition (Debian's prometheus package, scripts/system-deps.sh)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed; `make test` installs it (scripts/system-deps.sh: prometheus)")
    done = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60)
    said = (done.stdout + done.stderr).decode().strip()
    assert done.returncode == 0 and not said, said


def test_a_name_that_is_not_a_syscall_is_refused_in_one_sentence(tmp_path: Path) -> None:
    trace = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "live"
    done = croft("run", "--replay", str(trace), "--dataset", str(tmp_path / "d.jsonl"),
                 "--metrics-syscalls", "read,rm -rf")  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "croft: --metrics-syscalls names 'rm -rf', which is not a syscall name; give names such as "
        "read,write,sendto separated by commas"
    ]
