"""croft scale: add replicas from the eBPF request rate, ahead of the HPA."""

from __future__ import annotations

import gc
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

from cyclopts import Parameter

from croft.domain.deploy.labels import COLLECTOR_SELECTOR, METRICS_PORT
from croft.domain.scaling.sizing import DRAIN_S
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.domain.scaling.decision import ScaleConfig
    from croft.domain.scaling.log import LogFormat


def scale(
    *,
    namespace: Annotated[str, Parameter(help="the Deployment's namespace")] = "",
    deployment: Annotated[str, Parameter(help="the Deployment to scale")] = "",
    calls_per_request: Annotated[
        float,
        Parameter(help="syscalls of --syscall per request (with --signal: units of the signal per request)"),
    ] = 0.0,
    cpu_per_request_ms: Annotated[float, Parameter(help="CPU time per request, ms")] = 0.0,
    syscall: Annotated[str, Parameter(help="the syscall that counts requests")] = "sendto",
    signal: Annotated[
        str,
        Parameter(
            help="what counts requests: syscall (the --syscall rate), or the offered load the kernel "
            "receives, which keeps rising once pods saturate: tcp_data_segments (TCP segments carrying "
            "data, eBPF; 1 per small request on keep-alive connections: the measured choice), "
            "tcp_connections (handshakes, eBPF), tcp_passive_opens, tcp_in_segs, rx_packets, rx_bytes, "
            "listen_drops (the pod's network "
            "namespace counters); --calls-per-request converts it to requests"
        ),
    ] = "syscall",
    target: Annotated[float, Parameter(help="target CPU utilization, as the HPA's")] = 0.7,
    max_replicas: Annotated[int, Parameter(help="most replicas")] = 10,
    confirm_polls: Annotated[int, Parameter(help="polls asking for more before scaling")] = 2,
    interval: Annotated[float, Parameter(help="seconds between polls")] = 2.0,
    api: Annotated[
        str, Parameter(help="the Kubernetes API, through kubectl proxy")
    ] = "http://127.0.0.1:8001",
    dry_run: Annotated[bool, Parameter(negative=(), help="log decisions without changing replicas")] = False,
    stabilization_secs: Annotated[
        float, Parameter(help="scale down only to the most any poll asked for in this window, s (the HPA's)")
    ] = 300.0,
    drain_secs: Annotated[
        float,
        Parameter(
            help="scale up, in one step, also for the requests already queued in the pods, enough to "
            "drain them within this many seconds at the full CPU limit (with an ingress --signal: "
            "connections waiting to be accepted, and unread bytes with --bytes-per-request). Every "
            "replica it adds is kept for the stabilization window, so halving it doubles those replicas"
        ),
    ] = DRAIN_S,
    bytes_per_request: Annotated[
        float,
        Parameter(
            help="with an ingress --signal: a request's bytes as the server reads them (headers and "
            "body), to count the bytes received and not yet read in the pods as queued requests; "
            "0: they are not counted (only connections waiting to be accepted are)"
        ),
    ] = 0.0,
    collector_namespace: Annotated[str, Parameter(help="the namespace of croft's collector pods")] = "croft",
    collector_selector: Annotated[
        str, Parameter(help="label selector of the collector pods")
    ] = COLLECTOR_SELECTOR,
    collector_port: Annotated[
        int, Parameter(help="the collectors' --metrics-addr port, reached through the pod proxy")
    ] = METRICS_PORT,
    record: Annotated[Path | None, Parameter(help="append every poll's observations to this file")] = None,
    replay: Annotated[
        Path | None, Parameter(help="re-decide a --record file offline (a dry run; no API is contacted)")
    ] = None,
    polls: Annotated[int, Parameter(help="stop after this many polls; 0: run until stopped")] = 0,
    log_format: Annotated[
        str,
        Parameter(
            help="the decision log, a line a poll: logfmt (key=value, quoted values) or json (an object "
            'a line). An estimate_rps ending in "+" (json: lower_bound true) is a lower bound: data was '
            "missing or garbled (a collector silent or stale, a NaN, infinite or negative rate, a busy "
            "container without a --syscall series); such a poll may scale up but never down, and "
            "detail says why"
        ),
    ] = "logfmt",
) -> int:
    """Every poll, read the collectors' /metrics, turn the syscall rate of the Deployment's pods into a
    request rate, and ask for rate x CPU per request / (CPU limit x target) replicas, plus backlog x
    CPU per request / (--drain-secs x CPU limit) for the requests already queued, rounded up once:
    a scale-up goes to that count in one step.

    Each poll logs one line: estimate_rps, desired, replicas=from->to, decision, reason, detail. An
    estimate ending in "+" is a lower bound: some data was missing or garbled (a collector did not
    answer or was stale, a value was NaN, infinite or negative, a busy container had no series for
    --syscall); such a poll may still scale up but never scales down, and detail says which case."""
    from croft.domain.scaling.decision import ScaleConfig, config_problem
    from croft.domain.scaling.log import LOG_FORMATS

    if log_format not in LOG_FORMATS:
        raise UserError(f"--log-format must be logfmt or json, got {log_format!r:.40}")
    fmt: LogFormat = "json" if log_format == "json" else "logfmt"

    config = ScaleConfig(
        signal=signal,
        syscall=syscall,
        calls_per_request=calls_per_request,
        cpu_per_request_ms=cpu_per_request_ms,
        target=target,
        max_replicas=max_replicas,
        confirm_polls=confirm_polls,
        interval_s=interval,
        stabilization_s=stabilization_secs,
        drain_s=drain_secs,
        bytes_per_request=bytes_per_request,
    )
    problem = config_problem(config)
    if problem is not None:
        raise UserError(problem)
    if record is not None and replay is not None:
        raise UserError("--record and --replay exclude each other: record a live run, then replay the file")
    if replay is not None:
        return _replay(replay, config, fmt)
    if not namespace or not deployment:
        raise UserError("name the Deployment to scale with --namespace and --deployment")
    from croft.domain.deploy.k8s_names import label_problem, subdomain_problem

    names_problem = (
        label_problem("--namespace", namespace)
        or subdomain_problem("--deployment", deployment)
        or label_problem("--collector-namespace", collector_namespace)
    )
    if names_problem:
        raise UserError(names_problem)
    if polls < 0:
        raise UserError("--polls must be 0 (run until stopped) or more")
    return _live(namespace, deployment, config, api, dry_run, collector_namespace, collector_selector,
                 collector_port, record, polls, fmt)  # fmt: skip


def _print(line: str) -> None:
    print(line, flush=True)


def _replay(path: Path, config: ScaleConfig, fmt: LogFormat) -> int:
    from croft.domain.scaling.log import decision_fields, render
    from croft.domain.scaling.record import NotARecord, RecordedPoll, decode_poll, replay

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read --replay file {path}: {exc.strerror}") from None
    polls: list[RecordedPoll] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            polls.append(decode_poll(line))
        except NotARecord as exc:
            raise UserError(
                f"{path}:{line_no} is {exc}; give a file written by croft scale --record"
            ) from None
    from croft.domain.utc import iso_ms

    for poll, decision in replay(polls, config):
        _print(render(iso_ms(poll.observations.now_ms), {**decision_fields(decision), "replay": True}, fmt))
    return 0


def _live(
    namespace: str,
    deployment: str,
    config: ScaleConfig,
    api: str,
    dry_run: bool,
    collector_namespace: str,
    collector_selector: str,
    collector_port: int,
    record: Path | None,
    polls: int,
    fmt: LogFormat,
) -> int:
    from croft.adapters.host.clock import SystemClock
    from croft.adapters.kube.port import Denied, NotFound, Unreachable
    from croft.adapters.kube.scale_api import KubeClient
    from croft.app.scale_loop import ScaleLoop, Target

    clock = SystemClock()
    client = KubeClient(api, timeout_s=min(max(config.interval_s, 1.0), 5.0))
    record_file: TextIO | None = None
    if record is not None:
        try:
            record_file = record.open("a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write --record file {record}: {exc.strerror}") from None
    target = Target(namespace, deployment, collector_namespace, collector_selector, collector_port)
    loop = ScaleLoop(
        target, config, client, clock, dry_run=dry_run, log=_print, record=record_file, log_format=fmt
    )
    previous = signal.signal(signal.SIGTERM, lambda *_: clock.wake())
    try:
        # The first call checks what a typo or a missing Role would break, before any loop runs.
        try:
            client.deployment(namespace, deployment)
        except (Denied, NotFound) as exc:
            raise UserError(str(exc)) from None
        except Unreachable as exc:
            print(f"croft: {exc}; retrying every poll", file=sys.stderr, flush=True)
        # What is alive now (modules, the client) lives as long as the loop: frozen, a full garbage
        # collection walks only what the polls made. Unfrozen, one in about 70 decisions of 200 pods
        # on 20 collectors walked the ~39k objects of the imports, 15-40 ms on a 2-core VM: a p99 of
        # 17-19 ms CPU for a median of 4 ms; frozen, 0.2 ms and a p99 of 5.3 ms.
        gc.collect()
        gc.freeze()
        loop.run(polls)
    finally:
        signal.signal(signal.SIGTERM, previous)
        client.close()
        if record_file is not None:
            record_file.close()
    return 0
