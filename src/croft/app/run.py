"""croft run: the collector."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from cyclopts import Parameter

from croft.app.options import BYTES_MAX, DEFAULT_DATASET, SECONDS_MAX, DatasetOpt, check_number, whole_number
from croft.errors import UserError


def run(
    *,
    dataset: DatasetOpt = DEFAULT_DATASET,
    watch: Annotated[
        str,
        Parameter(
            env_var="WATCH_CGROUPS",
            help="comma-separated cgroup path prefixes whose processes are written too "
            "(e.g. kubepods,system.slice/docker); empty: only GPU holders",
        ),
    ] = "",
    frameworks: Annotated[
        Path | None,
        Parameter(env_var="CROFT_FRAMEWORKS", help="a framework catalog file; default: the built-in catalog"),
    ] = None,
    metrics_addr: Annotated[
        str,
        Parameter(
            env_var="CROFT_METRICS_ADDR",
            help="host:port to serve Prometheus /metrics and the read-only dataset endpoint (/dataset) on; "
            "empty: none",
        ),
    ] = "",
    metrics_syscalls: Annotated[
        str,
        Parameter(
            env_var="CROFT_METRICS_SYSCALLS",
            help="the syscalls /metrics names, comma-separated (e.g. read,write,sendto,recvfrom,futex); "
            'the rest are summed as syscall="other". Empty: the gauge names each container\'s 24 '
            "busiest and the counter every syscall (about 80 series a container)",
        ),
    ] = "",
    auth: Annotated[
        str,
        Parameter(
            env_var="CROFT_AUTH",
            help="who may read /metrics and /dataset: none (whoever reaches the address), or kubernetes "
            "(a bearer token the API server's TokenReview accepts, of a user a SubjectAccessReview "
            "allows to get the route as a non-resource URL; README, 'Who may read the endpoint')",
        ),
    ] = "none",
    serve_dataset: Annotated[
        bool,
        Parameter(
            env_var="CROFT_SERVE_DATASET",
            help="serve the dataset endpoint /dataset beside /metrics (--no-serve-dataset: /metrics only)",
        ),
    ] = True,
    rotate_secs: Annotated[
        int,
        Parameter(
            env_var="CROFT_ROTATE_SECS",
            converter=whole_number("seconds", SECONDS_MAX),
            help="rotate the live file after this many seconds",
        ),
    ] = 3600,
    rotate_bytes: Annotated[
        int,
        Parameter(
            env_var="CROFT_ROTATE_BYTES",
            converter=whole_number("bytes", BYTES_MAX),
            help="rotate the live file at this many bytes (1 GiB)",
        ),
    ] = 1073741824,
    retain_days: Annotated[
        int,
        Parameter(
            env_var="CROFT_RETAIN_DAYS",
            converter=whole_number("days", SECONDS_MAX // 86_400),
            help="delete segments older than this many days",
        ),
    ] = 30,
    retain_bytes: Annotated[
        int,
        Parameter(
            env_var="CROFT_RETAIN_BYTES",
            converter=whole_number("bytes", BYTES_MAX),
            help="delete the oldest segments while all exceed this many bytes (10 GiB)",
        ),
    ] = 10737418240,
    record: Annotated[
        Path | None,
        Parameter(help="also write the raw snapshot of every poll (zstd JSON lines) into this directory"),
    ] = None,
    replay: Annotated[
        Path | None,
        Parameter(help="replay a trace recorded with --record (a directory or file) instead; no root needed"),
    ] = None,
    linger: Annotated[
        float,
        Parameter(
            help="with --replay and --metrics-addr: keep serving /metrics this many seconds after the "
            "last poll (SIGTERM ends it sooner)"
        ),
    ] = 0.0,
    node: Annotated[
        str,
        Parameter(
            env_var="CROFT_NODE",
            help="the node name every row carries (the DaemonSet sets it from spec.nodeName); "
            "empty: this machine's host name, or with --replay the node the trace names",
        ),
    ] = "",
    ebpf: Annotated[
        Literal["auto", "core", "bcc", "off"],
        Parameter(
            env_var="CROFT_EBPF",
            help="how syscalls, ioctls and ingress are counted: core (the precompiled CO-RE programs, "
            "needs the kernel's BTF), bcc (compiled at start, needs kernel headers and BCC), off (procfs "
            "and cgroupfs only); auto: core, else bcc, else off",
        ),
    ] = "auto",
    kubeconfig: Annotated[
        Path | None,
        Parameter(
            env_var="CROFT_KUBECONFIG",
            help="a kubeconfig whose API server names the pods of --node (rows and /metrics then carry "
            "namespace, pod and container names); in a pod, its service account is used without it; "
            "elsewhere, without it, rows carry container ids only",
        ),
    ] = None,
    verbose: Annotated[
        bool, Parameter(help="log every poll and full causes (libbpf's log, the verifier's)")
    ] = False,
) -> int:
    """Load the eBPF programs, poll every 2 s and write the dataset. Needs root."""
    import logging
    import os
    import socket

    from croft.adapters.host.clock import SystemClock
    from croft.domain.dataset.http import is_safe_name

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="croft: %(message)s", force=True
    )
    from croft.domain.dataset.rotation import Limits, limit_errors

    limits = Limits(rotate_secs, rotate_bytes, retain_days, retain_bytes)
    if errors := limit_errors(limits):
        raise UserError(errors[0])
    check_number("--linger", linger, 0, 7 * 86400, "seconds")
    if linger and (replay is None or not metrics_addr):
        raise UserError("--linger takes seconds >= 0 and needs --replay and --metrics-addr")
    from croft.domain.access import AUTH_MODES

    if auth not in AUTH_MODES:
        raise UserError(f"--auth {auth!r} is not one of {', '.join(AUTH_MODES)}; give none or kubernetes")
    if node and not is_safe_name(node):
        raise UserError(f"--node {node!r} is not a plain name (letters, digits, . _ -); give the node's name")
    if not node and replay is None:
        node = socket.gethostname()
    if replay is None and os.geteuid() != 0:
        raise UserError(
            "croft run needs root to read every process's /proc files and load eBPF: "
            "run it with sudo, or replay a recorded trace with --replay DIR"
        )
    kernel = lock = None
    if replay is None:
        # the dataset's lock first: a second collector on it refuses in one sentence before it
        # loads anything (where the directory cannot be made, the writer says why, later)
        import contextlib

        from croft.adapters.dataset.lock import DatasetLock

        with contextlib.suppress(OSError):
            dataset.parent.mkdir(parents=True, exist_ok=True)
        if dataset.parent.is_dir():
            lock = DatasetLock.acquire(dataset.parent, (("watch", watch),))
        # then the eBPF programs, before the rest of croft is imported: attached as soon as can be
        from croft.adapters.host.ebpf_mode import open_kernel

        kernel = open_kernel(ebpf, verbose=verbose)
    from croft.app import bootstrap, collector

    settings = bootstrap.Settings(
        dataset=dataset,
        watch=watch,
        frameworks=frameworks,
        record=record,
        limits=limits,
        verbose=verbose,
        node=node or None,
        ebpf=ebpf,
        kubeconfig=kubeconfig,
        metrics_syscalls=_syscall_names(metrics_syscalls),
    )
    server, metrics = (
        bootstrap.build_http_server(metrics_addr, dataset if serve_dataset else None, auth)
        if metrics_addr
        else (None, None)
    )
    try:
        if replay is not None:
            pipeline, runs = bootstrap.build_replay(settings, replay, metrics)
            code = collector.run_replay(pipeline, runs)
            if linger:
                collector.linger(linger, SystemClock())
            return code
        pipeline, source, clock = bootstrap.build_live(settings, metrics, kernel, lock)
        return collector.run_live(pipeline, source, clock)
    finally:
        if server is not None:
            server.close()


def _syscall_names(text: str) -> frozenset[str] | None:
    """`--metrics-syscalls`: the names it lists, or None (every syscall) when it is empty; a
    `UserError` for a name that is not one (letters, digits and `_`)."""
    import re

    listed = [name.strip() for name in text.split(",") if name.strip()]
    if not listed:
        return None
    for name in listed:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name == "other":
            raise UserError(
                f"--metrics-syscalls names {name!r}, which is not a syscall name; give names such as "
                "read,write,sendto separated by commas"
            )
    return frozenset(listed)
