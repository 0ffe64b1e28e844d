"""croft deploy without a cluster or an engine: the docker command parsed back, the no-engine error
for real, the manifests with options applied, the checked-in files, the Dockerfile and its wheel."""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.procparse import parse_cgroup_membership
from croft.domain.collector.selection import parse_watch, watched
from croft.domain.deploy.cluster import object_path
from croft.domain.deploy.manifests import (
    CAPABILITIES,
    DOCKER_WATCH,
    DeployOptions,
    docker_run_argv,
    manifest_header,
    manifests,
)
from tests.helpers.cli import CROFT, croft
from tests.helpers.golden import assert_same_bytes

REPO = Path(__file__).resolve().parents[2]
# printable option values, quotes, spaces and shell metacharacters included
values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)
images = st.from_regex(r"[a-z0-9][a-z0-9./:@_-]{0,40}", fullmatch=True)


@pytest.mark.parametrize(
    ("args", "options"),
    [
        ((), DeployOptions(watch=DOCKER_WATCH)),
        (("--image", "reg.example:5000/croft:1.2", "--watch", "kubepods,system.slice/docker; rm -rf '/'"),
         DeployOptions(image="reg.example:5000/croft:1.2", watch="kubepods,system.slice/docker; rm -rf '/'")),
        (("--kernel-before-5-8",), DeployOptions(watch=DOCKER_WATCH, kernel_before_5_8=True)),
        (("--kernel-5-11-or-later",), DeployOptions(watch=DOCKER_WATCH, kernel_5_11_or_later=True)),
    ],
)  # fmt: skip
def test_docker_dry_run_prints_a_command_that_parses_back_to_the_argv(
    args: tuple[str, ...], options: DeployOptions
) -> None:
    out = croft("deploy", "docker", "--dry-run", *args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n") == 1
    assert tuple(shlex.split(out.stdout)) == docker_run_argv(options)


def test_docker_by_default_watches_the_containers_of_either_cgroup_driver_and_not_the_daemon() -> None:
    """Without --watch a collector on a host with no GPU writes nothing: croft deploy docker's
    default watches Docker's containers, whose cgroups are these captured layouts."""
    out = croft("deploy", "docker", "--dry-run")
    assert out.returncode == 0, out.stderr
    (given,) = [a for a in shlex.split(out.stdout) if a.startswith("--watch=")]
    prefixes = parse_watch(given.removeprefix("--watch="))
    layouts = REPO / "fixtures" / "cgroup-layouts"
    for name, is_container in (
        ("docker-cgroupfs-v1.txt", True),
        ("docker-systemd-v1.txt", True),
        ("docker-systemd-v2.txt", True),
        ("host-docker-daemon-v2.txt", False),
        ("host-user-session-v2.txt", False),
    ):
        membership = parse_cgroup_membership((layouts / name).read_bytes())
        assert watched(membership, prefixes) == is_container, name


@given(image=images, watch=values)
def test_docker_argv_survives_quoting(image: str, watch: str) -> None:
    argv = docker_run_argv(DeployOptions(image=image, watch=watch))
    assert tuple(shlex.split(shlex.join(argv))) == argv
    assert argv[argv.index(image) + 1 :][:1] == ("run",)
    assert f"--watch={watch}" in argv


def test_docker_argv_has_what_the_collector_needs_and_no_more() -> None:
    argv = docker_run_argv(DeployOptions())
    assert {"--pid=host", "--cgroupns=host", "--cap-drop=ALL", "--read-only"} <= set(argv)
    assert [a.removeprefix("--cap-add=") for a in argv if a.startswith("--cap-add=")] == list(CAPABILITIES)
    volumes = [a.removeprefix("--volume=") for a in argv if a.startswith("--volume=")]
    assert [v for v in volumes if not v.endswith(":ro")] == ["/var/lib/croft:/var/lib/croft"]
    assert "--privileged" not in argv
    assert "--publish=127.0.0.1:9464:9464" in argv


@pytest.mark.parametrize("command", ["docker", "kubernetes"])
@pytest.mark.parametrize("image", ["--privileged", "img ; rm -rf /", "", "a b"])
def test_an_image_that_is_no_reference_is_refused(command: str, image: str) -> None:
    out = croft("deploy", command, "--dry-run", f"--image={image}")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("croft: --image ") and out.stderr.count("\n") == 1


def test_docker_without_an_engine_says_so_in_one_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no docker command anywhere on it
    out = croft("deploy", "docker", env=env)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("croft: no Docker engine here") and out.stderr.count("\n") == 1


DAEMON_DOWN = (
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
)


def test_docker_engine_refusing_is_reported(tmp_path: Path) -> None:
    """docker's last words are its advice (`Run 'docker run --help' ...`): the cause, the line
    before them, is what croft says. With the real docker command and no engine where this machine
    has them (no engine here), else a stand-in printing what docker 27 prints."""
    env = dict(os.environ)
    real = shutil.which("docker")
    engine = (
        real is not None and subprocess.run([real, "info"], capture_output=True, check=False).returncode == 0
    )
    if real is None or engine:
        fake = tmp_path / "docker"
        fake.write_text(
            f"#!/bin/sh\necho 'docker: {DAEMON_DOWN}' >&2\necho >&2\n"
            "echo \"Run 'docker run --help' for more information\" >&2\nexit 125\n"
        )
        fake.chmod(0o755)
        env["PATH"] = f"{tmp_path}:{os.environ['PATH']}"
    out = croft("deploy", "docker", "--image", "croft-collector:none", env=env)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        f"croft: docker run failed: {DAEMON_DOWN}; fix that and run croft deploy docker again\n"
    )


def test_the_cause_is_docker_s_last_line_but_its_advice() -> None:
    from croft.adapters.kube.docker import cause

    assert cause(
        "docker: Error response from daemon: No such image: x.\nSee 'docker run --help'.\n", 125
    ) == ("Error response from daemon: No such image: x.")
    assert cause("Run 'docker run --help' for more information\n", 125) == "exit status 125"
    assert cause("", 1) == "exit status 1"


def test_docker_runs_the_argv_without_a_shell(tmp_path: Path) -> None:
    """The argv reaches docker as it is: shell metacharacters in --watch stay one argument."""
    fake = tmp_path / "docker"
    record = tmp_path / "argv"
    fake.write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > {record}\necho 0123456789abcdef\n'
    )
    fake.chmod(0o755)
    image = "img:1"
    watch = "kubepods,$(touch /tmp/croft-pwned) `x`"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = croft("deploy", "docker", "--image", image, "--watch", watch, env=env)
    assert out.returncode == 0, out.stderr
    expected = docker_run_argv(DeployOptions(image=image, watch=watch))[1:]
    assert record.read_bytes().split(b"\0")[:-1] == [a.encode() for a in expected]
    assert not Path("/tmp/croft-pwned").exists()
    assert "0123456789ab" in out.stdout


@pytest.mark.parametrize("text", ["not: [a kubeconfig", "apiVersion: v1\nkind: Config\n", "- 1\n"])
def test_deploy_with_a_bad_kubeconfig_is_one_sentence(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text(text)
    out = subprocess.run([CROFT, "deploy", "kubernetes", "--kubeconfig", str(bad)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 1
    assert (
        out.stderr.startswith("croft: no usable Kubernetes configuration in ") and out.stderr.count("\n") == 1
    )


def test_kubernetes_dry_run_is_the_manifests_with_the_options_applied() -> None:
    out = croft("deploy", "kubernetes", "--dry-run", "--image", "reg/croft:9", "--watch", "kubepods,x",
                "--namespace", "obs")  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert docs == list(manifests(DeployOptions(image="reg/croft:9", watch="kubepods,x", namespace="obs")))
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "reg/croft:9"
    assert "--watch=kubepods,x" in container["args"]
    # namespaced objects in it; cluster-scoped ones (the readers' and the pod reader's RBAC) named
    # after it
    scoped = [d for d in docs if not d["kind"].startswith("Cluster")]
    assert {d["metadata"].get("namespace", d["metadata"]["name"]) for d in scoped} == {"obs"}
    cluster_names = {d["metadata"]["name"] for d in docs if d["kind"].startswith("Cluster")}
    assert "croft-collector-obs" in cluster_names
    assert all(name == "croft-collector-obs" or name.startswith("obs:") for name in cluster_names)


def test_the_daemonset_runs_as_the_issue_asks() -> None:
    ds = next(d for d in manifests(DeployOptions(watch="kubepods")) if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    security = container["securityContext"]
    # the API token: it reads its node's pods, and with --auth kubernetes asks who reads it
    assert pod["hostPID"] is True and pod["automountServiceAccountToken"] is True
    assert "--auth=kubernetes" in container["args"]
    open_ds = next(d for d in manifests(DeployOptions(auth="none")) if d["kind"] == "DaemonSet")
    assert open_ds["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert not any(
        a.startswith("--auth") for a in open_ds["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert security["privileged"] is False and security["capabilities"]["drop"] == ["ALL"]
    assert security["capabilities"]["add"] == list(CAPABILITIES)
    assert {"operator": "Exists"} in pod["tolerations"]  # GPU nodes' nvidia.com/gpu taints too
    assert set(container["resources"]) == {"requests", "limits"}
    mounts = {m["mountPath"]: m["readOnly"] for m in container["volumeMounts"] if "readOnly" in m}
    assert [path for path, ro in mounts.items() if not ro] == ["/var/lib/croft"]
    assert {"name": "dataset", "hostPath": {"path": "/var/lib/croft", "type": "DirectoryOrCreate"}} in pod[
        "volumes"
    ]


def test_the_daemonset_is_shaped_like_other_ebpf_node_agents() -> None:
    docs = manifests(DeployOptions(watch="kubepods", port=9500))
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    template = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]
    pod, container = template["spec"], template["spec"]["containers"][0]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert pod["priorityClassName"] == "system-node-critical"
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in container[
        "env"
    ]
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9500",
        "prometheus.io/path": "/metrics",
    }
    # no kernel headers: the CO-RE programs need the kernel's BTF (in sysfs) and tracefs only
    paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert paths == {"/var/lib/croft", "/sys/fs/cgroup", "/sys/kernel/tracing"}


def test_kernel_5_11_or_later_leaves_sys_resource_out_and_contradicts_before_5_8() -> None:
    ds = next(d for d in manifests(DeployOptions(kernel_5_11_or_later=True)) if d["kind"] == "DaemonSet")
    added = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]
    assert added == ["BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"]
    out = croft("deploy", "kubernetes", "--dry-run", "--kernel-before-5-8", "--kernel-5-11-or-later")
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.strip().endswith("contradict each other; pass one"), out.stderr


def test_the_collector_may_read_pods_and_nothing_else() -> None:
    """RBAC limited to get, list and watch pods (the collector watches its own node's), bound to
    the collector's ServiceAccount in its namespace."""
    docs = manifests(DeployOptions(namespace="obs"))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    account = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "obs"}
    ]
    kinds = [d["kind"] for d in docs]
    assert kinds.index("ClusterRoleBinding") < kinds.index("DaemonSet")  # bound before the pods start
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert object_path(role) == f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}"


def test_checked_in_manifest_is_the_dry_run() -> None:
    out = croft("deploy", "kubernetes", "--dry-run")
    checked_in = (REPO / "deploy/kubernetes/collector.yaml").read_text()
    assert_same_bytes(
        out.stdout.encode(),
        checked_in.encode(),
        "deploy/kubernetes/collector.yaml",
        "it should be croft deploy kubernetes --dry-run; if the change is intended, regenerate it with: "
        "croft deploy kubernetes --dry-run > deploy/kubernetes/collector.yaml",
    )


# --- the image ----------------------------------------------------------------------------------

DOCKERFILE = REPO / "deploy/docker/Dockerfile"


def _ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for plain patterns: the last matching pattern wins, `!` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            ignored = not negate
    return ignored


def test_dockerfile_parses_and_copies_only_what_the_context_lets_in() -> None:
    commands = dockerfile.parse_file(str(DOCKERFILE))
    instructions = [c.cmd for c in commands]
    assert instructions[:2] == ["ARG", "FROM"] and instructions.count("FROM") == 2
    # both stages build FROM the one BASE argument, debian:bookworm-slim unless the build says otherwise
    assert commands[0].value == ("BASE=debian:bookworm-slim",)
    assert all(c.value[0].startswith("${BASE}") for c in commands if c.cmd == "FROM")
    entry = next(c for c in commands if c.cmd == "ENTRYPOINT")
    cmd = next(c for c in commands if c.cmd == "CMD")
    assert entry.json and entry.value == ("croft",)
    assert cmd.json and cmd.value[0] == "run"
    patterns = [
        line.strip()
        for line in (REPO / "deploy/docker/Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for copy in (c for c in commands if c.cmd == "COPY" and not any(f.startswith("--from") for f in c.flags)):
        for source in copy.value[:-1]:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert not _ignored(source, patterns), f"COPY {source}: excluded by Dockerfile.dockerignore"
    assert _ignored("tests/unit/test_deploy.py", patterns) and _ignored(".venv", patterns)
    run_lines = " ".join(" ".join(c.value) for c in commands if c.cmd == "RUN")
    assert "libbpf1" in run_lines and "pip wheel" in run_lines
    for gone in ("bpfcc", "llvm", "clang", "linux-headers"):  # the image compiles nothing
        assert gone not in run_lines


@pytest.mark.slow
def test_the_wheel_the_image_installs_builds(tmp_path: Path) -> None:
    """The Dockerfile's `pip wheel --no-deps` (with build isolation, as in the image)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
         "--wheel-dir", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("croft-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "croft/bpf/syscalls.c",
        "croft/bpf/croft.x86.bpf.o",
        "croft/bpf/croft.arm64.bpf.o",
        "croft/adapters/host/syscalls/x86_64.tbl",
        "croft/adapters/host/syscalls/aarch64.tbl",
        "croft/domain/collector/frameworks.toml",
        "croft/app/cli.py",
        "croft/py.typed",
    } <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "croft = croft.app.cli:entrypoint" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_undeploy_deletes_croft_objects_last_applied_first_and_guards_the_namespace() -> None:
    from croft.domain.deploy.manifests import DeployOptions, manifests
    from croft.domain.deploy.undeploy import plan

    docs = manifests(DeployOptions(image="croft-collector", namespace="croft", auth="none"))
    labelled = {"metadata": {"labels": {"app.kubernetes.io/part-of": "croft"}}}
    everything = dict.fromkeys(range(len(docs)), labelled)
    steps = plan(docs, everything, [])
    assert [s.manifest["kind"] for s in steps] == [
        "Role",
        "Service",
        "DaemonSet",
        "ClusterRoleBinding",
        "ClusterRole",
        "ServiceAccount",
        "Namespace",
    ]
    assert all(s.delete for s in steps)

    kept = plan(docs, everything, ["web-0", "web-1"])
    assert not kept[-1].delete and kept[-1].why == "other pods run in it (web-0, web-1): kept"
    assert all(s.delete for s in kept[:-1])

    daemonset = next(i for i, d in enumerate(docs) if d["kind"] == "DaemonSet")
    foreign = plan(docs, {**everything, daemonset: {"metadata": {"labels": {}}}}, [])
    assert [s.delete for s in foreign] == [True, True, False, True, True, True, True]
    assert foreign[2].why.startswith("not croft's")
    assert [s.why for s in plan(docs, {}, [])] == ["not there"] * 7

    system = manifests(DeployOptions(image="croft-collector", namespace="kube-system"))
    assert not plan(system, dict.fromkeys(range(len(system)), labelled), [])[-1].delete

    # --auth kubernetes: the readers' RBAC goes first, its cluster-scoped objects too
    checked = manifests(DeployOptions(image="croft-collector", namespace="croft"))
    kinds = [s.manifest["kind"] for s in plan(checked, dict.fromkeys(range(len(checked)), labelled), [])]
    readers = ["ClusterRoleBinding", "ServiceAccount", "ClusterRole"]
    assert kinds == ["Role", *readers, *readers, "ClusterRoleBinding", "Role", "Service", "DaemonSet",
                     "ClusterRoleBinding", "ClusterRole", "ServiceAccount", "Namespace"]  # fmt: skip


def test_the_network_policy_admits_only_its_two_sources_to_the_collectors_port() -> None:
    """deploy/kubernetes/networkpolicy.yaml (an example to edit: no CNI here enforces it) selects
    the collector pods of the manifests and opens their port to an ipBlock and to Prometheus only."""
    (policy,) = yaml.safe_load_all((REPO / "deploy/kubernetes/networkpolicy.yaml").read_text())
    daemonset = next(d for d in manifests(DeployOptions()) if d["kind"] == "DaemonSet")
    pod = daemonset["spec"]["template"]
    assert policy["kind"] == "NetworkPolicy" and policy["metadata"]["namespace"] == DeployOptions().namespace
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    port_names = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert [p["port"] for p in rule["ports"]] == ["http"] and "http" in port_names
    assert [sorted(peer) for peer in rule["from"]] == [["ipBlock"], ["namespaceSelector", "podSelector"]]


def _daemonset_pod(options: DeployOptions) -> dict[str, Any]:
    ds = next(d for d in manifests(options) if d["kind"] == "DaemonSet")
    pod: dict[str, Any] = ds["spec"]["template"]["spec"]
    return pod


def test_the_probes_restart_a_stopped_loop_and_nothing_else() -> None:
    """Liveness asks /livez (fails only once no poll came for 2 minutes), never /healthz (stale for
    a slow poll, unhealthy for 5 minutes after a live file was taken away) nor /metrics (which needs
    a reader's token); a startup probe gives the first load 5 minutes; none needs a token."""
    from croft.domain.access import protected_route
    from croft.domain.metrics.health import LIVE_STALE_AFTER_NS

    container = _daemonset_pod(DeployOptions())["containers"][0]
    startup, ready, live = (container[p] for p in ("startupProbe", "readinessProbe", "livenessProbe"))
    assert (startup["httpGet"]["path"], ready["httpGet"]["path"], live["httpGet"]["path"]) == (
        "/healthz", "/healthz", "/livez"
    )  # fmt: skip
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
    assert all(protected_route(p["httpGet"]["path"]) is None for p in (startup, ready, live))
    # a restart needs the loop stopped for its 120 s and the probe's failures after it
    assert LIVE_STALE_AFTER_NS / 1e9 + live["periodSeconds"] * live["failureThreshold"] >= 180


def test_requests_give_weight_limits_bound_memory_and_the_rollout_is_a_share_of_the_nodes() -> None:
    docs = manifests(DeployOptions())
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    resources = ds["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "10%"
    assert DeployOptions().image.endswith(":0.1.0") and "latest" not in DeployOptions().image


@pytest.mark.parametrize("disk_gib", [3, 10, 64])
def test_the_retention_keeps_the_dataset_within_the_disk_the_manifest_says_it_reserves(disk_gib: int) -> None:
    """Segments (retain-bytes) plus the live file and a closed one being compressed (rotate-bytes
    each) are the disk the header reserves, and the collector is started with those limits."""
    options = DeployOptions(disk_gib=disk_gib)
    args = _daemonset_pod(options)["containers"][0]["args"]
    retain = int(next(a for a in args if a.startswith("--retain-bytes=")).split("=")[1])
    rotate = int(next(a for a in args if a.startswith("--rotate-bytes=")).split("=")[1])
    assert retain + 2 * rotate == disk_gib << 30
    header = manifest_header(options)
    assert f"up to {disk_gib} GiB of /var/lib/croft" in header and f"--retain-bytes={retain}" in header
    assert DeployOptions(disk_gib=2).problem() is not None


# The Pod Security Standards' rules that can concern this pod
# (kubernetes.io/docs/concepts/security/pod-security-standards), as the data of a pod spec: a rule
# and the check whether the pod breaks it.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip


def broken_rules(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """(level, rule) of each Pod Security Standards rule `pod` breaks."""
    container = pod["containers"][0]
    security = container.get("securityContext", {})
    added = set(security.get("capabilities", {}).get("add", []))
    found: set[tuple[str, str]] = set()
    if pod.get("hostPID") or pod.get("hostNetwork") or pod.get("hostIPC"):
        found.add(("baseline", "Host Namespaces"))
    if security.get("privileged"):
        found.add(("baseline", "Privileged Containers"))
    if added - BASELINE_CAPABILITIES:
        found.add(("baseline", "Capabilities"))
    if any("hostPath" in v for v in pod.get("volumes", [])):
        found.add(("baseline", "HostPath Volumes"))
    if any(p.get("hostPort") for p in container.get("ports", [])):
        found.add(("baseline", "Host Ports"))
    if security.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.add(("restricted", "Seccomp"))
    if any(not set(v) - {"name"} <= RESTRICTED_VOLUMES for v in pod.get("volumes", [])):
        found.add(("restricted", "Volume Types"))
    if security.get("allowPrivilegeEscalation") is not False:
        found.add(("restricted", "Privilege Escalation"))
    if not security.get("runAsNonRoot") or security.get("runAsUser") == 0:
        found.add(("restricted", "Running as Non-root"))
    if security.get("capabilities", {}).get("drop") != ["ALL"] or added - {"NET_BIND_SERVICE"}:
        found.add(("restricted", "Capabilities"))
    return found


def test_the_pod_breaks_exactly_the_pod_security_rules_its_manifest_lists_with_a_reason() -> None:
    from croft.domain.deploy.manifests import PSS_EXCEPTIONS

    for options in (DeployOptions(), DeployOptions(kernel_5_11_or_later=True)):
        listed = {(level, rule.split(":")[0]) for level, rule, _ in PSS_EXCEPTIONS}
        assert broken_rules(_daemonset_pod(options)) == listed
        header = manifest_header(options)
        assert all(f"{rule}: {why}" in header for _, rule, why in PSS_EXCEPTIONS)
    # the checker finds what it is for: a privileged pod with host networking breaks more
    loud = {**_daemonset_pod(DeployOptions()), "hostNetwork": True}
    loud["containers"] = [{**loud["containers"][0], "securityContext": {"privileged": True}}]
    assert {("baseline", "Privileged Containers"), ("restricted", "Privilege Escalation"),
            ("restricted", "Seccomp")} <= broken_rules(loud)  # fmt: skip
