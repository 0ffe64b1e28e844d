"""apps.json: entries built on another (`like`), pods sized by the entry (`pod`), and the manifests
as an entry applies them (`apps.rendered`): the lab's 1-CPU webapp, the node's sizing of 2026-12-03
and today's, over the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import apps


def _deployment(text: str) -> dict:
    return next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment")


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_both_node_sizings_and_the_lab_s_are_described_over_the_same_manifests() -> None:
    lab, old, new = (apps.load(n) for n in ("webapp", "webapp-node-250m", "webapp-node-200m"))
    assert lab.manifests == old.manifests == new.manifests
    assert (lab.cpu_limit_cores, old.cpu_limit_cores, new.cpu_limit_cores) == (1.0, 0.25, 0.2)
    assert lab.pod is None and old.pod is not None and new.pod is not None
    assert (old.pod.cpu_ms, old.pod.max_connection_age_s) == (25, 0.0)
    assert (new.pod.cpu_ms, new.pod.max_connection_age_s) == (10, 10)
    assert old.burst is not None and (old.burst.base_rps, old.burst.peak_rps, old.burst.shapes) == (
        2.5,
        37.5,
        (0,),
    )
    assert new.burst is not None and new.burst.shapes == (0, 15, 30, 60, 120)
    assert new.burst.peak_rps == 5 * new.burst.base_rps
    # the base fits one pod under the target, the peak needs several, and all of them fit 1 core
    cpu_s = new.calibration.cpu_per_request_ms / 1000
    assert new.burst.base_rps * cpu_s < new.target * new.cpu_limit_cores
    need = new.burst.peak_rps * cpu_s / (new.target * new.cpu_limit_cores)
    assert 4 < need <= 5 and 5 * new.cpu_limit_cores <= 1.0
    # sized alike: both autoscalers give replicas back after the same stabilization
    assert new.cluster.scaler_stabilization_s == new.cluster.hpa_down_stabilization_s == 30
    assert new.sim_app().max_connection_age_s == 10 and old.sim_app().max_connection_age_s == 0


def test_rendered_manifests_size_the_pods_and_place_them() -> None:
    app = apps.with_connection_age(apps.load("webapp-node-200m"), 7.5)
    text = apps.rendered(app, app.manifests[1])
    container = _deployment(text)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == container["resources"]["limits"]["cpu"] == "200m"
    assert container["resources"]["limits"]["memory"] == "128Mi"  # the rest kept
    assert _env(container) == {"SENDTO": "2", "CPU_MS": "10", "MAX_CONNECTION_AGE_S": "7.5"}
    assert container["image"] == "croft-webapp:v1" and container["readinessProbe"]["periodSeconds"] == 1


def test_rendering_moves_every_object_to_the_app_s_namespace_and_image(tmp_path: Path) -> None:
    data = json.loads(apps.APPS_JSON.read_text())
    entry = apps.entry_of(data, "webapp-node-200m", apps.APPS_JSON)
    entry.update(namespace="elsewhere", manifests=[str(apps.HERE / m) for m in entry["manifests"]])
    entry["hpa"] = str(apps.HERE / entry["hpa"])
    entry["pod"] = {**entry["pod"], "image": "localhost/webapp:x"}
    (tmp_path / "apps.json").write_text(json.dumps({"w": entry}))
    app = apps.load("w", tmp_path / "apps.json")
    docs = [d for m in (*app.manifests, app.hpa) for d in yaml.safe_load_all(apps.rendered(app, m)) if d]
    assert {d["kind"] for d in docs} == {"Namespace", "Deployment", "Service", "HorizontalPodAutoscaler"}
    for doc in docs:
        key = "name" if doc["kind"] == "Namespace" else "namespace"
        assert doc["metadata"][key] == "elsewhere"
    assert (
        _deployment(apps.rendered(app, app.manifests[1]))["spec"]["template"]["spec"]["containers"][0][
            "image"
        ]
        == "localhost/webapp:x"
    )


def test_an_app_without_pod_sizing_renders_its_files_unchanged_but_the_namespace() -> None:
    app = apps.load("webapp")
    container = _deployment(apps.rendered(app, app.manifests[1]))["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["cpu"] == "1" and _env(container)["CPU_MS"] == "50"
    with pytest.raises(apps.AppError, match="does not size its pods"):
        apps.with_connection_age(app, 10)


@pytest.mark.parametrize(("quantity", "cores"), [("200m", 0.2), ("1", 1.0), ("0.5", 0.5), ("1500m", 1.5)])
def test_cpu_quantities(quantity: str, cores: float) -> None:
    assert apps.cpu_cores(quantity) == pytest.approx(cores)


@pytest.mark.parametrize("quantity", ["", "0", "1Gi", "-200m", "m"])
def test_a_bad_cpu_quantity_is_named(quantity: str) -> None:
    with pytest.raises(apps.AppError, match="is not a CPU quantity"):
        apps.cpu_cores(quantity)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"a": {"like": "b"}}, "is like 'b', which is not there"),
        ({"a": {"like": "b"}, "b": {"like": "a"}}, "which is a loop"),
    ],
)
def test_a_like_that_leads_nowhere_is_named(tmp_path: Path, entries: dict, message: str) -> None:
    path = tmp_path / "apps.json"
    path.write_text(json.dumps(entries))
    with pytest.raises(apps.AppError, match=message):
        apps.load("a", path)


def test_an_entry_s_own_fields_win_over_the_one_it_is_like(tmp_path: Path) -> None:
    data = json.loads(apps.APPS_JSON.read_text())
    data["mine"] = {"like": "webapp-node-200m", "max_replicas": 4, "pod": {"cpu": "300m", "cpu_ms": 5}}
    path = tmp_path / "apps.json"
    path.write_text(json.dumps(data))
    app = apps.load("mine", path)
    assert (app.max_replicas, app.cpu_limit_cores, app.burst) == (4, 0.3, apps.load("webapp-node-200m").burst)
    assert app.manifests[0] == path.parent / "workloads/webapp/k8s/namespace.yaml"
