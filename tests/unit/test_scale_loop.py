"""croft scale's shell (against hand-written fakes), its HTTP adapter, and replays of the fixtures."""

from __future__ import annotations

import io
import json
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from croft.adapters.http.metrics import SnapshotCollector
from croft.adapters.kube.port import Denied, Unreachable
from croft.adapters.kube.scale_api import KubeClient
from croft.app.scale_loop import DENIAL_GRACE_S, ScaleLoop, Target
from croft.domain.collector.snapshot import Instant
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import parse_exposition
from croft.domain.metrics.query import parse_query, query_string
from croft.domain.scaling.decision import ScaleConfig, scrape_query
from croft.domain.scaling.record import decode_poll, replay
from croft.errors import UserError
from tests.helpers.cli import CROFT, croft
from tests.helpers.scale import CALLS_PER_REQUEST, cid, collector, collector_body, served_samples

REPO = Path(__file__).resolve().parents[2]
CONFIG = ScaleConfig("sendto", CALLS_PER_REQUEST, 50)
TARGET = Target("croft-exp", "webapp", "croft", "app.kubernetes.io/name=croft-collector", 9464)


class FakeCluster:
    """One Deployment with one running pod, one collector; records every patch."""

    def __init__(self) -> None:
        self.replicas = 1
        self.rps = 5.0
        self.down = False
        self.denied = False
        self.scaled: list[int] = []
        self.now_ms = 1_000_000

    def deployment(self, namespace: str, name: str) -> Mapping[str, Any]:
        if self.down:
            raise Unreachable("connection refused")
        if self.denied:
            raise Denied("the Kubernetes API denied get deployment croft-exp/webapp (HTTP 403): grant it")
        containers = [{"name": "web", "resources": {"limits": {"cpu": "1"}}}]
        return {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": self.replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"spec": {"containers": containers}}},
        }  # fmt: skip

    def pods(self, namespace: str, selector: str) -> list[Mapping[str, Any]]:
        if namespace == "croft":
            return [{"metadata": {"name": "croft-a"}, "status": {"phase": "Running"}}]
        status = {"containerStatuses": [{"containerID": f"containerd://{cid(1)}", "state": {"running": {}}}]}
        return [{"metadata": {"name": "webapp-1"}, "status": status}]

    def patch_scale(self, namespace: str, name: str, replicas: int) -> int:
        self.scaled.append(replicas)
        self.replicas = replicas
        return replicas

    def pod_metrics(self, namespace: str, pod: str, port: int, query: str = "") -> str:
        return collector_body(self.now_ms, {cid(1): self.rps * CALLS_PER_REQUEST})


class FakeClock:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def now(self) -> Instant:
        return Instant(unix_ms=self.cluster.now_ms, monotonic_ns=self.cluster.now_ms * 1_000_000)

    def sleep_until(self, monotonic_ns: int) -> bool:
        self.cluster.now_ms = monotonic_ns // 1_000_000
        return True

    def wake(self) -> None:
        pass


def loop(
    cluster: FakeCluster, dry_run: bool = False, record: io.StringIO | None = None
) -> tuple[ScaleLoop, list[str]]:
    lines: list[str] = []
    scaler = ScaleLoop(
        TARGET, CONFIG, cluster, FakeClock(cluster), dry_run=dry_run, log=lines.append, record=record
    )
    return scaler, lines


def test_a_burst_is_patched_once_after_two_polls() -> None:
    cluster = FakeCluster()
    cluster.rps = 75.0
    scaler, lines = loop(cluster)
    scaler.run(polls=4)
    assert cluster.scaled == [6]
    assert "decision=up" in lines[1]
    assert len(lines) == 4


def test_dry_run_never_patches() -> None:
    cluster = FakeCluster()
    cluster.rps = 75.0
    scaler, lines = loop(cluster, dry_run=True)
    scaler.run(polls=3)
    assert cluster.scaled == []
    assert lines[1].endswith(" dry_run=true")


def test_an_unreachable_api_holds_and_breaks_the_streak() -> None:
    cluster = FakeCluster()
    cluster.rps = 75.0
    scaler, lines = loop(cluster)
    assert scaler.poll() is not None
    cluster.down = True
    assert scaler.poll() is None
    cluster.down = False
    decision = scaler.poll()
    assert decision is not None and decision.action == "hold"
    assert lines[1].endswith('decision=hold reason=api-unreachable detail="connection refused"')
    assert cluster.scaled == []


def test_a_denial_inside_the_loop_holds_like_an_outage_then_passes() -> None:
    # A restarting kube-apiserver answers 403 until its RBAC cache is loaded.
    cluster = FakeCluster()
    cluster.rps = 75.0
    scaler, lines = loop(cluster)
    assert scaler.poll() is not None
    cluster.denied = True
    for _ in range(5):  # 10 s of denials, inside the grace
        assert scaler.poll() is None
        cluster.now_ms += 2000
    cluster.denied = False
    assert scaler.poll() is not None
    assert 'decision=hold reason=api-denied detail="the Kubernetes API denied get deployment' in lines[1]
    assert cluster.scaled == []  # the streak started over after the denials
    cluster.denied = True  # a new denial has the whole grace again
    for _ in range(int(DENIAL_GRACE_S // 2)):
        assert scaler.poll() is None
        cluster.now_ms += 2000


def test_a_denial_that_outlasts_the_grace_ends_the_run_as_a_user_error() -> None:
    cluster = FakeCluster()
    cluster.denied = True
    scaler, lines = loop(cluster)
    with pytest.raises(
        UserError, match=r"^the Kubernetes API denied get deployment croft-exp/webapp \(HTTP 403\)"
    ):
        while True:
            scaler.poll()
            cluster.now_ms += 2000
    assert (cluster.now_ms - 1_000_000) / 1000 > DENIAL_GRACE_S
    assert len(lines) == DENIAL_GRACE_S // 2 + 1


@pytest.mark.parametrize("log_format", ["logfmt", "json"])
def test_every_log_line_parses_in_its_format(log_format: str) -> None:
    cluster = FakeCluster()
    lines: list[str] = []
    scaler = ScaleLoop(
        TARGET, CONFIG, cluster, FakeClock(cluster), dry_run=False, log=lines.append, log_format=log_format
    )
    for rps, down in ((5.0, False), (75.0, False), (75.0, True), (75.0, False), (75.0, False)):
        cluster.rps, cluster.down = rps, down
        scaler.run(polls=1)
        cluster.now_ms += 2000
    for line in lines:
        fields = json.loads(line) if log_format == "json" else parse_logfmt(line)
        assert (
            fields["decision"] in ("up", "down", "hold") and fields["reason"] and fields["ts"].endswith("Z")
        )
    assert any("api-unreachable" in line for line in lines)


def parse_logfmt(line: str) -> dict[str, str]:
    """A strict logfmt reader: key=bare or key="quoted with \\ escapes"; nothing else."""
    fields, rest = {}, line
    while rest:
        key, sep, rest = rest.partition("=")
        assert sep and key.isidentifier(), line
        if rest.startswith('"'):
            value, end = json.JSONDecoder().raw_decode(rest)
            rest = rest[end:]
        else:
            value, _, rest = rest.partition(" ")
            rest = " " + rest if rest else ""
            assert '"' not in value, line
        fields[key] = value
        assert rest == "" or rest.startswith(" "), line
        rest = rest[1:]
    return fields


def test_the_record_replays_to_the_same_decisions() -> None:
    cluster = FakeCluster()
    record = io.StringIO()
    scaler, lines = loop(cluster, record=record)
    for rps in (5.0, 75.0, 75.0, 75.0, 5.0):
        cluster.rps = rps
        scaler.run(polls=1)
        cluster.now_ms += 2000
    polls = [decode_poll(line) for line in record.getvalue().splitlines()]
    replayed = [decision for _, decision in replay(polls, CONFIG)]
    assert [d.action for d in replayed] == ["hold", "hold", "up", "hold", "hold"]
    assert [line.split(" ", 1)[1] for line in lines][2].startswith(
        "estimate_rps=75.00 desired=6 replicas=1->6"
    )


class ClusterWithCollector(FakeCluster):
    """The same cluster with croft's collector on 127.0.0.1: each scrape is an HTTP GET of its
    /metrics with the query croft scale sends (recorded), and the collector first publishes a poll
    of now: the Deployment's container at the offered rate beside three other containers."""

    def __init__(self, url: str, published: SnapshotCollector) -> None:
        super().__init__()
        self.url, self.published = url, published
        self.queries: list[str] = []

    def pod_metrics(self, namespace: str, pod: str, port: int, query: str = "") -> str:
        self.queries.append(query)
        ours = ("/kubepods/web", cid(1), {"sendto": self.rps * CALLS_PER_REQUEST, "read": 40.0})
        others = [(f"/kubepods/other{n}", cid(100 + n), {"sendto": 500.0, "futex": 9.0}) for n in range(3)]
        self.published.publish(served_samples([ours, *others], at_ms=self.now_ms))
        answer = httpx.get(f"{self.url}/metrics?{query}" if query else f"{self.url}/metrics", timeout=10)
        answer.raise_for_status()
        return answer.text


@pytest.mark.parametrize("old", [False, True], ids=["collector", "older-collector"])
def test_a_burst_scraped_from_a_real_collector_is_patched_once_whatever_its_version(old: bool) -> None:
    with collector((), old=old) as (url, published):
        cluster = ClusterWithCollector(url, published)
        cluster.rps = 75.0
        record = io.StringIO()
        scaler, lines = loop(cluster, record=record)
        scaler.run(polls=4)
    assert cluster.scaled == [6]
    assert "decision=up" in lines[1] and "estimate_rps=75.00 " in lines[1]
    assert {parse_query(query) for query in cluster.queries} == {scrape_query(CONFIG)}
    body = decode_poll(record.getvalue().splitlines()[0]).observations.scrapes[0].body or ""
    served = {(s.name, s.label("container_id")) for s in parse_exposition(body)}
    assert ((names.CONTAINER_MEMORY_USAGE_BYTES, cid(1)) in served) == old  # the older one answers everything


# -- the recorded fixtures -----------------------------------------------------------------------


def fixture(name: str) -> tuple[list[Any], dict[str, Any]]:
    text = (REPO / f"fixtures/scale/{name}.jsonl").read_text()
    meta = json.loads((REPO / f"fixtures/scale/{name}.meta.json").read_text())
    return [decode_poll(line) for line in text.splitlines()], meta


def test_the_burst_fixture_scales_up_within_six_seconds_and_never_down_inside_it() -> None:
    polls, meta = fixture("burst")
    decisions = list(replay(polls, CONFIG))
    onset, end = meta["burst_onset_ms"], meta["burst_end_ms"]
    first_up = next(
        p.observations.now_ms for p, d in decisions if d.action == "up" and p.observations.now_ms >= onset
    )
    assert first_up - onset <= 6000
    assert not [p for p, d in decisions if d.action == "down" and onset <= p.observations.now_ms <= end]


@pytest.mark.parametrize("garbage", ["NaN", "+Inf", "-Inf", "-75.5"])
def test_garbled_rates_in_the_burst_fixture_are_gaps_and_never_scale_down(garbage: str) -> None:
    # From 30 s into the burst to its end, every collector serves `garbage` for sendto; read as 0
    # (as before) the estimate fell to 1 replica and, with a short window, scaled 6 -> 1 mid-burst.
    polls, meta = fixture("burst")
    onset, end = meta["burst_onset_ms"], meta["burst_end_ms"]
    config = attrs.evolve(CONFIG, stabilization_s=20.0)

    def garble(body: str | None) -> str | None:
        if body is None:
            return None
        return "\n".join(
            f"{line.rsplit(' ', 1)[0]} {garbage}" if 'syscall="sendto"' in line else line
            for line in body.split("\n")
        )

    damaged = []
    for poll in polls:
        now = poll.observations.now_ms
        if onset + 30_000 <= now <= end:
            scrapes = tuple(attrs.evolve(s, body=garble(s.body)) for s in poll.observations.scrapes)
            poll = attrs.evolve(poll, observations=attrs.evolve(poll.observations, scrapes=scrapes))
        damaged.append(poll)
    decisions = list(replay(damaged, config))
    inside = [d for p, d in decisions if onset + 30_000 <= p.observations.now_ms <= end]
    assert inside and all(d.action != "down" for d in inside)
    assert all(d.estimate is not None and not d.estimate.complete for d in inside)
    assert all("(garbled data)" in d.reason.detail for d in inside if d.reason.code == "incomplete")
    assert any(d.action == "down" for p, d in decisions if p.observations.now_ms > end)  # sound data again


def test_the_outage_fixture_never_scales_down_on_incomplete_data() -> None:
    polls, _ = fixture("outage")
    decisions = list(replay(polls, CONFIG))
    incomplete = [d for _, d in decisions if d.estimate is not None and not d.estimate.complete]
    assert len(incomplete) >= 30  # the 30 s refusal and the 40 s stale poll
    assert all(d.action != "down" for d in incomplete)
    # The burst run scales down once the window has passed; in the outage run the stale polls near
    # that moment count as "keep 6" in the window, so it has not scaled down when the trace ends.
    assert any(d.action == "down" for _, d in replay(fixture("burst")[0], CONFIG))
    assert all(d.action != "down" for _, d in decisions)


def test_replay_cli_rejects_a_file_that_is_not_a_record(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"deployment": 1}\n')
    croft = CROFT
    args = ["--calls-per-request", "2", "--cpu-per-request-ms", "50"]
    out = subprocess.run(
        [croft, "scale", "--replay", str(bad), *args], capture_output=True, text=True, check=False
    )
    assert out.returncode == 1
    assert out.stderr.startswith(f"croft: {bad}:1 is not a recorded poll")
    both = [croft, "scale", "--replay", str(bad), "--record", str(bad), *args]
    out = subprocess.run(both, capture_output=True, text=True, check=False)
    expected = "croft: --record and --replay exclude each other: record a live run, then replay the file\n"
    assert (out.returncode, out.stderr) == (1, expected)


# -- the HTTP adapter ------------------------------------------------------------------------------


def test_client_retries_5xx_with_backoff_then_succeeds() -> None:
    answers = iter([503, 502, 200])
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(answers), json={"metadata": {"name": "webapp"}, "message": "restarting"})

    client = KubeClient("http://api", transport=httpx.MockTransport(handler), sleep=slept.append)
    assert client.deployment("croft-exp", "webapp")["metadata"]["name"] == "webapp"
    assert slept == [0.2, 0.4]
    client.close()


def test_client_names_a_denied_verb() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"message": "forbidden"})

    client = KubeClient("http://api", transport=httpx.MockTransport(handler), sleep=lambda _: None)
    with pytest.raises(Denied, match=r"^the Kubernetes API denied patch deployments/scale croft-exp/webapp"):
        client.patch_scale("croft-exp", "webapp", 3)
    client.close()


def test_client_asks_the_pod_proxy_with_the_query() -> None:
    asked: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url)
        return httpx.Response(200, text="croft_last_poll_timestamp_seconds 1\n")

    client = KubeClient("http://api", transport=httpx.MockTransport(handler), sleep=lambda _: None)
    query = query_string(scrape_query(CONFIG))
    assert client.pod_metrics("croft", "croft-a", 9464, query) == "croft_last_poll_timestamp_seconds 1\n"
    client.close()
    (proxied,) = [url for url in asked if "/proxy/" in url.path]  # after asking for a reader's token
    assert proxied.path == "/api/v1/namespaces/croft/pods/croft-a:9464/proxy/metrics"
    assert parse_query(proxied.query.decode()) == scrape_query(CONFIG)


def test_client_gives_up_on_a_closed_port_with_one_sentence() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = KubeClient(f"http://127.0.0.1:{port}", sleep=lambda _: None)
    with pytest.raises(
        Unreachable, match=rf"^cannot list pods in ns matching a=b through http://127.0.0.1:{port}"
    ):
        client.pods("ns", "a=b")
    client.close()


def test_help_explains_the_plus_of_a_lower_bound() -> None:
    text = " ".join(croft("scale", "--help").stdout.replace("│", " ").split())
    assert 'An estimate_rps ending in "+" (json: lower_bound true) is a lower bound' in text
    assert "never down" in text
