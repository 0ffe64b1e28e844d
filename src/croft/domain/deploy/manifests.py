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

from croft import __version__
from croft.domain.access import AUTH_MODES, DATASET_READER
from croft.domain.deploy.labels import APP_LABEL, METRICS_PORT, SELECTOR
from croft.domain.deploy.readers import reader_manifests, reader_role

DATASET_DIR = "/var/lib/croft"
DEFAULT_IMAGE = f"croft-collector:{__version__}"
"""The collector image without --image: tagged with this croft's version, never `latest`, so that
a node pulls the image of the croft that deployed it."""
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
# Pod Security Admission: the collector's pod is outside the `baseline` and `restricted` levels (the
# exceptions below, each with its reason), so its namespace allows `privileged` pods; the pod itself
# is not privileged (the capabilities above only).
PSA_LABELS = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
PSS_EXCEPTIONS: tuple[tuple[str, str, str], ...] = (
    # (level whose rule it breaks, the rule as the Pod Security Standards name it, why)
    ("baseline", "Host Namespaces: hostPID", "every process's /proc (stat, io, fds, cgroup) is read"),
    ("baseline", "HostPath Volumes", "/sys/fs/cgroup, /sys/kernel/tracing and the dataset directory"),
    ("baseline", "Capabilities: BPF, PERFMON", "load and attach the eBPF programs, create their maps"),
    ("baseline", "Capabilities: SYS_PTRACE, DAC_READ_SEARCH", "other users' /proc/<pid>/{exe,cwd,io,fd}"),
    ("baseline", "Capabilities: SYS_RESOURCE (before Linux 5.11)", "RLIMIT_MEMLOCK for the eBPF maps"),
    ("restricted", "Volume Types: hostPath", "as above"),
    ("restricted", "Running as Non-root", "reads every user's /proc; the capabilities are root's"),
    ("restricted", "Capabilities: only NET_BIND_SERVICE may be added", "as above"),
)
"""Every rule of the Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards)
the DaemonSet's pod breaks, and why; tests/unit/test_deploy.py checks the pod against the
standards' rules and finds exactly these. It keeps the others: not privileged, no host network or
IPC, no host ports, capabilities dropped but these, no privilege escalation, the runtime's default
seccomp profile, a read-only root file system."""
DISK_GIB = 10
"""The host disk the DaemonSet's dataset may take on each node, GiB: a hostPath volume is outside
the kubelet's ephemeral-storage accounting, so the collector's retention is what bounds it."""

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

    image: str = DEFAULT_IMAGE
    watch: str = ""
    namespace: str = "croft"
    port: int = METRICS_PORT
    kernel_before_5_8: bool = False
    kernel_5_11_or_later: bool = False
    dataset_dir: str = DATASET_DIR  # the host's directory mounted as the dataset
    auth: str = "kubernetes"  # the DaemonSet's `croft run --auth` (Docker's publishes on loopback only)
    disk_gib: int = DISK_GIB  # the most disk the dataset takes (`retain_bytes`)

    @property
    def rotate_bytes(self) -> int:
        """The live file's size at rotation: croft run's default, 1 GiB."""
        return 1 << 30

    @property
    def retain_bytes(self) -> int:
        """`--retain-bytes`, so that the dataset stays within `disk_gib`: the segments retention
        keeps, plus the live file and a closed one waiting to be compressed (a rotation's size each)."""
        return (self.disk_gib << 30) - 2 * self.rotate_bytes

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
        if not 3 <= self.disk_gib <= 1 << 20:
            return (
                f"--disk-gib {self.disk_gib} is out of range; give GiB from 3 (two rotations and one segment)"
            )
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
        args = [
            "run",
            f"--dataset={DATASET_DIR}/{LIVE_NAME}",
            f"--metrics-addr=0.0.0.0:{self.port}",
            f"--rotate-bytes={self.rotate_bytes}",
            f"--retain-bytes={self.retain_bytes}",
        ]
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
        # On GPU nodes the NVIDIA container runtime mounts NVML (libnvidia-ml, `utility`: no compute
        # libraries) and the device nodes NVML queries (/dev/nvidiactl, /dev/nvidia<N>), without
        # taking a GPU from the scheduler (no nvidia.com/gpu request): NVML opens every GPU to list
        # its processes' memory and utilisation, so `all`; elsewhere these are ignored.
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
            # From `make bench` (benchmarks/collector_run.py, CO-RE, 2 s polls, a 2-core VM): RSS 43 MB
            # steady with 1,000 processes, 73 MB steady and 78 MB peak with 10,000; CPU 0.34 % and
            # 1.36 % of a core. The CPU request is for weight, not use: under a 300-process burst
            # in a sibling cgroup, polls came 4 s apart at 100m (102 shares) and 16 s apart without
            # a request (2 shares). No CPU limit: a CFS quota spent by the hourly compression would
            # stop the poll thread for the rest of its period.
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        # All three probes ask pages that need no token under --auth kubernetes.
        # Started once a first poll is published (/healthz 200): up to 5 minutes for a first load.
        "startupProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 60,
        },
        # Ready while polls are current: /healthz answers 200 while the newest poll is under 10 s old
        # (and 503 for 5 minutes after the live file was taken away under it).
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        # Alive while the poll loop runs: /livez fails once no poll was published for 120 s (a hung
        # loop), never for slow polls, a full disk (polls go on, rows are dropped and counted) or
        # readiness; restarted after three more failures a minute apart.
        "livenessProbe": {
            "httpGet": {"path": "/livez", "port": "http"},
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "securityContext": {
            "privileged": False,
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "seccompProfile": {"type": "RuntimeDefault"},
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
            # a tenth of the nodes at a time: a thousand nodes roll out in ten steps, not a thousand
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
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
    exceptions = "\n".join(f"#   {level:<10} {rule}: {why}" for level, rule, why in PSS_EXCEPTIONS)
    return _HEADER.format(
        namespace=options.namespace,
        port=options.port,
        access=access,
        exceptions=exceptions,
        disk_gib=options.disk_gib,
        dataset_dir=options.dataset_dir,
        retain_bytes=options.retain_bytes,
        rotate_bytes=options.rotate_bytes,
    )


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
# Pod Security: the namespace carries the Admission level `privileged`, because the pod breaks
# these rules of the Pod Security Standards (and keeps every other: not privileged, no host
# network, IPC or ports, no privilege escalation, the runtime's default seccomp profile, a read-only
# root, all other capabilities dropped):
{exceptions}
# priorityClassName system-node-critical: evicted last, as other node agents are. Started once a
# first poll is published and ready while polls are current (/healthz), alive while the poll loop
# runs (/livez: restarted once no poll came for over 2 minutes, never for a slow poll or a full
# disk). The pod's prometheus.io/* annotations let a Prometheus with the usual
# kubernetes_sd_configs pod relabelling scrape it. The rollout replaces a tenth of the nodes at a time.
#
# Disk: the dataset is a hostPath, outside the kubelet's ephemeral-storage accounting: each node
# gives it up to {disk_gib} GiB of {dataset_dir} (croft deploy kubernetes --disk-gib): the segments
# retention keeps (--retain-bytes={retain_bytes}), the live file and a closed one being compressed
# (--rotate-bytes={rotate_bytes} each).
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
