"""The one composition root of `croft run`: builds the real adapters, or the replay ones, and hands
them to the collector loop. Nothing is opened before `build_*` is called."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from croft import __version__
from croft.adapters.dataset.lock import DatasetLock
from croft.adapters.dataset.writer import DatasetWriter
from croft.adapters.host.cgroup_ids import watched_roots
from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.cgroupns import find_namespace_root
from croft.adapters.host.clock import SystemClock
from croft.adapters.host.drm import DrmFdinfo
from croft.adapters.host.netns import NetnsFS
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.adapters.http.metrics import SnapshotCollector, metrics_handler, metrics_page
from croft.adapters.http.pages import healthz, landing_page, livez
from croft.adapters.http.server import HttpServer
from croft.adapters.kube.pod_watch import start_pod_watch
from croft.app.collector import Pipeline, PollObserver
from croft.app.metrics_publisher import MetricsPublisher
from croft.domain.collector.frameworks import Catalog, CatalogError, Matcher, parse_catalog
from croft.domain.collector.kernel import GpuHolderSource
from croft.domain.collector.rows import CollectorConfig
from croft.domain.collector.selection import parse_watch
from croft.domain.collector.silence import absent_figures, unmatched_watch
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset.rotation import Limits
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.adapters.host.ebpf_mode import Chosen, Mode
    from croft.adapters.host.trace import TraceRecorder
    from croft.app.access import KubeAccess

log = logging.getLogger("croft.run")

GPU_DEVICE_PREFIXES = ("/dev/nvidia",)


@attrs.frozen
class Settings:
    """What `croft run` was asked to do, already validated by type."""

    dataset: Path
    watch: str = ""
    frameworks: Path | None = None
    record: Path | None = None
    proc_root: Path = Path("/proc")
    cgroup_root: Path = Path("/sys/fs/cgroup")
    limits: Limits = attrs.field(factory=Limits)
    verbose: bool = False  # show what libbpf (or clang) and the verifier said when eBPF fails to load
    ebpf: Mode = "auto"  # which eBPF loader: croft.adapters.host.ebpf_mode
    node: str | None = None  # the node rows name; None: none (a replay of a trace that names none)
    kubeconfig: Path | None = None  # the API whose pods of `node` name rows (else in-cluster, or none)
    metrics_syscalls: frozenset[str] | None = None  # the syscalls /metrics names (None: every one)


def load_catalog(user_file: Path | None) -> Catalog:
    """The built-in catalog, replaced or extended by `user_file`. A bad file is a `UserError`
    naming its line."""
    builtin = parse_catalog(resources.files("croft.domain.collector").joinpath("frameworks.toml").read_text())
    if user_file is None:
        return builtin
    text = _catalog_text(user_file)
    try:
        return builtin.extended_by(parse_catalog(text))
    except CatalogError as exc:
        raise UserError(f"framework catalog {user_file}, {exc}") from exc


def _catalog_text(path: Path) -> str:
    """The text of a --frameworks file: a regular file (never waits on a FIFO), UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(
            f"cannot read the framework catalog {path}: {exc.strerror}; fix --frameworks"
        ) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(
                f"--frameworks {path} is not a regular file (a FIFO, device or directory); "
                "give a TOML file like the built-in frameworks.toml"
            )
        data = f.read(_MAX_CATALOG_BYTES + 1)
    if len(data) > _MAX_CATALOG_BYTES:
        raise UserError(f"--frameworks {path} is larger than {_MAX_CATALOG_BYTES} bytes; give a catalog file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"--frameworks {path} is not UTF-8 text (byte {exc.start} is not); save it as UTF-8"
        ) from None


_MAX_CATALOG_BYTES = 1 << 20


def build_recorder(settings: Settings) -> TraceRecorder | None:
    """The trace recorder of --record, its directory made and checked writable now (a `UserError`)."""
    if settings.record is None:
        return None
    from croft.adapters.host.trace import TraceRecorder  # only a recording collector needs it

    where = settings.record
    try:
        recorder = TraceRecorder(where, settings.watch, settings.node)
    except OSError as exc:
        raise UserError(
            f"cannot create the --record directory {where}: {exc.strerror}; give a writable directory"
        ) from None
    if not os.access(where, os.W_OK | os.X_OK):
        raise UserError(f"cannot write to the --record directory {where}; give a writable directory")
    return recorder


def collector_config(settings: Settings) -> CollectorConfig:
    return CollectorConfig(
        watch=parse_watch(settings.watch),
        matcher=Matcher(load_catalog(settings.frameworks)),
        node=settings.node,
    )


def build_sink(settings: Settings, lock: DatasetLock | None = None) -> DatasetWriter:
    """The row sink: the rotating dataset writer (a `UserError` when the directory is unwritable or
    another collector writes it); `lock`: the directory's lock, when `lock_dataset` took it."""
    return DatasetWriter(settings.dataset, settings.limits, about=dataset_about(settings), lock=lock)


def dataset_about(settings: Settings) -> tuple[tuple[str, str], ...]:
    """What the collector writes in its dataset's lock file (`croft top` and a second collector
    read it)."""
    return (("watch", settings.watch),)


def build_pipeline(
    settings: Settings,
    metrics: SnapshotCollector | None = None,
    live: bool = True,
    ebpf_mode: str | None = None,
    lock: DatasetLock | None = None,
) -> Pipeline:
    """Core, sink and recorder; with `metrics`, every poll's series are published to it (with
    `ebpf_mode`, the eBPF loader in use, as croft_ebpf_mode)."""
    config = collector_config(settings)
    recorder = build_recorder(settings)
    sink = build_sink(settings, lock)
    observer: PollObserver | None = None
    if metrics is not None:
        clock = SystemClock()
        observer = MetricsPublisher(
            metrics,
            sink.counters,
            lambda: clock.now().monotonic_ns,
            live,
            ebpf_mode=ebpf_mode,
            syscall_names=settings.metrics_syscalls,
        )
    pods = start_pod_watch(settings.kubeconfig, settings.node, live)
    return Pipeline(config, sink, recorder, observer, pods)


def build_http_server(
    address: str, dataset: Path | None = None, auth: str = "none"
) -> tuple[HttpServer, SnapshotCollector]:
    """The collector's HTTP server on `--metrics-addr`, listening (a `UserError` when it cannot)
    and serving its routes: /metrics from the returned collector, which the poll loop publishes to;
    /healthz (200 while polls are current, 503 before the first and once stale); a landing page at /;
    with `dataset` (the live file), the read-only dataset endpoint /dataset of its directory. With
    `auth` "kubernetes", /metrics and /dataset answer only readers the API server allows
    (`croft.app.access`)."""
    server = HttpServer.bind(address)
    if auth == "kubernetes":
        server.guard(_kube_access().guard)
    if dataset is not None:
        from croft.adapters.dataset.endpoint import DatasetEndpoint

        DatasetEndpoint(dataset).register(server)
    clock = SystemClock()
    metrics = SnapshotCollector(lambda: clock.now().monotonic_ns)
    page = metrics_page(metrics, __version__)
    server.route("/metrics", metrics_handler(page))
    server.route(
        "/healthz",
        healthz(
            lambda: metrics.last_publish_ns,
            lambda: clock.now().monotonic_ns,
            lambda: metrics.live_file_lost_ns,
        ),
    )
    server.route("/livez", livez(lambda: metrics.last_publish_ns, lambda: clock.now().monotonic_ns))
    links = [
        ("/metrics", "Prometheus metrics"),
        ("/healthz", "200 while polls are current, 503 when stale (ready)"),
        ("/livez", "200 while the poll loop runs, 503 once its polls have stopped (alive)"),
    ]
    if dataset is not None:
        links.append(("/dataset", "the read-only dataset endpoint (croft collect)"))
    server.route("/", landing_page(__version__, tuple(links)))
    server.start()
    return server, metrics


def _kube_access() -> KubeAccess:
    """The TokenReview/SubjectAccessReview guard, with the in-cluster account (or $KUBECONFIG,
    ~/.kube/config); a `UserError` when there is none."""
    from croft.adapters.kube.access import Reviews
    from croft.adapters.kube.cluster import Kube, load_configuration
    from croft.app.access import KubeAccess

    clock = SystemClock()
    kube = Kube(load_configuration(None))
    log.info(
        "--auth kubernetes: /metrics and /dataset answer readers the API server %s allows",
        kube.configuration.host,
    )
    return KubeAccess(Reviews(kube.call), lambda: clock.now().monotonic_ns)


def _kernel_source(requested: Mode, verbose: bool) -> Chosen:
    """croft's eBPF programs, by the loader `requested` (`--ebpf`; auto: CO-RE where the kernel has
    BTF, BCC where it has headers instead, else none). A loader asked for by name that fails (no
    BTF, no libbpf, not root, a verifier rejection) is a `UserError` naming the program and the
    cause: croft run exits 1; under auto croft runs without eBPF, saying why."""
    from croft.adapters.host.ebpf_mode import open_kernel

    return open_kernel(requested, verbose=verbose)


def _gpu_source() -> GpuHolderSource:
    try:
        from croft.adapters.host.nvml import NvmlGpuHolders  # type: ignore[import-not-found,unused-ignore]

        source: GpuHolderSource = NvmlGpuHolders()
    except Exception as exc:
        log.warning("NVML unavailable (%s): GPU holders come from ioctls and open device files only", exc)
        return UnavailableGpu()
    return source


def build_live(
    settings: Settings,
    metrics: SnapshotCollector | None = None,
    kernel: Chosen | None = None,
    lock: DatasetLock | None = None,
) -> tuple[Pipeline, LiveSource, SystemClock]:
    """The live collector: procfs, cgroupfs, eBPF (`kernel`, or loaded here as `settings.ebpf`
    says: `off` counts nothing, as on a host that cannot load the programs), NVML (or empty),
    DRM fdinfo where /dev/dri is, the system clock."""
    if kernel is None:
        kernel = _kernel_source(settings.ebpf, settings.verbose)
    pipeline = build_pipeline(settings, metrics, ebpf_mode=kernel.mode, lock=lock)
    scan_devices = any(Path("/dev").glob("nvidia*"))
    cgroupfs = CgroupFS(settings.cgroup_root)
    log.info("cgroup layout at %s: %s", settings.cgroup_root, cgroupfs.layout)
    namespace = find_namespace_root(settings.proc_root, cgroupfs.unified)
    log.log(logging.WARNING if namespace.unresolved else logging.INFO, "%s", namespace.summary)
    procfs = ProcFS(
        settings.proc_root,
        gpu_device_prefixes=GPU_DEVICE_PREFIXES if scan_devices else (),
        cgroup_namespace_root=namespace.root,
    )
    watch = parse_watch(settings.watch)
    mount = cgroupfs.unified or next(iter(cgroupfs.v1.values()), None)
    if watch and mount is not None and not watched_roots(mount, watch):
        log.warning("%s", unmatched_watch(watch, mount))
    if absent := absent_figures(cgroupfs.layout, *cgroupfs.offered(), root=str(settings.cgroup_root)):
        log.warning("%s", absent)
    source = LiveSource(
        procfs,
        cgroupfs,
        kernel.kernel,
        _gpu_source(),
        parse_watch(settings.watch),
        NetnsFS(settings.proc_root),
        activity=kernel.source,
        drm=DrmFdinfo(settings.proc_root) if Path("/dev/dri").is_dir() else None,
    )
    return pipeline, source, SystemClock()


def build_replay(
    settings: Settings, replay: Path, metrics: SnapshotCollector | None = None
) -> tuple[Pipeline, Iterator[Iterator[Poll]]]:
    """The replaying collector: polls from the trace files at `replay`, no clock, no root. Without
    `--watch`, the trace's recorded one applies; without `--node`, the node the trace names (rows of
    a trace that names none carry no node)."""
    from croft.adapters.host.trace import recorded_node, recorded_watch, trace_files
    from croft.domain.collector.trace import TraceError

    files = trace_files(replay)
    if not files:
        raise UserError(f"no trace files (*.jsonl.zst) in {replay}; record one with croft run --record DIR")
    if not settings.watch:
        try:
            settings = attrs.evolve(settings, watch=recorded_watch(files[0]))
        except TraceError as exc:
            raise UserError(f"{files[0]}: {exc}; give a trace recorded by croft run --record") from exc
    if settings.node is None:
        try:
            settings = attrs.evolve(settings, node=recorded_node(files[0]))
        except TraceError as exc:
            raise UserError(f"{files[0]}: {exc}; give a trace recorded by croft run --record") from exc
    pipeline = build_pipeline(settings, metrics, live=False)

    def runs() -> Iterator[Iterator[Poll]]:
        for path in files:
            yield _checked(path)

    return pipeline, runs()


def _checked(path: Path) -> Iterator[Poll]:
    from croft.adapters.host.trace import read_trace
    from croft.domain.collector.trace import TraceError

    try:
        yield from read_trace(path)
    except TraceError as exc:
        raise UserError(f"{exc}; the trace is damaged, record it again") from exc
