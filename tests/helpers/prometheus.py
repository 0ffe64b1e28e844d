"""A real Prometheus (the Debian package, installed by scripts/system-deps.sh) on loopback for tests:
a free port, temporary storage, 1 s scrapes of the targets given, stopped at the end."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.net import free_port


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """`check()` until it returns something truthy, or fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except (httpx.HTTPError, ValueError) as exc:
            last_error = exc
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error})")


@contextmanager
def prometheus(targets: Mapping[str, str], directory: Path, bearer_file: Path | None = None) -> Iterator[str]:
    """A real Prometheus scraping every second each `job: host:port` of `targets` (at /metrics),
    storing into `directory`; yields its base URL once ready. With `bearer_file`, every scrape
    carries that file's token (`authorization: credentials_file`, as Prometheus in a cluster sends
    its ServiceAccount's). Skips when there is no binary."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary: `make test` installs the Debian package as root")
    auth = f"    authorization:\n      credentials_file: {bearer_file}\n" if bearer_file is not None else ""
    jobs = "".join(
        f"  - job_name: {job}\n{auth}    static_configs:\n      - targets: ['{target}']\n"
        for job, target in targets.items()
    )
    (directory / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}"
    )
    port = free_port()
    log = (directory / "prometheus.log").open("wb")
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for("Prometheus to be ready", lambda: httpx.get(f"{base}/-/ready", timeout=2).status_code == 200)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """The instant vector of `promql` from Prometheus' HTTP API."""
    answer = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])
