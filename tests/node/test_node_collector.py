"""The collector on a real node: `croft deploy kubernetes` runs the image built from
deploy/docker/Dockerfile (no BCC, no LLVM) as a DaemonSet pod without kernel headers mounted, which
loads its precompiled CO-RE eBPF programs with the manifest's capabilities only and writes rows (in
a dataset directory of the tests' own) for the webapp's real pods; the rows carry the container ids
the API reports, cgroup figures the cgroup's own files give and syscall rates that add up to the
load sent; rows, /metrics and croft top name each pod as the API does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.node import (
    CPU_MS,
    DATASET_DIR,
    Node,
    container_ids,
    dataset_rows,
    processes_in,
    reader_token,
    send_requests,
    wait_for,
    webapp_deployment,
)

from croft.domain.deploy.manifests import CAPABILITIES_5_11
from croft.domain.metrics import names
from croft.domain.metrics.exposition import parse_exposition

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

# capability numbers (linux/capability.h) of the names the manifest uses
CAP_NUMBERS = {
    "DAC_READ_SEARCH": 2,
    "SYS_PTRACE": 19,
    "SYS_ADMIN": 21,
    "SYS_RESOURCE": 24,
    "PERFMON": 38,
    "BPF": 39,
}
REQUESTS = 300


def capability_set(pid: str, field: str) -> set[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s*([0-9a-f]+)$", status, re.M)
    assert match, status
    mask = int(match.group(1), 16)
    return {bit for bit in range(64) if mask >> bit & 1}


def bpf_program_fds(pid: int) -> int:
    """How many eBPF programs process `pid` holds open (fds linked to anon_inode:bpf-prog)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += str(fd.readlink()) == "anon_inode:bpf-prog"
        except OSError:
            continue
    return count


def poll_times() -> list[int]:
    return sorted({row["unix_ms"] for row in dataset_rows()})


def test_the_collector_pod_loads_ebpf_with_the_listed_capabilities_only(
    node: Node, collector: dict[str, Any]
) -> None:
    spec = collector["spec"]["containers"][0]
    assert spec["securityContext"]["privileged"] is False
    (cid,) = container_ids(collector).values()
    pids = processes_in(cid)
    assert pids, f"no process of container {cid} on the host"
    croft = [p for p in pids if "croft" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert croft, f"no croft process among {pids}"
    listed = spec["securityContext"]["capabilities"]["add"]
    assert listed == list(CAPABILITIES_5_11)  # deployed with --kernel-5-11-or-later (conftest)
    held = capability_set(str(croft[0]), "CapEff")
    assert held == {CAP_NUMBERS[name] for name in listed}, f"held {sorted(held)}, listed {listed}"
    assert wait_for("the collector's eBPF programs", lambda: bpf_program_fds(croft[0]), 120) > 0
    ready = [c for c in collector["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    mounted = {v["hostPath"]["path"] for v in collector["spec"]["volumes"] if "hostPath" in v}
    assert not mounted & {"/lib/modules", "/usr/src"}, mounted
    url = (
        f"http://{collector['status']['podIP']}:{collector['metadata']['annotations']['prometheus.io/port']}"
    )
    token = {"Authorization": f"Bearer {reader_token(node)}"}  # the collector checks who reads
    served = parse_exposition(httpx.get(f"{url}/metrics", headers=token, timeout=10).text)
    modes = [(s.label(names.LABEL_MODE), s.value) for s in served if s.name == names.EBPF_MODE]
    assert modes == [("core", 1.0)]


def test_rows_carry_the_container_ids_the_api_reports(
    node: Node, collector: dict[str, Any], webapp_image: str, namespace: str
) -> None:
    node.apply(webapp_deployment("webapp", 2, webapp_image), namespace)
    pods = node.wait_ready(namespace, "app=webapp", 2)
    api_ids = {p["metadata"]["uid"]: container_ids(p)["webapp"] for p in pods}
    ips = {p["metadata"]["uid"]: p["status"]["podIP"] for p in pods}
    for ip in ips.values():
        send_requests(ip, 10)

    def rows_by_pod() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for row in dataset_rows():
            for uid in api_ids:
                if f"pod{uid}" in row["process"]["cgroup"] and row["process"]["comm"] != "pause":
                    found.setdefault(uid, set()).add(row["process"]["container_id"])
        return found if set(found) == set(api_ids) else {}

    seen = wait_for("rows of both webapp pods", rows_by_pod, 60)
    assert seen == {uid: {cid} for uid, cid in api_ids.items()}


def test_rows_metrics_and_top_name_each_pod_as_the_api_does(
    node: Node, collector: dict[str, Any], webapp_image: str, namespace: str, tmp_path: Path
) -> None:
    """The collector watches the pods of its node with its ServiceAccount (the manifests' RBAC:
    get, list and watch pods): each row of a pod's container carries the namespace, pod and
    container names the API gives for its container id, the pod's sandbox (pause) its pod by UID
    with no container, and /metrics' series the same labels; croft top shows `namespace/pod` at 80
    and at 160 columns (the screens are kept in SCREENS_DIR for the record)."""
    node.apply(webapp_deployment("named", 2, webapp_image), namespace)
    pods = node.wait_ready(namespace, "app=named", 2)
    expected = {
        container_ids(p)["webapp"]: {"namespace": namespace, "name": p["metadata"]["name"]} for p in pods
    }
    for names_of in expected.values():
        names_of["container"] = "webapp"
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}
    for pod in pods:
        send_requests(pod["status"]["podIP"], 5)  # a busy poll: a row, so the container is served

    def named_rows() -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for row in dataset_rows():
            if row["process"]["container_id"] in expected and "pod" in row:
                found.setdefault(row["process"]["container_id"], []).append(row)
        return found if set(found) == set(expected) else {}

    rows = wait_for("rows of both pods with their names", named_rows, 120)
    for cid, named in rows.items():
        assert all(row["pod"] == expected[cid] for row in named), (cid, expected[cid], named[-1]["pod"])

    def sandboxes() -> list[dict[str, Any]]:
        return [
            row
            for row in dataset_rows()
            if "pod" in row and any(f"pod{uid}" in row["process"]["cgroup"] for uid in uids)
            and row["process"]["container_id"] not in expected
        ]  # fmt: skip

    for row in wait_for("rows of the pods' sandboxes with their pod", sandboxes, 120):
        uid = next(u for u in uids if f"pod{u}" in row["process"]["cgroup"])
        assert row["pod"] == {"namespace": namespace, "name": uids[uid]}, row  # by UID: no container

    port = collector["metadata"]["annotations"]["prometheus.io/port"]
    url = f"http://{collector['status']['podIP']}:{port}"

    token = {"Authorization": f"Bearer {reader_token(node)}"}  # the collector checks who reads

    def labels() -> dict[str, dict[str, str]]:
        # only the CPU series, as croft scale asks for its series (the collector filters them)
        body = httpx.get(
            f"{url}/metrics", params={"name[]": names.CONTAINER_CPU_SECONDS_TOTAL}, headers=token, timeout=10
        ).text
        found = {s.label(names.LABEL_CONTAINER_ID): dict(s.labels) for s in parse_exposition(body)}
        return found if all(found.get(cid, {}).get(names.LABEL_POD) for cid in expected) else {}

    served = wait_for("the pods' series with their names", labels, 90)
    for cid, want in expected.items():
        got = served[cid]
        assert (got["namespace"], got["pod"], got["container"]) == (want["namespace"], want["name"], "webapp")

    out = subprocess.run(
        [CROFT, "top", "--json", str(DATASET_DIR)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    listed = [p for p in json.loads(out.stdout)["processes"] if p["container_id"] in expected]
    assert listed and all(p["pod"] == expected[p["container_id"]] for p in listed), listed
    screens = top_screens(tmp_path, [pod["status"]["podIP"] for pod in pods])
    for width, screen in screens.items():
        titles = next(line for line in screen.splitlines() if " PID " in line).split()
        assert titles[:3] == ["POD", "CONTAINER", "PID"], screen
        assert all(len(line) <= width for line in screen.splitlines()), screen
        for name in uids.values():
            assert f"/{name}" in screen, (width, name, screen)  # the pod's name whole
    wide = next(line for line in screens[160].splitlines() if " PID " in line).split()
    assert {"THR%", "BUSIEST", "COMMAND"} <= set(wide), screens[160]  # 160 shows what 80 leaves out


SCREENS_DIR = Path("/tmp/croft-node-top-screens")


def top_screens(tmp_path: Path, ips: list[str]) -> dict[int, str]:
    """`croft top` on the node's dataset in a tmux pane of 160, then of 80 columns (a session of
    that size each, its pane's size checked), with the pods kept busy so that they sort first;
    each pane as captured, also written to SCREENS_DIR."""
    import shlex
    import shutil
    import threading

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed; `make test` installs it through scripts/system-deps.sh")
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g status off\nset -g remain-on-exit on\n")
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock"), "-f", str(conf)]
    # os.environ, given whole: under pytest the process's own environment (which a child gets by
    # default) carried COLUMNS=80, which tmux passed to the pane and rich then preferred to its size
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    done = threading.Event()

    def load() -> None:
        while not done.is_set():
            for ip in ips:
                try:
                    send_requests(ip, 10)
                except AssertionError:
                    return

    threading.Thread(target=load, daemon=True).start()
    command = "env TERM=tmux-256color " + shlex.join([CROFT, "top", "--interval", "1", str(DATASET_DIR)])
    screens: dict[int, str] = {}
    try:
        for width in (160, 80):
            session = f"top{width}"
            start = ["new-session", "-d", "-s", session, "-x", str(width), "-y", "30", command]
            subprocess.run([*tmux, *start], check=True, env=environment)
            size = subprocess.run(
                [*tmux, "display", "-p", "-t", session, "#{pane_width}x#{pane_height}"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            assert size == f"{width}x30", f"tmux made a {size} pane, not {width}x30"
            time.sleep(3)  # three refreshes: the pods' busy polls are in

            def pane(session: str = session, w: int = width) -> str:
                shown = subprocess.run(
                    [*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
                ).stdout
                whole = " PID " in shown and "POD" in shown and "scroll" in shown
                return shown if whole and max(map(len, shown.splitlines())) <= w else ""

            screens[width] = wait_for(f"croft top at {width} columns", pane, 60)
    finally:
        done.set()
        subprocess.run([*tmux, "kill-server"], check=False, timeout=30, env=environment)
    SCREENS_DIR.mkdir(exist_ok=True)
    for width, screen in screens.items():
        (SCREENS_DIR / f"top-{width}.txt").write_text(screen)
    return screens


def test_cgroup_usage_and_syscall_rates_agree_with_the_cgroup_and_the_load(
    node: Node, collector: dict[str, Any], webapp_image: str, namespace: str
) -> None:
    node.apply(webapp_deployment("webapp", 1, webapp_image), namespace)
    (pod,) = node.wait_ready(namespace, "app=webapp", 1)
    cid = container_ids(pod)["webapp"]
    cgroup = wait_for(
        "the webapp's row",
        lambda: next(
            (r["process"]["cgroup"] for r in dataset_rows() if r["process"]["container_id"] == cid), None
        ),
        60,
    )
    cpuacct = Path("/sys/fs/cgroup/cpuacct") / cgroup.lstrip("/") / "cpuacct.usage"
    memory = Path("/sys/fs/cgroup/memory") / cgroup.lstrip("/") / "memory.usage_in_bytes"
    if not cpuacct.exists():
        cpuacct = Path("/sys/fs/cgroup") / cgroup.lstrip("/") / "cpu.stat"
    before_ms = time.time() * 1000
    used_before = read_cpu_ns(cpuacct)
    send_requests(pod["status"]["podIP"], REQUESTS)
    after_ms = time.time() * 1000
    # the poll that sees the last calls, and one more
    wait_for("two polls after the load", lambda: len([t for t in poll_times() if t > after_ms]) >= 2, 30)
    used_after = read_cpu_ns(cpuacct)
    times = poll_times()
    rows = sorted(
        (r for r in dataset_rows() if r["process"]["container_id"] == cid), key=lambda r: r["unix_ms"]
    )

    def interval_s(row: dict[str, Any]) -> float:
        earlier = [t for t in times if t < row["unix_ms"]]
        return (row["unix_ms"] - earlier[-1]) / 1000 if earlier else 0.0

    polls = [
        (r["unix_ms"], interval_s(r), s["rate_per_sec"])
        for r in rows
        for s in r["syscalls"]
        if s["name"] == "sendto"
    ]
    sendto = sum(rate * seconds for _, seconds, rate in polls)
    # Each poll's (time, interval, rate): an interval of two polls means a poll with no row in the
    # dataset; the same rate twice in a row means a count reported twice.
    assert sendto == pytest.approx(2 * REQUESTS, rel=0.02), f"sendto from the rates: {sendto:.1f} {polls}"
    window = [r for r in rows if before_ms - 2500 < r["unix_ms"]]
    cpu_s = sum(r["cgroup_usage"]["cpu_cores"] * interval_s(r) for r in window)
    assert cpu_s == pytest.approx((used_after - used_before) / 1e9, rel=0.05)
    assert cpu_s >= REQUESTS * CPU_MS / 1000 * 0.9
    last = rows[-1]["cgroup_usage"]["memory_bytes"]
    if memory.exists():
        assert last == pytest.approx(int(memory.read_text()), rel=0.10)


def read_cpu_ns(path: Path) -> int:
    text = path.read_text()
    if path.name == "cpuacct.usage":
        return int(text)
    usage = re.search(r"^usage_usec (\d+)$", text, re.M)
    assert usage, text
    return int(usage.group(1)) * 1000


def test_every_listener_of_the_node_is_on_loopback_or_its_bridge(node: Node) -> None:
    run_dir = Path(node.values["CROFT_K8S_RUN"])
    pids = {int(p.read_text()) for p in run_dir.glob("*.pid")}
    out = subprocess.run(["ss", "-Hltnup"], capture_output=True, text=True, check=True).stdout
    ours = []
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            local = line.split()[4]
            ours.append(local)
            address = local.rsplit(":", 1)[0].strip("[]")
            assert address in ("127.0.0.1", "::1", node.ip), f"a node component listens on {local}: {line}"
    assert any(a.startswith(node.ip) for a in ours) and any(a.startswith("127.0.0.1") for a in ours), ours
