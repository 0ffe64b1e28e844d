"""What `croft deploy` starts, as pure values: the `docker run` argument list and the Kubernetes
objects (decoded-JSON dicts) with the options applied. The shell quotes, renders, runs or applies them.

Host paths the collector needs, each read-only unless said otherwise:

- `/proc` of the host, through the host's pid namespace (`--pid host`, `hostPID: true`): every
  process's stat, status, io, fds, cgroup membership;
- `/sys/fs/cgroup`: the containers' CPU, throttling, memory, OOM kills and PSI;
- `/sys/kernel/tracing` (tracefs): the ids of the tracepoints libbpf attaches croft's programs to.
  No kernel headers: the programs are precompiled CO-RE objects in the image, relocated by libbpf
  against the kernel's own BTF (/sys/kernel/btf/vmlinux, in the container's sysfs);
- `/var/lib/croft`, read-write: the dataset.

Capabilities, everything else dropped (kernel >= 5.8, where CAP_BPF and CAP_PERFMON exist); the
pod is not privileged:

- BPF: load programs and create maps (bpf(2));
- PERFMON: load tracing programs that read kernel memory and attach them to tracepoints (without
  it the kernel refuses sched_switch's program: EPERM);
- SYS_RESOURCE: raise RLIMIT_MEMLOCK, which kernels before 5.11 charge BPF maps against;
- SYS_PTRACE: read other processes' /proc/<pid>/{exe,cwd,io,fd} (ptrace access checks);
- DAC_READ_SEARCH: walk /proc/<pid>/fd and cgroup directories owned by other users.

On kernels before 5.8 BPF and PERFMON do not exist: add SYS_ADMIN instead (`kernel_before_5_8`).
From 5.11 the kernel charges BPF maps to the memory cgroup, not RLIMIT_MEMLOCK: SYS_RESOURCE can be
left out (`kernel_5_11_or_later`), for hosts whose runtime cannot grant it (a runtime whose own
bounding set lacks it fails every container that asks: "unable to apply caps").
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from croft.domain.access import AUTH_MODES, DATASET_READER
from croft.domain.deploy.labels import APP_LABEL, METRICS_PORT, SELECTOR
from croft.domain.deploy.readers import reader_manifests, reader_role

DATASET_DIR = "/var/lib/croft"
DOCKER_WATCH = "docker/,system.slice/docker-"
"""`croft deploy docker`'s default --watch: Docker's containers under either cgroup driver
(cgroupfs: `/docker/<id>`; systemd: `/system.slice/docker-<id>.scope`), and not the daemon itself
(`/system.slice/docker.service`): without it a host with no GPU would record nothing."""
LIVE_NAME = "croft-dataset.jsonl"
CAPABILITIES = ("BPF", "PERFMON", "SYS_RESOURCE", "SYS_PTRACE", "DAC_READ_SEARCH")
CAPABILITIES_5_11 = tuple(c for c in CAPABILITIES if c != "SYS_RESOURCE")
OLD_KERNEL_CAPABILITIES = ("SYS_ADMIN", "SYS_RESOURCE", "SYS_PTRACE", "DAC_READ_SEARCH")
# (volume name, host path, mounted read-only, hostPath type)
HOST_PATHS = (
    ("dataset", DATASET_DIR, False, "DirectoryOrCreate"),
    ("cgroup", "/sys/fs/cgroup", True, "Directory"),
    ("tracefs", "/sys/kernel/tracing", True, "Directory"),
)
# Pod Security Admission: hostPID, hostPath volumes and CAP_BPF/CAP_PERFMON are outside the
# `baseline` and `restricted` levels, so the namespace must allow `privileged` pods (the pod itself
# is not privileged: it runs with the capabilities above only).
PSA_LABELS = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}

Manifest = dict[str, Any]
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")


def image_problem(image: str) -> str | None:
    """Why `image` is not an image reference (`name[:tag][@digest]`, optionally with a registry),
    or None. A leading dash would make `docker run` read it as an option, so it is refused."""
    if _IMAGE.fullmatch(image) is None:
        example = "croft-collector or reg.example/croft:1.2"
        return f"--image {image!r:.80} is not an image reference such as {example}"
    return None


@attrs.frozen
class DeployOptions:
    """`image` the collector image, `watch` the comma-separated cgroup prefixes of `croft run
    --watch`, `namespace` where the Kubernetes objects go, `kernel_before_5_8` swaps CAP_BPF and
    CAP_PERFMON for CAP_SYS_ADMIN, `kernel_5_11_or_later` leaves CAP_SYS_RESOURCE out,
    `dataset_dir` is the host directory the collector writes, `auth` who may read its endpoints on
    Kubernetes (`croft.domain.access`: "kubernetes" or "none")."""

    image: str = "croft-collector"
    watch: str = ""
    namespace: str = "croft"
    port: int = METRICS_PORT
    kernel_before_5_8: bool = False
    kernel_5_11_or_later: bool = False
    dataset_dir: str = DATASET_DIR  # the host's directory mounted as the dataset
    auth: str = "kubernetes"  # the DaemonSet's `croft run --auth` (Docker's publishes on loopback only)

    @property
    def capabilities(self) -> tuple[str, ...]:
        if self.kernel_before_5_8:
            return OLD_KERNEL_CAPABILITIES
        return CAPABILITIES_5_11 if self.kernel_5_11_or_later else CAPABILITIES

    def problem(self) -> str | None:
        """Why these options contradict each other, or None."""
        if self.kernel_before_5_8 and self.kernel_5_11_or_later:
            return "--kernel-before-5-8 and --kernel-5-11-or-later contradict each other; pass one"
        if self.auth not in AUTH_MODES:
            return f"--auth {self.auth!r:.40} is not one of {', '.join(AUTH_MODES)}; give kubernetes or none"
        if (
            not self.dataset_dir.startswith("/")
            or not self.dataset_dir.isprintable()
            or ":" in self.dataset_dir
        ):
            shown = f"{self.dataset_dir!r:.100}"
            return f"--dataset-dir {shown} is not an absolute host path; give e.g. {DATASET_DIR}"
        return None

    def collector_args(self) -> list[str]:
        """The arguments after `croft` in the container."""
        args = ["run", f"--dataset={DATASET_DIR}/{LIVE_NAME}", f"--metrics-addr=0.0.0.0:{self.port}"]
        return [*args, f"--watch={self.watch}"] if self.watch else args


def docker_run_argv(options: DeployOptions, name: str = APP_LABEL) -> tuple[str, ...]:
    """The `docker run` argument list: detached, restarted unless stopped, the host's pid, cgroup and
    UTS namespaces (the host name rows carry as their node), the capabilities above and no others, a
    read-only root with a tmpfs /tmp, the host paths above, /metrics and the dataset published on the
    host's loopback only."""
    argv = ["docker", "run", "--detach", f"--name={name}", "--restart=unless-stopped"]
    argv += ["--pid=host", "--cgroupns=host", "--uts=host", "--cap-drop=ALL"]  # uts: rows name the host
    argv += [f"--cap-add={cap}" for cap in options.capabilities]
    argv += ["--read-only", "--tmpfs=/tmp", "--security-opt=no-new-privileges"]
    for name, path, read_only, _ in HOST_PATHS:
        host = options.dataset_dir if name == "dataset" else path
        argv.append(f"--volume={host}:{path}{':ro' if read_only else ''}")
    argv += [f"--publish=127.0.0.1:{options.port}:{options.port}", options.image]
    return (*argv, *options.collector_args())


def _labels() -> dict[str, str]:
    return {**SELECTOR, "app.kubernetes.io/part-of": "croft"}


def _meta(name: str, options: DeployOptions) -> dict[str, Any]:
    return {"name": name, "namespace": options.namespace, "labels": _labels()}


def _container(options: DeployOptions) -> dict[str, Any]:
    return {
        "name": "collector",
        "image": options.image,
        "command": ["croft"],
        "args": [*options.collector_args(), *(["--auth=kubernetes"] if options.auth == "kubernetes" else [])],
        # On GPU nodes the NVIDIA container runtime mounts NVML and the device nodes for these,
        # without taking a GPU from the scheduler; elsewhere they are ignored.
        "env": [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
            # rows name the node, not the pod (a DaemonSet pod's host name is the pod's name)
            {"name": "CROFT_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # the node's name, from the downward API (for logs and whoever reads the environment)
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "ports": [{"name": "http", "containerPort": options.port, "protocol": "TCP"}],
        "resources": {
            # benchmarks/collector_run.py: 43 MB steady with 1,000 watched processes (CO-RE)
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        # Ready once polls are current: /healthz answers 200 while the newest poll is fresh.
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            # "/" answers while the server runs, without a token (/metrics needs one: --auth kubernetes)
            "httpGet": {"path": "/", "port": "http"},
            "initialDelaySeconds": 30,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "securityContext": {
            "privileged": False,
            "runAsUser": 0,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": list(options.capabilities)},
        },
        "volumeMounts": [
            *({"name": vol, "mountPath": path, "readOnly": ro} for vol, path, ro, _ in HOST_PATHS),
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }


def daemonset(options: DeployOptions) -> Manifest:
    """The collector DaemonSet: one pod per node, every taint tolerated so GPU nodes (and tainted
    nodes of every kind) get one, host pid namespace, its ServiceAccount's token mounted: the
    collector lists and watches the pods of its node, to name rows and series by pod."""
    volumes: list[dict[str, Any]] = [
        {"name": vol, "hostPath": {"path": options.dataset_dir if vol == "dataset" else path, "type": kind}}
        for vol, path, _, kind in HOST_PATHS
    ]
    volumes.append({"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}})
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(APP_LABEL, options),
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": _labels(),
                    # for Prometheus' kubernetes_sd_configs pod role and the usual relabelling
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(options.port),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "serviceAccountName": APP_LABEL,
                    # evicted last under node pressure, as node agents (CNI, kube-proxy) are
                    "priorityClassName": "system-node-critical",
                    # the collector reads the pods of its node (pod_reader: get, list and watch pods),
                    # and asks the API server who reads /metrics and /dataset (--auth kubernetes)
                    "automountServiceAccountToken": True,
                    "hostPID": True,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 30,
                    "containers": [_container(options)],
                    "volumes": volumes,
                },
            },
        },
    }


def pod_reader(options: DeployOptions) -> tuple[Manifest, Manifest]:
    """The ClusterRole that lets the collector read pods (get, list and watch: it lists and watches
    those of its own node, `spec.nodeName`, and nothing else) and its binding to the collector's
    ServiceAccount. Pods are in every namespace, so the role is a cluster's; both are named after
    the collector's namespace, so that two deployments never share (or delete) each other's."""
    name = f"{APP_LABEL}-{options.namespace}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": _labels()},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": _labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": APP_LABEL, "namespace": options.namespace}],
    }
    return role, binding


def manifests(options: DeployOptions) -> tuple[Manifest, ...]:
    """Every object `croft deploy kubernetes` applies, in apply order: the namespace, the
    collector's ServiceAccount, its ClusterRole to read pods and the binding, the DaemonSet, a
    headless Service for /metrics and the dataset endpoint (port `http`), and the Role `croft
    collect` needs (list pods, get pods/proxy)."""
    ns = options.namespace
    return (
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"app.kubernetes.io/part-of": "croft", **PSA_LABELS}},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(APP_LABEL, options),
            "automountServiceAccountToken": False,
        },
        *pod_reader(options),
        daemonset(options),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(APP_LABEL, options),
            "spec": {
                "clusterIP": "None",
                "selector": dict(SELECTOR),
                "ports": [{"name": "http", "port": options.port, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        reader_role("croft-collect", ns, DATASET_READER),
        *(reader_manifests(ns, APP_LABEL) if options.auth == "kubernetes" else ()),
    )


def manifest_header(options: DeployOptions) -> str:
    """The comment block above the rendered manifests: what each host path and capability is for."""
    access = (_CHECKED if options.auth == "kubernetes" else _OPEN).format(namespace=options.namespace)
    return _HEADER.format(namespace=options.namespace, port=options.port, access=access)


_HEADER = """\
# croft's collector as a DaemonSet: `croft deploy kubernetes` applies these objects (server-side
# apply); `croft deploy kubernetes --dry-run` prints them with its options applied.
#
# Host paths (hostPath volumes), read-only unless said:
#   /proc via hostPID     every process's stat, status, io, fds and cgroup membership
#   /sys/fs/cgroup        container CPU, throttling, memory, OOM kills, PSI
#   /sys/kernel/tracing   tracefs: the ids of the tracepoints libbpf attaches the programs to
#   /var/lib/croft        read-write: the dataset (croft collect pulls it through the pod proxy)
# No kernel headers: the eBPF programs are precompiled CO-RE objects, relocated by libbpf against
# the kernel's BTF (/sys/kernel/btf/vmlinux). A node without BTF runs without eBPF (no syscalls,
# ioctls or ingress arrivals in its rows; croft_ebpf_mode{{mode="off"}} on /metrics).
#
# The namespace carries the Pod Security Admission level `privileged`: hostPID, hostPath volumes and
# CAP_BPF/CAP_PERFMON fall outside `baseline`. The pod is still not privileged (the capabilities
# below only). priorityClassName system-node-critical: evicted last, as other node agents are.
# Ready while /healthz says the polls are current; the pod's prometheus.io/* annotations let a
# Prometheus with the usual kubernetes_sd_configs pod relabelling scrape it.
#
# The collector's ServiceAccount may get, list and watch pods (ClusterRole croft-collector-{namespace}):
# it watches those of its own node (field selector spec.nodeName) to name rows and /metrics series by
# namespace, pod and container. Without it the collector runs as before, with container ids only.
#
# Capabilities, all others dropped (Linux >= 5.8):
#   BPF              load programs, create maps
#   PERFMON          load tracing programs that read kernel memory, attach them to tracepoints
#   SYS_RESOURCE     raise RLIMIT_MEMLOCK (kernels before 5.11 charge BPF maps to it)
#   SYS_PTRACE       read other processes' /proc/<pid>/{{exe,cwd,io,fd}}
#   DAC_READ_SEARCH  walk /proc/<pid>/fd and cgroup directories of other users
# Before 5.8 the kernel knows neither BPF nor PERFMON: use SYS_ADMIN instead of both
# (croft deploy kubernetes --kernel-before-5-8).
#
# Port {port} ("http") serves /metrics and the read-only dataset endpoint (/dataset/: the dataset
# directory's own files, with HTTP Range).
{access}"""

_CHECKED = """\
# Each answers only a reader whose bearer token the API server's TokenReview accepts and whose
# SubjectAccessReview allows get on the route as a non-resource URL (croft run --auth kubernetes; the
# collector's ServiceAccount is bound to system:auth-delegator for that). The ClusterRoles
# {namespace}:croft-metrics-reader and {namespace}:croft-dataset-reader grant one route each;
# /healthz and / answer everyone (the kubelet's probes). `croft collect` needs the Role
# croft-collect, croft scale the Role croft-metrics (each asks for a 10-minute token of its
# reader's ServiceAccount); bind them to their users:
#   kubectl -n {namespace} create rolebinding croft-collect --role=croft-collect --user=<you>
# Prometheus scrapes with its own ServiceAccount's token (authorization: credentials_file); where its
# ClusterRole does not grant the non-resource URL /metrics already:
#   kubectl create clusterrolebinding prometheus-croft \\
#     --clusterrole={namespace}:croft-metrics-reader --serviceaccount=<namespace>:<prometheus>
# deploy/kubernetes/networkpolicy.yaml also narrows who reaches the port, where the CNI enforces it.
"""

_OPEN = """\
# --auth none: whoever reaches a pod's IP can read its dataset; restrict it with a NetworkPolicy
# where the pod network is shared. `croft collect` needs the Role croft-collect; bind it to its user:
#   kubectl -n {namespace} create rolebinding croft-collect --role=croft-collect --user=<you>
"""
