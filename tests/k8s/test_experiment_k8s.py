"""The experiment harness's cluster parts against a real kube-apiserver (+ controller-manager):
`web` deploys the app at one replica with its HPA (autoscaling/v2beta2), watches the run and
exports the pod timeline; `--scaler croft` runs croft scale instead of the HPA.

There is no kubelet: a stand-in marks each new pod Running and Ready with a container id (at the
real time), as a kubelet would. The load goes to a real webapp on loopback.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.cli import CROFT
from tests.helpers.kube import ControlPlane
from tests.helpers.webapp import running_webapp

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "labs" / "research" / "experiment"
if str(HARNESS) not in sys.path:
    sys.path.insert(0, str(HARNESS))

import apps  # noqa: E402
import profiles  # noqa: E402
import scoring  # noqa: E402
import web  # noqa: E402
from croft.runs.rundir import read_records, read_timeline, read_workload  # noqa: E402

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240)]
NAMESPACE = "croft-harness"


def _rfc3339(unix_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_s))


class FakeKubelet:
    """Every 0.2 s: each Pending pod of the namespace becomes Running and Ready, with a container id."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane, self.namespace = plane, namespace
        self.ids: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            for pod in self.plane.pods(self.namespace, "app=webapp"):
                name = pod["metadata"]["name"]
                if (pod.get("status") or {}).get("phase") == "Running" or pod["metadata"].get(
                    "deletionTimestamp"
                ):
                    continue
                cid = f"{len(self.ids) + 1:04x}".rjust(64, "c")
                now = _rfc3339(time.time())
                status = {
                    "phase": "Running",
                    "startTime": now,
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                    "containerStatuses": [
                        {
                            "name": "webapp",
                            "ready": True,
                            "restartCount": 0,
                            "image": "croft-webapp:v1",
                            "imageID": "",
                            "containerID": f"containerd://{cid}",
                            "state": {"running": {"startedAt": now}},
                        }
                    ],
                }
                path = f"/api/v1/namespaces/{self.namespace}/pods/{name}/status"
                try:
                    self.plane.call("PATCH", path, {"status": status}, patch=True)
                    self.ids[name] = cid
                except Exception:
                    pass  # deleted meanwhile; the next round sees


@pytest.fixture(scope="module")
def harness_app(tmp_path_factory: pytest.TempPathFactory) -> apps.App:
    """apps.json's webapp, its manifests moved to a namespace of this module's own."""
    root = tmp_path_factory.mktemp("harness")
    entry = json.loads(apps.APPS_JSON.read_text())["webapp"]
    for rel in [*entry["manifests"], entry["hpa"]]:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((HARNESS / rel).read_text().replace("croft-exp", NAMESPACE))
    entry["namespace"] = NAMESPACE
    (root / "apps.json").write_text(json.dumps({"webapp": entry}))
    return apps.load("webapp", root / "apps.json")


@pytest.fixture(scope="module")
def webapp_url() -> Iterator[str]:
    with running_webapp(cpu_ms=1) as (url, _):
        yield url


def _options(plane: ControlPlane, app: apps.App, url: str, data: Path, **kw: object) -> web.WebOptions:
    # 1 s warm-up, then a 6 s "burst" profile: 5 RPS, 20 RPS for 2 s from t=2, 5 RPS.
    profile = profiles.Profile(
        "burst", ((0, 5), (2, 5), (2, 20), (4, 20), (4, 5), (6, 5)), (("scale", 0.0),), burst_s=(2.0, 4.0)
    )
    return web.WebOptions(
        app=app,
        prefix=str(kw.pop("prefix")),
        profile=profiles.with_warmup(profile, 1.0),
        data_dir=data,
        host=url,
        kubectl=str(plane.bin_dir / "kubectl"),
        kubeconfig=str(plane.kubeconfig),
        cooldown_s=0,
        ready_timeout_s=60,
        croft=CROFT,
        **kw,  # type: ignore[arg-type]
    )


def test_web_deploys_one_replica_with_its_hpa_and_exports_the_pod_timeline(
    control_plane: ControlPlane, harness_app: apps.App, webapp_url: str, tmp_path: Path
) -> None:
    plane = control_plane
    with FakeKubelet(plane, NAMESPACE) as kubelet:
        # What the HPA would do mid-run (there is no metrics server here): 1 -> 2 replicas, 3 s after
        # the HPA exists (web creates it last, just before the watcher and the load start).
        def rescale() -> None:
            hpa = f"/apis/autoscaling/v2beta2/namespaces/{NAMESPACE}/horizontalpodautoscalers/webapp"
            plane.wait_for("the HPA", lambda: plane.http.get(hpa).status_code == 200, 60)
            time.sleep(3)
            path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/webapp/scale"
            plane.call("PATCH", path, {"spec": {"replicas": 2}}, patch=True)

        scaler = threading.Thread(target=rescale, daemon=True)
        options = _options(plane, harness_app, webapp_url, tmp_path, prefix="hpa-")
        scaler.start()
        run_dir = web.web(options)
        scaler.join(timeout=10)

    hpa = plane.call(
        "GET", f"/apis/autoscaling/v2beta2/namespaces/{NAMESPACE}/horizontalpodautoscalers/webapp"
    )
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 10)
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": 70,
    }
    timeline = read_timeline(run_dir / "timeline.json")
    assert timeline.initial_replicas == 1
    assert [(r.from_replicas, r.to_replicas, r.source) for r in timeline.rescales] == [(1, 2, "hpa")]
    assert len(timeline.pods) == 2
    for pod in timeline.pods:
        assert (
            pod.ready_ms is not None and pod.started_ms is not None and pod.ready_ms >= pod.created_ms - 1000
        )
        assert pod.container_ids == (kubelet.ids[pod.name],)
    assert any(e["reason"] == "ScalingReplicaSet" for e in timeline.events)  # the deployment controller's
    rows = read_workload(run_dir / "workload.csv")
    assert len(rows) == 7 and all(r.ok == r.target_rps for r in rows)
    assert sum(r.achieved_rps for r in rows) == sum(r.target_rps for r in rows)
    assert sum(r.target_rps for r in rows) == 5 + 5 + 5 + 20 + 20 + 5 + 5
    (record,) = read_records(tmp_path / "web")
    assert record.run == run_dir.name and record.run.startswith("hpa-") and record.autoscaler == "hpa"
    assert sorted(cid for _, cid in record.containers) == sorted(kubelet.ids.values())
    assert record.burst_onset_ms == record.window_start_ms + 3000  # 1 s warm-up + 2 s
    (score,) = scoring.score_prefixes(tmp_path / "web", ["hpa-"])
    assert score.peak_replicas == 2 and score.failures == 0 and score.first_scale_up_s is not None


def test_scaler_croft_runs_croft_scale_instead_of_the_hpa(
    control_plane: ControlPlane, harness_app: apps.App, webapp_url: str, tmp_path: Path
) -> None:
    plane = control_plane
    with FakeKubelet(plane, NAMESPACE):
        options = _options(
            plane,
            harness_app,
            webapp_url,
            tmp_path,
            prefix="duo-",
            scaler="croft",
            croft_args=("--collector-namespace", "croft-harness-none", "--interval", "1"),
        )
        run_dir = web.web(options)
    hpas = plane.call("GET", f"/apis/autoscaling/v2beta2/namespaces/{NAMESPACE}/horizontalpodautoscalers")
    assert hpas["items"] == []  # the HPA of the previous run was deleted, none created
    log = (run_dir / "scaler.log").read_text().splitlines()
    polls = [line for line in log if " decision=" in line]
    assert len(polls) >= 5, log
    # No collector answers here, so croft holds and says why, every poll.
    assert all("decision=hold" in line and "no collector was found to scrape" in line for line in polls), log
    assert plane.replicas(NAMESPACE, "webapp") == 1
    (record,) = read_records(tmp_path / "web")
    assert record.autoscaler == "croft" and read_timeline(run_dir / "timeline.json").rescales == ()


def test_users_run_locust_and_the_run_is_recorded_like_an_open_loop_one(
    control_plane: ControlPlane, harness_app: apps.App, webapp_url: str, tmp_path: Path
) -> None:
    import locust_mode

    plane = control_plane
    with FakeKubelet(plane, NAMESPACE):
        options = _options(plane, harness_app, webapp_url, tmp_path, prefix="users-", users=2, spawn_rate=2.0)
        run_dir = web.web(options)
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "locust.log",
        "locust_exceptions.csv",
        "locust_failures.csv",
        "locust_stats.csv",
        "locust_stats_history.csv",
        "node_cpu.csv",  # this machine's CPU, every second of the run
        "timeline.json",
    ]
    row = locust_mode.aggregated(run_dir)
    assert int(row["Request Count"]) > 0 and row["Failure Count"] == "0"
    (record,) = read_records(tmp_path / "web")
    assert record.run == run_dir.name and record.run.startswith("users-") and record.autoscaler == "hpa"
    assert dict(record.load) == {"mode": "locust", "users": 2, "spawn_rate": 2.0, "duration_s": 7}
    assert record.burst_onset_ms is None and record.burst_end_ms is None  # users follow no burst
    assert record.window_end_ms - record.window_start_ms >= 7000
    timeline = read_timeline(run_dir / "timeline.json")
    assert timeline.initial_replicas == 1 and len(timeline.pods) == 1
    # The pod may be the previous test's (same Deployment, same spec); the kubelet gave it its id.
    (pod,) = timeline.pods
    assert record.containers == ((pod.name, pod.container_ids[0]),) and len(pod.container_ids[0]) == 64
    assert (timeline.start_ms, timeline.end_ms) == (record.window_start_ms, record.window_end_ms)
    with pytest.raises(scoring.CompareError, match="no burst run"):
        scoring.score_prefixes(tmp_path / "web", ["users-"])


def test_an_app_that_sizes_its_pods_is_deployed_as_apps_json_says_and_the_run_says_so(
    control_plane: ControlPlane, webapp_url: str, tmp_path: Path
) -> None:
    """webapp-node-200m in a namespace of its own: web applies its manifests as apps.rendered writes
    them (200m pods, CPU_MS 10, the connection bound asked for), its run says its bound and arm in
    runs.jsonl, and node_cpu.csv holds this machine's CPU every second of the run."""
    import nodecpu

    plane, namespace = control_plane, "croft-harness-sized"
    entry = apps.entry_of(json.loads(apps.APPS_JSON.read_text()), "webapp-node-200m", apps.APPS_JSON)
    entry.update(namespace=namespace, manifests=[str(HARNESS / m) for m in entry["manifests"]])
    entry["hpa"] = str(HARNESS / entry["hpa"])
    (tmp_path / "apps.json").write_text(json.dumps({"sized": entry}))
    app = apps.load("sized", tmp_path / "apps.json")
    with FakeKubelet(plane, namespace):
        options = _options(
            plane, app, webapp_url, tmp_path, prefix="sized-", max_connection_age_s=4.0, labels={"arm": "hpa"}
        )
        run_dir = web.web(options)
    deployment = plane.call("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/webapp")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["cpu"] == container["resources"]["limits"]["cpu"] == "200m"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert (env["CPU_MS"], env["MAX_CONNECTION_AGE_S"], env["SENDTO"]) == ("10", "4", "2")
    hpa = f"/apis/autoscaling/v2beta2/namespaces/{namespace}/horizontalpodautoscalers/webapp"
    assert plane.call("GET", hpa)["metadata"]["namespace"] == namespace
    (record,) = read_records(tmp_path / "web")
    assert (record.load["max_connection_age_s"], record.load["arm"]) == (4.0, "hpa")
    samples = nodecpu.read(run_dir / nodecpu.FILE)
    assert len(samples) >= 5 and all(0 <= s.busy_cores <= s.cores for s in samples)
    assert record.window_start_ms / 1000 - 2 <= samples[0].unix_s <= samples[-1].unix_s
