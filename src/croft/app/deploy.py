"""croft deploy: start the collector on Docker or Kubernetes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import App, Parameter

from croft.app.options import check_number
from croft.domain.deploy.manifests import DATASET_DIR, DEFAULT_IMAGE, DISK_GIB, DOCKER_WATCH
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.adapters.kube.cluster import Kube
    from croft.domain.deploy.manifests import DeployOptions

deploy_app = App(name="deploy", help="start the collector on Docker or Kubernetes")

OldKernel = Annotated[
    bool,
    Parameter(
        name="--kernel-before-5-8",
        negative=(),
        help="the hosts run Linux older than 5.8: CAP_SYS_ADMIN instead of CAP_BPF and CAP_PERFMON",
    ),
]

NewKernel = Annotated[
    bool,
    Parameter(
        name="--kernel-5-11-or-later",
        negative=(),
        help="the hosts run Linux 5.11 or later (BPF maps charged to the memory cgroup): no CAP_SYS_RESOURCE",
    ),
]


DatasetDirOpt = Annotated[
    str,
    Parameter(
        help="the host directory the collector writes its dataset to (one collector per directory: "
        "give tests and second collectors their own)"
    ),
]
DiskOpt = Annotated[
    int,
    Parameter(
        help="GiB of the host's disk the dataset may take: its retention keeps the segments within it, "
        "beside the live file and one being compressed (1 GiB each)"
    ),
]


ImageOpt = Annotated[
    str | None,
    Parameter(
        help="the collector image, e.g. registry.example.com/croft-collector:0.1.0; default "
        f"{DEFAULT_IMAGE} (this croft's version), built with: docker build -f deploy/docker/Dockerfile "
        f"-t {DEFAULT_IMAGE} ."
    ),
]


def checked_options(*, image: str | None, **given: Any) -> DeployOptions:
    """The deploy options of a command's arguments (the default image without --image); a
    `UserError` saying what is wrong with them."""
    from croft.domain.deploy.manifests import DeployOptions, image_problem

    options = DeployOptions(image=DEFAULT_IMAGE if image is None else image, **given)
    if problem := image_problem(options.image) or options.problem():
        raise UserError(problem)
    return options


def image_note(image: str | None, where: str) -> str | None:
    """Without --image, the note (for stderr, once the command has done its work) saying which
    image and tag are used and how to build and push one."""
    if image is not None:
        return None
    return (
        f"croft: no --image: using {DEFAULT_IMAGE} (this croft's version), which {where}; build it with "
        f"`docker build -f deploy/docker/Dockerfile -t {DEFAULT_IMAGE} .` (push it to a registry the "
        "nodes pull from and pass --image REGISTRY/croft-collector:TAG)"
    )


def _note(text: str | None) -> None:
    if text is not None:
        print(text, file=sys.stderr)


@deploy_app.command
def docker(
    *,
    image: ImageOpt = None,
    watch: Annotated[
        str,
        Parameter(
            help="comma-separated cgroup path prefixes to watch; the default is Docker's containers "
            "under either cgroup driver"
        ),
    ] = DOCKER_WATCH,
    dry_run: Annotated[bool, Parameter(negative=(), help="print the docker run command instead")] = False,
    kernel_before_5_8: OldKernel = False,
    kernel_5_11_or_later: NewKernel = False,
    dataset_dir: DatasetDirOpt = DATASET_DIR,
    disk_gib: DiskOpt = DISK_GIB,
) -> int:
    """Run the collector in a Docker container on this host."""
    import shlex

    from croft.domain.deploy.manifests import docker_run_argv

    note = image_note(image, "this host's docker must have")
    options = checked_options(
        image=image,
        watch=watch,
        kernel_before_5_8=kernel_before_5_8,
        kernel_5_11_or_later=kernel_5_11_or_later,
        dataset_dir=dataset_dir,
        auth="none",
        disk_gib=disk_gib,
    )
    argv = docker_run_argv(options)
    if dry_run:
        print(shlex.join(argv))
        _note(note)
        return 0
    from croft.adapters.kube.docker import run_docker

    container = run_docker(argv)
    print(f"started the collector in container {container[:12] or '?'}; its dataset is in {dataset_dir}")
    _note(note)
    return 0


@deploy_app.command
def kubernetes(
    *,
    image: ImageOpt = None,
    watch: Annotated[str, Parameter(help="comma-separated cgroup path prefixes to watch")] = "kubepods",
    dry_run: Annotated[bool, Parameter(negative=(), help="print the manifests instead")] = False,
    namespace: Annotated[str, Parameter(help="the collector's namespace")] = "croft",
    kubeconfig: Annotated[
        Path | None, Parameter(help="the kubeconfig; default: $KUBECONFIG, ~/.kube/config or in-cluster")
    ] = None,
    timeout: Annotated[float, Parameter(help="seconds to wait for the DaemonSet to be scheduled")] = 120.0,
    kernel_before_5_8: OldKernel = False,
    kernel_5_11_or_later: NewKernel = False,
    dataset_dir: DatasetDirOpt = DATASET_DIR,
    disk_gib: DiskOpt = DISK_GIB,
    auth: Annotated[
        str,
        Parameter(
            help="who may read each collector's /metrics and /dataset: kubernetes (readers the API "
            "server's TokenReview and SubjectAccessReview allow; README, 'Who may read the endpoint') "
            "or none (whoever reaches the pod)"
        ),
    ] = "kubernetes",
    delete: Annotated[
        bool,
        Parameter(
            negative=(),
            help="remove what deploy applied (objects labelled app.kubernetes.io/part-of=croft; "
            "the namespace only when nothing else runs in it) instead",
        ),
    ] = False,
) -> int:
    """Apply the collector's DaemonSet and its companions to the cluster (or, with --delete,
    remove them)."""
    from croft.domain.deploy.k8s_names import label_problem
    from croft.domain.deploy.manifests import DeployOptions, manifest_header, manifests

    if delete:
        if problem := label_problem("--namespace", namespace):
            raise UserError(problem)
        options = DeployOptions(image=image or DEFAULT_IMAGE, watch=watch, namespace=namespace, auth=auth)
        return _undeploy(options, kubeconfig, dry_run)
    note = image_note(image, "every node must be able to pull")
    if problem := label_problem("--namespace", namespace):
        raise UserError(problem)
    options = checked_options(
        image=image,
        watch=watch,
        namespace=namespace,
        kernel_before_5_8=kernel_before_5_8,
        kernel_5_11_or_later=kernel_5_11_or_later,
        dataset_dir=dataset_dir,
        auth=auth,
        disk_gib=disk_gib,
    )
    docs = manifests(options)
    if dry_run:
        sys.stdout.write(render_manifests(docs, manifest_header(options)))
        _note(note)
        return 0
    check_number("--timeout", timeout, 0, 86400, "seconds", low_open=True)
    from croft.adapters.kube.cluster import Kube, load_configuration

    kube = Kube(load_configuration(kubeconfig))
    try:
        verbs = apply_all(kube, docs)
        code = wait_for_rollout(kube, options, timeout, verbs.get("DaemonSet", "unchanged"))
        _note(note)
        return code
    finally:
        kube.close()


def _undeploy(options: DeployOptions, kubeconfig: Path | None, dry_run: bool) -> int:
    """Delete what deploy applied, last applied first; with `dry_run` only say what would go."""
    from croft.adapters.kube.cluster import Kube, load_configuration
    from croft.adapters.kube.port import KubeError, NotFound
    from croft.domain.deploy.cluster import describe, object_path
    from croft.domain.deploy.labels import APP_LABEL
    from croft.domain.deploy.manifests import manifests
    from croft.domain.deploy.undeploy import plan

    docs = manifests(options)
    kube = Kube(load_configuration(kubeconfig))
    try:
        try:
            live = {index: kube.get(object_path(doc)) for index, doc in enumerate(docs)}
            pods = kube.pods(options.namespace, "") if live.get(0) is not None else []
        except KubeError as exc:
            raise UserError(
                f"cannot read what croft deployed: {exc}; check your access to the cluster"
            ) from exc
        others = [
            str(p["metadata"]["name"])
            for p in pods
            if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/name") != APP_LABEL
        ]
        steps = plan(docs, live, others)
        for step in steps:
            name = describe(step.manifest)
            if not step.delete:
                print(f"kept {name}: {step.why}")
                continue
            if dry_run:
                print(f"would delete {name}")
                continue
            try:
                kube.call("DELETE", object_path(step.manifest), query={"propagationPolicy": "Background"})
            except NotFound:
                print(f"gone {name}")
                continue
            except KubeError as exc:
                raise UserError(f"cannot delete {name}: {exc}; check your access to the cluster") from exc
            print(f"deleted {name}")
        if not any(step.delete for step in steps):
            print(f"nothing to delete: croft's collector is not deployed in namespace {options.namespace}")
        return 0
    finally:
        kube.close()


def render_manifests(docs: tuple[dict[str, Any], ...], header: str) -> str:
    """The objects as one multi-document YAML text under `header` (kubectl apply -f - reads it)."""
    import yaml

    return header + "".join("---\n" + yaml.safe_dump(doc, sort_keys=False, width=110) for doc in docs)


def apply_all(kube: Kube, docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """Server-side apply each object in order, saying what each apply did (created, configured or
    unchanged); that verb by kind."""
    from croft.adapters.kube.port import KubeError
    from croft.domain.deploy.cluster import changed, describe, object_path

    verbs: dict[str, str] = {}
    for doc in docs:
        path = object_path(doc)
        try:
            before = kube.get(path)
            after = kube.apply(doc, path)
        except KubeError as exc:
            raise UserError(f"cannot apply {describe(doc)}: {exc}; check your access to the cluster") from exc
        if before is None:
            verb = "created"
        elif changed(before, after):
            verb = "configured"
        else:
            verb = "unchanged"
        verbs[str(doc["kind"])] = verb
        print(f"{verb} {describe(doc)}{_image_change(before, after) if verb == 'configured' else ''}")
    if set(verbs.values()) == {"unchanged"}:
        print("nothing changed: the cluster already runs the collector as asked")
    return verbs


def _image_change(before: Any, after: Any) -> str:
    def image(obj: Any) -> str | None:
        containers = (((obj or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers")
        return str(containers[0].get("image")) if containers else None

    old, new = image(before), image(after)
    return f": image {old} -> {new}, rolling out" if old != new and new is not None else ""


def wait_for_rollout(kube: Kube, options: DeployOptions, timeout_s: float, verb: str) -> int:
    """Wait, with a progress line, until the DaemonSet has an up-to-date pod scheduled on every node
    it should run on; a `UserError` saying why not after `timeout_s`."""
    import time

    from croft.adapters.kube.port import KubeError
    from croft.app.progress import Progress
    from croft.domain.deploy.cluster import rollout, why_not
    from croft.domain.deploy.labels import APP_LABEL

    path = f"/apis/apps/v1/namespaces/{options.namespace}/daemonsets/{APP_LABEL}"
    progress = Progress(transfer=False, log=True)
    line = progress.add(f"DaemonSet {options.namespace}/{APP_LABEL}: waiting")
    deadline = time.monotonic() + timeout_s
    state = None
    while True:
        try:
            state = rollout(kube.call("GET", path))
        except KubeError as exc:
            progress.update(line, description=f"DaemonSet {options.namespace}/{APP_LABEL}: {exc}")
        if state is not None:
            progress.update(line, description=f"DaemonSet {options.namespace}/{APP_LABEL}: {state.line()}")
            if state.done:
                progress.close()
                what = {"created": "deployed", "configured": "rolled out"}.get(verb, "in place")
                print(f"the collector is {what} on {state.desired} nodes ({state.ready} ready)")
                return 0
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    progress.close()
    try:
        events = kube.events(options.namespace, "DaemonSet", APP_LABEL)
    except KubeError:
        events = []
    reason = why_not(state, events) if state is not None else "the DaemonSet could not be read"
    raise UserError(f"the DaemonSet was not scheduled within {timeout_s:g} s: {reason}")
