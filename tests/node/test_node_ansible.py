"""labs/k3s-cluster's playbooks for real, with ansible-core from PyPI and a local connection: the
test node stands in for a k3s node (its containerd reached with `ctr --address ...` instead of
`k3s ctr`). load-image imports an image a pod then runs; collect lands research/data/nodes/<node>/
from the real collector pod."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import REPO, Node

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.slow]

PLAYBOOKS = REPO / "labs" / "k3s-cluster"
ANSIBLE_VENV = Path(os.environ.get("CROFT_K8S_CACHE", "/var/cache/croft-k8s")) / "ansible-venv"


@pytest.fixture(scope="session")
def ansible() -> Path:
    """ansible-playbook from ansible-core (PyPI), in a venv of its own under the cache."""
    playbook = ANSIBLE_VENV / "bin" / "ansible-playbook"
    if not playbook.exists():
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(ANSIBLE_VENV)], capture_output=True, text=True
        )
        pip = subprocess.run(
            [str(ANSIBLE_VENV / "bin" / "pip"), "install", "--quiet", "ansible-core>=2.15,<2.18"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if made.returncode != 0 or pip.returncode != 0:
            pytest.skip(f"ansible-core cannot be installed here: {(made.stderr + pip.stderr).strip()[-300:]}")
    return playbook


@pytest.fixture
def inventory(node: Node, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "inventory.ini"
    path.write_text(
        "[k3s_server]\n"
        f"{node.name} ansible_connection=local ansible_become=false"
        f" ansible_python_interpreter={ANSIBLE_VENV / 'bin' / 'python'}\n"
        "[k3s_agent]\n[k3s:children]\nk3s_server\nk3s_agent\n"
    )
    yield path


def playbook(ansible: Path, inventory: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ansible), "-i", str(inventory), str(PLAYBOOKS / name), *extra],
        capture_output=True, text=True, timeout=600, cwd=PLAYBOOKS, check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
             "ANSIBLE_LOCALHOST_WARNING": "False"},
    )  # fmt: skip


def test_load_image_imports_into_the_nodes_containerd_and_a_pod_runs_it(
    node: Node, ansible: Path, inventory: Path, webapp_image: str, namespace: str, tmp_path: Path
) -> None:
    tag = "localhost/croft-webapp:ansible"
    context = REPO / "labs" / "research" / "experiment" / "workloads" / "webapp"
    archive = node.script(
        "image-build", tag, str(context), str(context / "Dockerfile"), "--no-import"
    ).strip()
    ctr = f"ctr --address {node.values['CONTAINERD_ADDRESS']}"
    out = playbook(ansible, inventory, "load-image.yml", "-e", f"image={tag}", "-e", f"image_tar={archive}",
                   "-e", f"ctr='{ctr}'")  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    node.apply(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: from-ansible, labels: {{app: from-ansible}}}}
spec:
  automountServiceAccountToken: false
  containers: [{{name: webapp, image: "{tag}", imagePullPolicy: Never}}]
""",
        namespace,
    )
    (pod,) = node.wait_ready(namespace, "app=from-ansible", 1, 120)
    assert pod["status"]["containerStatuses"][0]["image"].endswith(tag.split("/", 1)[1])


def test_collect_lands_the_collector_pods_dataset_in_research_data_nodes(
    node: Node, ansible: Path, inventory: Path, collector: dict[str, Any], tmp_path: Path
) -> None:
    data = tmp_path / "research-data"
    out = playbook(ansible, inventory, "collect.yml", "-e", f"data_dir={data}",
                   "-e", f"kubeconfig={node.plane.kubeconfig}", "-e", f"croft={CROFT}")  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    pulled = list((data / "nodes" / node.name).iterdir())
    assert pulled and all(p.stat().st_size > 0 for p in pulled)
    assert f"{node.name}: " in out.stdout
