"""croft scale against a real kube-apiserver, through a real kubectl proxy with scaler.yaml's RBAC.

Without a kubelet, pods stay Pending: the tests report them Running/Ready with container ids, as a
kubelet would. The collector's /metrics is a stand-in HTTP server on this host's address, reached
through the API server's pod proxy (which refuses loopback pod IPs).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.kube import ControlPlane, MetricsServer, croft_env, host_ip
from tests.helpers.scale import CALLS_PER_REQUEST, cid, collector_body

from croft.domain.metrics.query import parse_query
from croft.domain.scaling.decision import ScaleConfig, scrape_query

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "croft-exp"
SA = "croft-scaler-webapp"
WEB_CONTAINER = cid(0xC0FFEE)
# The console script, not `python -m croft`: the exit code is part of what is tested.


@attrs.define
class Setup:
    plane: ControlPlane
    metrics: MetricsServer
    sa_proxy: str
    rps: float = 5.0

    def scale(
        self, *args: str, api: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, api=api), capture_output=True, text=True, timeout=timeout, env=croft_env()
        )

    def argv(self, *args: str, api: str | None = None) -> list[str]:
        return [
            CROFT, "scale", "--namespace", NAMESPACE, "--calls-per-request",
            str(CALLS_PER_REQUEST), "--cpu-per-request-ms", "50", "--interval", "1",
            "--collector-port", str(self.metrics.port), "--api", api or self.sa_proxy, *args,
        ]  # fmt: skip

    def reset(self, replicas: int = 1) -> None:
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/webapp/scale"
        self.plane.call("PATCH", path, {"spec": {"replicas": replicas}}, patch=True)


@pytest.fixture(scope="module")
def setup(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    address = host_ip()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address for the pod proxy to reach")
    plane = control_plane
    plane.namespace(NAMESPACE)
    plane.namespace("croft")
    plane.kubectl("apply", "-f", str(REPO / "deploy/kubernetes/scaler.yaml"))
    plane.deployment(NAMESPACE, "webapp", replicas=1, cpu_limit="1")
    pods = plane.wait_for("the webapp pod", lambda: plane.pods(NAMESPACE, "app=webapp"))
    plane.make_running(NAMESPACE, pods[0]["metadata"]["name"], {"web": WEB_CONTAINER})
    metrics = MetricsServer(address)
    plane.pod("croft", "croft-a", {"app.kubernetes.io/name": "croft-collector"})
    plane.make_running("croft", "croft-a", {"collector": cid(0xC011EC7)}, ip=address)
    kubeconfig = plane.service_account_kubeconfig(NAMESPACE, SA, tmp_path_factory.mktemp("sa") / "kubeconfig")
    try:
        with plane.proxy(kubeconfig) as sa_proxy:
            state = Setup(plane, metrics, sa_proxy)
            metrics.make_body = lambda: collector_body(
                int(time.time() * 1000), {WEB_CONTAINER: state.rps * CALLS_PER_REQUEST}
            )
            yield state
    finally:
        metrics.close()


def test_dry_run_reads_pods_and_container_ids_and_changes_nothing(setup: Setup) -> None:
    setup.reset(1)
    setup.rps = 75.0
    out = setup.scale("--deployment", "webapp", "--polls", "2", "--dry-run")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    assert "estimate_rps=75.00 desired=6 replicas=1->1 decision=hold reason=confirming-up" in lines[0]
    assert "replicas=1->6 decision=up reason=scale-up" in lines[1]
    assert lines[1].endswith(" dry_run=true")
    assert setup.plane.replicas(NAMESPACE, "webapp") == 1
    # the API server's pod proxy passed croft scale's query on to the collector
    path, _, query = setup.metrics.paths[-1].partition("?")
    assert path == "/metrics"
    assert parse_query(query) == scrape_query(ScaleConfig("sendto", CALLS_PER_REQUEST, 50))


def test_scales_up_through_the_scale_subresource_and_replays_its_record(setup: Setup, tmp_path: Path) -> None:
    setup.reset(1)
    setup.rps = 75.0
    record = tmp_path / "record.jsonl"
    out = setup.scale("--deployment", "webapp", "--polls", "3", "--record", str(record))
    assert out.returncode == 0, out.stderr
    assert "decision=up" in out.stdout.splitlines()[1]
    assert setup.plane.replicas(NAMESPACE, "webapp") == 6
    # The new replicas are Pending (no kubelet): no container ids yet, so no gap and no more scaling.
    assert "replicas=6->6 decision=hold reason=steady" in out.stdout.splitlines()[2]

    replayed = subprocess.run(
        [CROFT, "scale", "--replay", str(record), "--calls-per-request",
         str(CALLS_PER_REQUEST), "--cpu-per-request-ms", "50"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    live = out.stdout.splitlines()
    assert [line.removesuffix(" replay=true") for line in replayed.stdout.splitlines()] == live


def test_rbac_of_scaler_yaml_is_enough_and_no_more(setup: Setup) -> None:
    who = f"--as=system:serviceaccount:{NAMESPACE}:{SA}"

    def can(*args: str) -> bool:
        out = setup.plane.kubectl("auth", "can-i", who, *args, check=False)
        return out.strip() == "yes"

    allowed = [
        ("list", "pods", "-n", NAMESPACE),
        ("get", "deployments/webapp", "-n", NAMESPACE),
        ("patch", "deployments/webapp", "--subresource=scale", "-n", NAMESPACE),
        ("list", "pods", "-n", "croft"),
        ("get", "pods/croft-a", "--subresource=proxy", "-n", "croft"),
    ]
    denied = [
        ("patch", "deployments/webapp", "-n", NAMESPACE),
        ("delete", "deployments/webapp", "-n", NAMESPACE),
        ("get", "deployments/other", "-n", NAMESPACE),
        ("patch", "deployments/other", "--subresource=scale", "-n", NAMESPACE),
        ("list", "deployments", "-n", NAMESPACE),
        ("create", "pods", "-n", NAMESPACE),
        ("delete", "pods", "-n", NAMESPACE),
        ("get", "secrets", "-n", NAMESPACE),
        ("list", "pods", "-n", "default"),
        ("get", "pods/croft-a", "--subresource=proxy", "-n", NAMESPACE),
        ("create", "pods/croft-a", "--subresource=proxy", "-n", "croft"),
        ("patch", "pods/croft-a", "-n", "croft"),
        ("get", "secrets", "-n", "croft"),
        ("list", "nodes"),
    ]
    assert [a for a in allowed if not can(*a)] == []
    assert [d for d in denied if can(*d)] == []


def test_a_denied_verb_is_one_clear_sentence(setup: Setup) -> None:
    out = setup.scale("--deployment", "other", "--polls", "1")
    assert out.returncode == 1
    assert out.stderr == (
        f"croft: the Kubernetes API denied get deployment {NAMESPACE}/other (HTTP 403): grant that verb "
        "to the scaler's ServiceAccount (see deploy/kubernetes/scaler.yaml)\n"
    )
    assert "Traceback" not in out.stderr


def test_an_unreachable_api_is_one_clear_sentence(setup: Setup) -> None:
    out = setup.scale("--deployment", "webapp", "--polls", "1", api="http://127.0.0.1:9")
    assert out.returncode == 0  # it keeps polling (here: one poll) and says why it holds
    assert "cannot get deployment croft-exp/webapp through http://127.0.0.1:9 after 3 tries" in out.stderr
    assert "decision=hold reason=api-unreachable" in out.stdout


def test_survives_an_api_server_restart(setup: Setup, tmp_path: Path) -> None:
    setup.reset(1)
    setup.rps = 5.0
    log = tmp_path / "scale.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            setup.argv("--deployment", "webapp"), stdout=sink, stderr=subprocess.STDOUT, env=croft_env()
        )
    try:
        setup.plane.wait_for("two polls", lambda: log.read_text().count("reason=steady") >= 2)
        setup.plane.stop_apiserver()
        setup.plane.wait_for("polls without the API", lambda: log.read_text().count("api-unreachable") >= 2)
        setup.plane.start_apiserver()
        setup.rps = 75.0
        setup.plane.wait_for(
            "the scale-up after the restart", lambda: setup.plane.replicas(NAMESPACE, "webapp") == 6, 60
        )
        assert process.poll() is None, log.read_text()
    except AssertionError as exc:
        raise AssertionError(f"{exc}; croft scale said:\n{log.read_text()}") from None
    finally:
        process.send_signal(signal.SIGTERM)
        rc = process.wait(timeout=20)
    text = log.read_text()
    assert rc == 0, text
    assert "Traceback" not in text
    assert text.index("api-unreachable") < text.index("decision=up")
