"""croft run's /metrics against its two readers: a real Prometheus (the Debian package) scraping a
running `croft run --replay`, and croft scale's exposition parser reading the very same body.

The replayed trace is the live capture of fixtures/traces/live with its cgroup renamed to a hostile
path (quotes, backslash, newline, unicode) that names a docker container, so the labels Prometheus
stores must come back exactly as croft saw them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard
from tests.helpers.cli import CROFT
from tests.helpers.net import free_port
from tests.helpers.prometheus import prometheus as prometheus_on_loopback
from tests.helpers.prometheus import query, wait_for

from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import parse_exposition
from croft.domain.metrics.query import query_string
from croft.domain.scaling.decision import (
    CollectorScrape,
    Observations,
    PodView,
    ScaleConfig,
    estimate_rate,
    scrape_query,
)

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "fixtures" / "traces" / "live"
RECORDED_CGROUP = "/croft-fixture"
CONTAINER_ID = "5eed" * 16
HOSTILE_CGROUP = f'/croft-fixture "q"\\b\nü容器🚀/docker-{CONTAINER_ID}.scope'
# The last poll of the trace (fixtures/golden/live.jsonl): its processes' syscalls summed.
LAST_POLL_S = 1796219117.721
WRITE_RATE = 50.0
CLOCK_NANOSLEEP_RATE = 51.0

pytestmark = pytest.mark.slow


def _renamed(value: object) -> object:
    if isinstance(value, str):
        return HOSTILE_CGROUP if value == RECORDED_CGROUP else value
    if isinstance(value, list):
        return [_renamed(v) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v) for k, v in value.items()}
    return value


def _with_psi_totals(polls: list[dict[str, object]]) -> list[dict[str, object]]:
    """The polls with PSI `some total` counters in their cgroup samples, which the capture predates:
    each resource's avg10 share of a 2 s poll, summed (microseconds)."""
    totals: dict[tuple[str, str], int] = {}
    for poll in polls:
        for sample in poll.get("cgroups", []):  # type: ignore[attr-defined]
            for resource in ("cpu", "memory", "io"):
                key = (json.dumps(sample["membership"]), resource)
                share = (sample.get(f"{resource}_pressure_avg10") or 0.0) / 100
                totals[key] = totals.get(key, 0) + round(share * 2_000_000)
                sample[f"{resource}_pressure_stalled_us"] = totals[key]
    return polls


def hostile_trace(directory: Path) -> Path:
    """fixtures/traces/live with every `/croft-fixture` cgroup path renamed to HOSTILE_CGROUP, and
    PSI totals added."""
    (source,) = TRACE.glob("*.jsonl.zst")
    with source.open("rb") as raw:
        lines = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)).read().splitlines()
    polls = _with_psi_totals([_renamed(json.loads(line)) for line in lines[1:]])  # type: ignore[misc]
    out = [lines[0]] + [json.dumps(poll).encode() for poll in polls]
    directory.mkdir()
    (directory / source.name).write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(out) + b"\n"))
    return directory


@pytest.fixture(scope="module")
def croft_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The /metrics URL of a `croft run --replay` lingering after its last poll."""
    tmp = tmp_path_factory.mktemp("croft-metrics")
    trace = hostile_trace(tmp / "trace")
    port = free_port()
    log = (tmp / "croft.log").open("wb")
    command = [
        sys.executable,
        "-m",
        "croft",
        "run",
        "--replay",
        str(trace),
        "--dataset",
        str(tmp / "ds.jsonl"),
    ]
    croft = subprocess.Popen(
        [*command, "--metrics-addr", f"127.0.0.1:{port}", "--linger", "300"], stderr=log, cwd=tmp
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:

        def served() -> bool:
            if croft.poll() is not None:
                pytest.fail(f"croft run exited {croft.returncode}: {(tmp / 'croft.log').read_text()}")
            return names.ROWS_WRITTEN_TOTAL in httpx.get(url, timeout=2).text

        wait_for("croft run's /metrics", served)
        yield url
    finally:
        croft.send_signal(signal.SIGTERM)
        code = croft.wait(timeout=30)
        log.close()
    assert code == 0, (tmp / "croft.log").read_text()


@pytest.fixture(scope="module")
def prometheus(croft_metrics: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus on loopback scraping croft every second; its base URL."""
    target = croft_metrics.removeprefix("http://").removesuffix("/metrics")
    with prometheus_on_loopback({"croft": target}, tmp_path_factory.mktemp("prometheus")) as base:
        yield base


def test_prometheus_stores_the_rates_and_hostile_labels_croft_serves(prometheus: str) -> None:
    def write_rate() -> list[dict]:
        return query(prometheus, f'{names.CONTAINER_SYSCALL_RATE}{{syscall="write"}}')

    (series,) = wait_for("Prometheus to have scraped croft", write_rate)
    assert float(series["value"][1]) == WRITE_RATE
    assert series["metric"][names.LABEL_CONTAINER_ID] == CONTAINER_ID
    assert series["metric"][names.LABEL_CGROUP] == HOSTILE_CGROUP
    assert series["metric"]["job"] == "croft"
    (sleeps,) = query(prometheus, f'{names.CONTAINER_SYSCALL_RATE}{{syscall="clock_nanosleep"}}')
    assert float(sleeps["value"][1]) == CLOCK_NANOSLEEP_RATE
    (up,) = query(prometheus, 'up{job="croft"}')
    assert up["value"][1] == "1"
    by_container = f'sum by (container_id) ({names.CONTAINER_SYSCALL_RATE}{{container_id="{CONTAINER_ID}"}})'
    (total,) = query(prometheus, by_container)
    assert float(total["value"][1]) == WRITE_RATE + CLOCK_NANOSLEEP_RATE
    (last_poll,) = query(prometheus, names.LAST_POLL_TIMESTAMP_SECONDS)
    assert float(last_poll["value"][1]) == LAST_POLL_S
    (written,) = query(prometheus, names.ROWS_WRITTEN_TOTAL)
    assert float(written["value"][1]) > 0


def test_croft_scale_parser_reads_the_rates_off_croft_runs_real_body(croft_metrics: str) -> None:
    body = httpx.get(croft_metrics, timeout=5).text
    now_ms = int(LAST_POLL_S * 1000) + 1000
    observations = Observations(
        now_ms=now_ms,
        pods=(PodView("web-0", (CONTAINER_ID,)),),
        scrapes=(CollectorScrape("croft-node-0", now_ms, body),),
    )
    config = ScaleConfig(syscall="write", calls_per_request=2.0, cpu_per_request_ms=50.0)
    estimate = estimate_rate(observations, config)
    assert estimate.gaps == ()
    assert estimate.containers_counted == 1
    assert estimate.request_rate == WRITE_RATE / 2.0
    every = parse_exposition(body)
    container_series = [s for s in every if s.name.startswith("croft_container_")]
    assert container_series
    assert {s.label(names.LABEL_CGROUP) for s in container_series} == {HOSTILE_CGROUP}


def test_croft_run_answers_croft_scales_query_with_only_its_series_and_the_same_estimate(
    croft_metrics: str,
) -> None:
    config = ScaleConfig(syscall="write", calls_per_request=2.0, cpu_per_request_ms=50.0)
    asked = httpx.get(f"{croft_metrics}?{query_string(scrape_query(config))}", timeout=5)
    assert asked.status_code == 200
    samples = parse_exposition(asked.text)
    assert {(s.name, s.label(names.LABEL_SYSCALL)) for s in samples} == {
        (names.LAST_POLL_TIMESTAMP_SECONDS, None),
        (names.CONTAINER_CPU_CORES, None),
        (names.CONTAINER_SYSCALL_RATE, "write"),
    }
    assert {s.label(names.LABEL_CGROUP) for s in samples if s.name != names.LAST_POLL_TIMESTAMP_SECONDS} == {
        HOSTILE_CGROUP
    }
    now_ms = int(LAST_POLL_S * 1000) + 1000
    pods = (PodView("web-0", (CONTAINER_ID,)),)
    whole = httpx.get(croft_metrics, timeout=5).text
    estimates = [
        estimate_rate(Observations(now_ms, pods, (CollectorScrape("croft-node-0", now_ms, body),)), config)
        for body in (asked.text, whole)
    ]
    assert estimates[0] == estimates[1] and estimates[0].request_rate == WRITE_RATE / 2.0
    assert len(asked.content) * 10 < len(whole.encode())
    bad = httpx.get(f"{croft_metrics}?name[]=not-a-name", timeout=5)
    assert (bad.status_code, bad.text.count("\n")) == (400, 1)


def test_metrics_addr_taken_is_one_sentence_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        dataset = str(tmp_path / "d.jsonl")
        argv = ["run", "--replay", str(TRACE), "--dataset", dataset, "--metrics-addr", f"127.0.0.1:{port}"]
        done = subprocess.run(
            [CROFT, *argv],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "CROFT_METRICS_ADDR": ""},
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"croft: cannot listen on 127.0.0.1:{port} for --metrics-addr: Address already in use; "
        "choose another address or free that port"
    ]


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (["--linger", "5"], "--linger takes seconds >= 0 and needs --replay and --metrics-addr"),
        (["--linger", "-1", "--metrics-addr", "127.0.0.1:0"], "--linger must be a number of seconds in [0, "),
    ],
)
def test_linger_without_metrics_or_negative_is_one_sentence(
    tmp_path: Path, extra: list[str], sentence: str
) -> None:
    argv = ["run", "--replay", str(TRACE), "--dataset", str(tmp_path / "d.jsonl"), *extra]
    env = {k: v for k, v in os.environ.items() if k != "CROFT_METRICS_ADDR"}
    done = subprocess.run([CROFT, *argv], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"croft: {sentence}")


def test_promtool_finds_no_problem_in_croft_runs_real_body(croft_metrics: str) -> None:
    """`promtool check metrics` (Prometheus's own linter: naming, units, counters' _total, HELP)
    on the body croft run serves, self-metrics and histogram included."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed; scripts/system-deps.sh installs Debian's prometheus")
    body = httpx.get(croft_metrics, timeout=10).content
    for expected in (
        "croft_build_info{version=",
        "process_cpu_seconds_total",
        "croft_poll_seconds_bucket",
        "# TYPE croft_container_pressure_waiting_seconds_total counter\n"
        "croft_container_pressure_waiting_seconds_total{",
    ):
        assert expected.encode() in body
    checked = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()
    assert (checked.stdout + checked.stderr).strip() == b""


def test_healthz_and_the_landing_page_of_croft_run(croft_metrics: str) -> None:
    base = croft_metrics.removesuffix("/metrics")
    answer = httpx.get(base + "/healthz", timeout=10)
    # The replay's polls ended when it started lingering: current for 10 s, then stale.
    if answer.status_code == 200:
        assert answer.text.startswith("ok: last poll ")
    else:
        assert answer.status_code == 503 and answer.text.startswith("stale: last poll "), answer.text
    page = httpx.get(base + "/", timeout=10)
    assert page.status_code == 200
    for link in ("/metrics", "/healthz", "/dataset"):
        assert f'<a href="{link}">' in page.text


def test_prometheus_scrapes_openmetrics_and_whole_syscall_counters(prometheus: str) -> None:
    """Prometheus asks for OpenMetrics first, and gets it: its metadata names the syscall counter's
    family without `_total` (OpenMetrics' naming; a text-format scrape would name it with). The
    counter it stores counts whole calls, and the collector's `_created` gauge is gone."""

    def metadata() -> dict[str, Any]:
        answer = httpx.get(f"{prometheus}/api/v1/targets/metadata", params={"match_target": '{job="croft"}'})
        found = {m["metric"]: m for m in answer.json()["data"]}
        return found if "croft_container_syscalls" in found else {}

    found = wait_for("Prometheus to have stored croft's metadata", metadata)
    assert found["croft_container_syscalls"]["type"] == "counter"
    assert "croft_container_syscalls_total" not in found
    assert found["croft_poll_seconds"]["type"] == "histogram"
    stored = query(prometheus, f'{names.CONTAINER_SYSCALLS_TOTAL}{{container_id="{CONTAINER_ID}"}}')
    assert stored and all(float(s["value"][1]).is_integer() for s in stored), stored
    assert query(prometheus, "croft_poll_seconds_created") == []
