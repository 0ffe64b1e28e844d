"""Reading pods and Deployments (decoded JSON) for croft scale, and the scale record format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.scaling.decision import DeploymentView
from croft.domain.scaling.kube import deployment_view, label_selector, parse_cpu_quantity, pod_view
from croft.domain.scaling.record import NotARecord, RecordedPoll, decode_poll, encode_poll
from tests.helpers.scale import cid, steady_poll, with_gap


@pytest.mark.parametrize(
    ("text", "cores"),
    [("500m", 0.5), ("1", 1.0), ("1.5", 1.5), ("250m", 0.25), ("2000m", 2.0), ("1e-1", 0.1), (".5", 0.5)],
)
def test_cpu_quantities(text: str, cores: float) -> None:
    assert parse_cpu_quantity(text) == pytest.approx(cores)


@pytest.mark.parametrize("text", ["", "m", "1.5x", "five", "1 m"])
def test_bad_quantities_raise_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_cpu_quantity(text)


DEPLOYMENT = {
    "metadata": {"name": "webapp", "namespace": "croft-exp"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "webapp", "tier": "web"}},
        "template": {
            "spec": {
                "containers": [
                    {"name": "web", "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}},
                    {"name": "sidecar", "resources": {"limits": {"cpu": "0.1"}}},
                    {"name": "nolimit"},
                ]
            }
        },
    },
}


def test_deployment_view_sums_template_cpu_limits() -> None:
    assert deployment_view(DEPLOYMENT) == DeploymentView("croft-exp", "webapp", 3, pytest.approx(0.6))
    assert label_selector(DEPLOYMENT) == "app=webapp,tier=web"
    bare = {"metadata": {"name": "x"}, "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}
    assert deployment_view(bare).cpu_limit_cores is None
    assert deployment_view(bare).replicas == 1


def test_pod_view_keeps_running_containers_without_scheme() -> None:
    pod = {
        "metadata": {"name": "webapp-1"},
        "status": {
            "containerStatuses": [
                {"name": "web", "containerID": f"containerd://{cid(1)}", "state": {"running": {}}},
                {"name": "old", "containerID": f"docker://{cid(2)}", "state": {"terminated": {}}},
                {"name": "new", "state": {"waiting": {}}},
            ]
        },
    }
    assert pod_view(pod).container_ids == (cid(1),)
    assert pod_view({"metadata": {"name": "pending"}, "status": {"phase": "Pending"}}).container_ids == ()


@given(st.integers(0, 10**12), st.sampled_from([None, "down", "stale", "garbled", "no-series"]))
def test_recorded_polls_round_trip(now_ms: int, gap: str | None) -> None:
    poll = steady_poll(now_ms, 12.5, pods=3)
    observations = poll if gap is None else with_gap(poll, gap)
    recorded = RecordedPoll(DeploymentView("ns", "webapp", 2, 0.5), observations)
    line = encode_poll(recorded)
    assert "\n" not in line
    assert decode_poll(line) == recorded


@pytest.mark.parametrize("line", ["", "{}", '{"deployment": 1}', "[1, 2]", "not json"])
def test_a_bad_record_line_is_not_a_record(line: str) -> None:
    with pytest.raises(NotARecord, match="not a recorded poll"):
        decode_poll(line)
