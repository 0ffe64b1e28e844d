"""croft profile: the resource profile of one container, host cgroup or process, as JSON."""

from __future__ import annotations

import sys
from typing import Annotated

from cyclopts import Parameter

from croft.app.options import (
    DEFAULT_DATASET,
    DatasetOpt,
    FromOpt,
    ToOpt,
    dataset_from_environment,
    dataset_text,
    window,
)
from croft.errors import UserError

SHOWN_IDS = 10  # an ambiguous prefix lists at most this many of the ids it matches
# lines (decompressed) below which croft profile reads in this process: its work per line (a search
# for the subject) is a fraction of stats', so a worker pool's start (multiprocessing's imports, the
# forks, ~0.1 CPU s) pays only beyond a few hourly segments (benchmarks/summaries.py: an hour's
# window, one 65 MB segment and three 11 MB live files, 0.44-0.60 s inline vs 0.66-0.84 s on 2 workers)
PROFILE_INLINE_BYTES = 256 << 20


def profile(
    container_id: Annotated[
        str | None,
        Parameter(
            help="a container id, or a prefix of at least 4 hex digits; with --cgroup or --pid, "
            "leave it out: the one positional argument is then the dataset"
        ),
    ] = None,
    dataset: DatasetOpt = DEFAULT_DATASET,
    *,
    cgroup: Annotated[
        str | None,
        Parameter(
            help="profile a cgroup instead, by its path as rows write it (e.g. /system.slice/etl.service)"
        ),
    ] = None,
    pid: Annotated[
        int | None,
        Parameter(
            help="profile one process instead: its own CPU and RSS, its cgroup's throttling and pressure"
        ),
    ] = None,
    pod: Annotated[
        str | None,
        Parameter(
            help="profile a Kubernetes pod instead, NAMESPACE/NAME, as rows name it (a collector with API "
            "access): its containers' CPU and memory summed, their highest throttling and pressure"
        ),
    ] = None,
    from_: FromOpt = None,
    to: ToOpt = None,
    from_ms: Annotated[int | None, Parameter(help="start of the window, unix ms, inclusive")] = None,
    to_ms: Annotated[int | None, Parameter(help="end of the window, unix ms, inclusive")] = None,
) -> int:
    """Print the nodes a container (or a pod, a host cgroup, a process) ran on, its polls and
    processes, the share of polls holding a GPU, and mean, p95 and max of CPU cores, memory,
    throttling and CPU pressure over the window; a container of a pod names it."""
    import msgspec

    from croft.adapters.dataset.scan import read_profile
    from croft.adapters.host.clock import SystemClock
    from croft.app.console import report_skips
    from croft.domain.dataset.profile import Subject, prefix_error, subject_profile

    if container_id is not None and (cgroup is not None or pid is not None or pod is not None):
        # `croft profile --cgroup PATH DATASET`: the subject is an option, so the one positional
        # argument is the dataset (as in `croft stats DATASET`)
        if dataset != dataset_from_environment():
            raise UserError(
                f"give the dataset once: {container_id!r} and --dataset {dataset} both name one "
                "(a container id and --cgroup, --pid or --pod cannot both name the subject)"
            )
        dataset, container_id = dataset_text(container_id), None
    given = [
        name
        for name, value in (
            ("a container id", container_id),
            ("--cgroup", cgroup),
            ("--pid", pid),
            ("--pod", pod),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise UserError(
            "give one of a container id, --cgroup PATH, --pid PID or --pod NAMESPACE/NAME"
            + (f", not {' and '.join(given)}" if given else "")
        )
    now_ms = SystemClock().now().unix_ms
    start, end = window(from_, to, from_ms, to_ms, now_ms)
    if cgroup is not None:
        from croft.domain.os_text import written

        cgroup = written(cgroup)  # a path given by its real bytes reads as rows write it
        subject = Subject("cgroup", "/" + cgroup.strip("/") if cgroup.strip("/") else "/")
        what = f"cgroup {subject.value}"
    elif pod is not None:
        namespace, _, name = pod.partition("/")
        if not namespace or not name or "/" in name:
            raise UserError(
                f"--pod takes NAMESPACE/NAME, as kubectl names a pod (e.g. default/web-7d9f), got {pod!r}"
            )
        subject = Subject("pod", f"{namespace}/{name}")
        what = f"pod {subject.value}"
    elif pid is not None:
        if pid <= 0:
            raise UserError(f"--pid takes a process id above 0, got {pid}")
        subject = Subject("pid", str(pid))
        what = f"process {pid}"
    else:
        assert container_id is not None
        problem = prefix_error(container_id)
        if problem:
            raise UserError(
                problem + "; for a pod, a host cgroup or a process use --pod NAMESPACE/NAME, --cgroup PATH "
                "or --pid PID"
            )
        subject = Subject("container", container_id.lower())
        what = ""
    found = read_profile(
        dataset,
        subject.value if subject.kind == "container" else "",
        start,
        end,
        subject=subject,
        inline_bytes=PROFILE_INLINE_BYTES,
    )
    report_skips(found.skips.report())
    ids = found.matching_ids()
    if not ids:
        hint = "croft stats --containers lists the containers, pods and cgroups it holds"
        if subject.kind == "container":
            raise UserError(f"no container id starting with {subject.value} in {dataset}; {hint}")
        raise UserError(f"no rows of {what} in {dataset}; {hint}")
    if len(ids) > 1:
        shown = ", ".join(ids[:SHOWN_IDS]) + (
            f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        )
        raise UserError(
            f"container id prefix {subject.value} matches {len(ids)} containers: {shown}; give more digits"
        )
    track = found.tracks[ids[0]]
    result = subject_profile(subject, ids[0], track, start, end, found.pods)
    if result is None:
        name = what or f"container {ids[0]}"
        raise UserError(
            f"{name} has no rows from {_end(start)} to {_end(end)}; its rows span "
            f"{track.first_ms} to {track.last_ms} (unix ms)"
        )
    sys.stdout.write(msgspec.json.encode(result.to_json()).decode() + "\n")
    return 0


def _end(unix_ms: int | None) -> str:
    return "the start" if unix_ms is None else str(unix_ms)
