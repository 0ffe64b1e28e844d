"""A real local control plane for the `k8s` tests: scripts/kube-apiserver.sh, started once a session.

The build is cached (/var/cache/croft-k8s); `make test` builds it before pytest runs. The tests skip
only when the build truly cannot be made here (the script says why); a control plane that builds but
does not start fails them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.kube import ControlPlane
from tests.helpers.net import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kube-apiserver.sh"


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-controller-manager on loopback, stopped at the end."""
    env = {
        **os.environ,
        "CROFT_K8S_RUN": str(tmp_path_factory.mktemp("k8s-run")),
        "CROFT_K8S_ETCD_PORT": str(free_port()),
        "CROFT_K8S_ETCD_PEER_PORT": str(free_port()),
        "CROFT_K8S_API_PORT": str(free_port()),
    }
    build = subprocess.run(
        ["bash", str(SCRIPT), "build"], capture_output=True, text=True, env=env, check=False
    )
    if build.returncode != 0:
        last = (build.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"kube-apiserver cannot be built here: {last}")
    start = subprocess.run(
        ["bash", str(SCRIPT), "start"], capture_output=True, text=True, env=env, check=False
    )
    try:
        if start.returncode != 0:
            pytest.fail(f"scripts/kube-apiserver.sh start failed: {start.stderr.strip()[-2000:]}")
        values = dict(line.split("=", 1) for line in start.stdout.splitlines() if "=" in line)
        plane = ControlPlane.from_env(values, script=SCRIPT, env=env)
        plane.wait_for_default_service_account()
        try:
            yield plane
        finally:
            plane.http.close()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, env=env, check=False, timeout=60)
