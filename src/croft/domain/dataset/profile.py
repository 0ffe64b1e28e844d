"""What `croft profile` computes: one container's polls, processes and cgroup figures over a window.

The container id on the command line may be a prefix; readers accumulate every container whose id
starts with it (`ProfileAccumulator`), and the caller resolves the prefix once everything is read,
so one pass both resolves and profiles. A poll is a distinct (node, unix_ms) with a row of the
container; its cgroup figures are the maximum over the container's rows of that poll (they are
one cgroup's figures, so normally equal). Its GPU figures, from the rows' `gpus`, are sums over
those rows: the GPU memory its processes held and how busy they kept their GPUs (percent, 200 for
two GPUs), each absent from a poll whose rows measured none. They are kept as integers (bytes,
hundredths of a percent: `croft.domain.dataset.gpus.exact_figures`), so that a sum does not depend
on the order the rows are read in. A pod (`--pod NAMESPACE/NAME`, rows that name it) is its
containers together: per poll, each container's figures as above, then the CPU cores and memory
of its containers summed (and their GPU figures), and the highest throttling and pressure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from croft.domain.dataset.gpus import exact_figures
from croft.domain.dataset.poll_groups import max_present
from croft.domain.dataset.skips import SkipTally
from croft.domain.dataset.workloads import GPU_WORKLOADS
from croft.domain.utc import rfc3339

MIN_PREFIX = 4
PodNames = tuple[str, str, str | None]  # a row's pod: namespace, name, container
METRICS = ("cpu_cores", "memory_bytes", "cpu_throttled_fraction", "cpu_pressure_avg10")

# Per poll: cpu_cores, memory_bytes, cpu_throttled_fraction, cpu_pressure_avg10 (each None where
# the rows did not measure it: the cgroup does not offer it), holds a GPU (0/1), then GPU memory
# bytes and GPU busy in hundredths of a percent (None: no row measured them).
PollFigures = tuple[float | None, float | None, float | None, float | None, float, int | None, int | None]
GPU_METRICS = ("gpu_memory_bytes", "gpu_percent")


def prefix_error(prefix: str) -> str | None:
    """Why `prefix` cannot name a container (a sentence), or None when it can: it must be at least
    `MIN_PREFIX` hex digits."""
    if not re.fullmatch(r"[0-9a-fA-F]+", prefix):
        hint = f"give the id or at least its first {MIN_PREFIX} digits"
        return f"container id {prefix!r} is not hexadecimal; {hint}"
    if len(prefix) < MIN_PREFIX:
        return f"container id prefix {prefix!r} is too short; give at least {MIN_PREFIX} hex digits"
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of non-empty `values` by linear interpolation between the
    closest ranks, as numpy.percentile's default ("linear") method computes it."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * (q / 100)  # numpy divides q first; the rounding matters
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    below, above = ordered[low], ordered[high]
    fraction = rank - low
    # numpy's _lerp: exact at both ends, monotone in between.
    return below + (above - below) * fraction if fraction < 0.5 else above - (above - below) * (1 - fraction)


@attrs.frozen
class Spread:
    """Mean, 95th percentile and maximum of one figure over the polls of a window."""

    mean: float
    p95: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(mean=math.fsum(values) / len(values), p95=percentile(values, 95), max=max(values))


class ContainerTrack:
    """Everything read about one full container id: its time span over the whole dataset, and in
    the window its polls (node, unix_ms) -> figures and its processes (node, tgid)."""

    def __init__(self) -> None:
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.polls: dict[tuple[str, int], PollFigures] = {}
        self.processes: set[tuple[str, int]] = set()
        self.container_ids: set[str] = set()
        # a pod's polls, by container: (node, unix_ms) -> container id -> figures (`add_part`)
        self.parts: dict[tuple[str, int], dict[str, PollFigures]] = {}

    def see(self, unix_ms: int) -> None:
        self.first_ms = unix_ms if self.first_ms is None else min(self.first_ms, unix_ms)
        self.last_ms = unix_ms if self.last_ms is None else max(self.last_ms, unix_ms)

    def add_poll(self, key: tuple[str, int], figures: PollFigures) -> None:
        known = self.polls.get(key)
        self.polls[key] = figures if known is None else _pairwise_max(known, figures)

    def add_part(self, key: tuple[str, int], container_id: str, figures: PollFigures) -> None:
        """One container's figures of a pod's poll: the poll's figures become its containers'
        summed (CPU, memory) and highest (throttling, pressure, GPU)."""
        parts = self.parts.setdefault(key, {})
        known = parts.get(container_id)
        parts[container_id] = figures if known is None else _pairwise_max(known, figures)
        self.polls[key] = _pod_figures(parts.values())

    def merge(self, other: ContainerTrack) -> None:
        for unix_ms in (other.first_ms, other.last_ms):
            if unix_ms is not None:
                self.see(unix_ms)
        if other.parts:
            for key, parts in other.parts.items():
                for container_id, figures in parts.items():
                    self.add_part(key, container_id, figures)
        else:
            for key, figures in other.polls.items():
                self.add_poll(key, figures)
        self.processes |= other.processes
        self.container_ids |= other.container_ids


def _pairwise_max(a: PollFigures, b: PollFigures) -> PollFigures:
    """Two sets of rows of one poll together: the cgroup figures' maximum (of those measured), the
    GPU figures' sum."""
    return (
        max_present(a[0], b[0]),
        max_present(a[1], b[1]),
        max_present(a[2], b[2]),
        max_present(a[3], b[3]),
        max(a[4], b[4]),
        _plus(a[5], b[5]),
        _plus(a[6], b[6]),
    )


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _pod_figures(parts: Iterable[PollFigures]) -> PollFigures:
    """A pod's poll from its containers': CPU cores, memory and the GPU figures summed (of those
    measured), throttling, pressure and holding a GPU the highest."""
    each = list(parts)
    return (
        _sum_present([p[0] for p in each]),
        _sum_present([p[1] for p in each]),
        _max_present([p[2] for p in each]),
        _max_present([p[3] for p in each]),
        max(p[4] for p in each),
        _plus_all([p[5] for p in each]),
        _plus_all([p[6] for p in each]),
    )


def _sum_present(values: list[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return math.fsum(measured) if measured else None


def _max_present(values: list[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return max(measured) if measured else None


def _plus_all(values: list[int | None]) -> int | None:
    measured = [v for v in values if v is not None]
    return sum(measured) if measured else None


@attrs.frozen
class Subject:
    """What is profiled: a container (`value` a lower-case id prefix), a cgroup (`value` its path,
    rows of exactly that cgroup) or a process (`value` its pid). A track is kept per full container
    id, per cgroup path, per pid."""

    kind: str  # "container", "cgroup", "pid" or "pod" (`value` NAMESPACE/NAME)
    value: str

    def key(self, view: Any) -> str | None:
        """The track `view` belongs to, or None when it is not the subject's."""
        if self.kind == "cgroup":
            return self.value if view.process.cgroup == self.value else None
        if self.kind == "pod":
            pod = view.pod
            return self.value if pod is not None and f"{pod.namespace}/{pod.name}" == self.value else None
        if self.kind == "pid":
            return self.value if str(view.tgid) == self.value else None
        container_id = view.process.container_id
        return container_id if container_id is not None and container_id.startswith(self.value) else None

    def needle(self) -> bytes:
        """Bytes every line of the subject contains (a cgroup path as JSON writes it), so a reader
        can skip the lines without them."""
        if self.kind in ("cgroup", "pod"):
            import msgspec

            # a pod's lines hold its name (its namespace is a key of its own)
            written = self.value.split("/", 1)[1] if self.kind == "pod" else self.value
            return msgspec.json.encode(written)[1:-1]
        return self.value.encode()


class ProfileAccumulator:
    """Rows of the subject (default: every container whose id starts with `prefix`, lower-case
    hex), split into one `ContainerTrack` per full id, cgroup or pid; only rows with from_ms <=
    unix_ms <= to_ms count as polls. A process's polls carry its own CPU and RSS as `cpu_cores` and
    `memory_bytes` (its cgroup's throttling and pressure); the others, their cgroup's figures."""

    def __init__(
        self, prefix: str, from_ms: int | None, to_ms: int | None, subject: Subject | None = None
    ) -> None:
        self.prefix = prefix.lower()
        self.subject = subject or Subject("container", self.prefix)
        self.from_ms = from_ms
        self.to_ms = to_ms
        self.tracks: dict[str, ContainerTrack] = {}
        self.skips = SkipTally()
        self.pods: dict[str, PodNames] = {}  # container id -> its pod's names, from rows and summaries

    def add(self, node: str, view: Any) -> None:
        """Count one decoded row read on `node`; rows of other subjects are
        ignored. A row that names its node is counted on that node instead."""
        key = self.subject.key(view)
        if key is None:
            return
        track = self.tracks.get(key)
        if track is None:
            track = self.tracks[key] = ContainerTrack()
        unix_ms = view.unix_ms
        track.see(unix_ms)
        named = view.pod is not None and view.process.container_id is not None
        if named and self.subject.kind in ("container", "pod"):
            # a container's pod, in the window or not (a cgroup's or a process's rows are read
            # without the rest of their container's: those profiles name no pod)
            self.pods[view.process.container_id] = (view.pod.namespace, view.pod.name, view.pod.container)
        if (self.from_ms is not None and unix_ms < self.from_ms) or (
            self.to_ms is not None and unix_ms > self.to_ms
        ):
            return
        node = view.node or node
        cg = view.cgroup_usage
        gpu = 1.0 if view.workload in GPU_WORKLOADS else 0.0
        cpu, memory = cg.cpu_cores, None if cg.memory_bytes is None else float(cg.memory_bytes)
        if self.subject.kind == "pid":
            cpu, memory = view.usage.cpu_cores, float(view.usage.rss_bytes)
        gpu_memory, gpu_busy = exact_figures(view.gpus)
        figures = (cpu, memory, cg.cpu_throttled_fraction, cg.cpu_pressure_avg10, gpu, gpu_memory, gpu_busy)
        container_id = view.process.container_id
        if self.subject.kind == "pod":
            track.add_part((node, unix_ms), container_id or view.process.cgroup, figures)
        else:
            track.add_poll((node, unix_ms), figures)
        track.processes.add((node, view.tgid))
        if container_id is not None:
            track.container_ids.add(container_id)

    def add_span(self, key: str, first_ms: int, last_ms: int) -> None:
        """Count rows of the subject's track `key` seen from `first_ms` to `last_ms`, all outside
        the window (a summarized segment's, `croft.domain.dataset.poll_groups`)."""
        track = self.tracks.setdefault(key, ContainerTrack())
        track.see(first_ms)
        track.see(last_ms)

    def add_group(
        self, node: str, key: str, container_id: str | None, span: tuple[int, int], body: dict[str, Any]
    ) -> None:
        """Count one group of a summarized segment read on `node` (`croft.domain.dataset.poll_groups`:
        the rows of one container id and cgroup, `span` their first and last ms) as `add` counts
        its rows; its placeholder node (`FILE_NODE`, rows that name none) is `node`."""
        from croft.domain.dataset.poll_groups import FILE_NODE, polls_of

        self.add_span(key, *span)
        track = self.tracks[key]
        nodes = [node if name == FILE_NODE else name for name in body["nodes"]]
        sets = body["sets"]
        low, high = self.from_ms, self.to_ms
        for at, unix_ms, cpu, memory, throttled, pressure, gpu, tgids, gpu_memory, gpu_busy in polls_of(body):
            if (low is not None and unix_ms < low) or (high is not None and unix_ms > high):
                continue
            where = nodes[at]
            track.add_poll((where, unix_ms), (cpu, memory, throttled, pressure, gpu, gpu_memory, gpu_busy))
            track.processes.update((where, tgid) for tgid in sets[tgids])
            if container_id is not None:
                track.container_ids.add(container_id)

    def merge(self, other: ProfileAccumulator) -> None:
        for container_id, track in other.tracks.items():
            self.tracks.setdefault(container_id, ContainerTrack()).merge(track)
        self.skips.merge(other.skips)
        self.pods.update(other.pods)

    def matching_ids(self) -> tuple[str, ...]:
        """Every full container id seen that starts with the prefix, sorted."""
        return tuple(sorted(self.tracks))


@attrs.frozen
class Profile:
    """One container's profile over the window [from_ms, to_ms] (inclusive)."""

    container_id: str | None
    from_ms: int
    to_ms: int
    nodes: tuple[str, ...]
    polls: int
    processes: int
    gpu_poll_share: float
    spreads: tuple[Spread | None, Spread | None, Spread | None, Spread | None]  # METRICS' order
    extra: tuple[tuple[str, Any], ...] = ()  # keys after the spec's: "cgroup" or "pid"
    gpu_spreads: tuple[Spread | None, Spread | None] = (None, None)  # in the order of GPU_METRICS

    def to_json(self) -> dict[str, Any]:
        """The `croft profile` object: the keys users' scripts read, in order (tests/helpers/spec_keys.py).
        A figure no poll of the window measured (its cgroup does not offer it) is null, and named
        in `not_measured`; one measured in some polls only is spread over those."""
        out: dict[str, Any] = {
            "container_id": self.container_id,
            "from_ms": self.from_ms,
            "from_time": rfc3339(self.from_ms),
            "to_ms": self.to_ms,
            "to_time": rfc3339(self.to_ms),
            "nodes": list(self.nodes),
            "polls": self.polls,
            "processes": self.processes,
            "gpu_poll_share": self.gpu_poll_share,
        }
        named = list(zip(METRICS, self.spreads, strict=True))
        for name, spread in named:
            out[name] = None if spread is None else attrs.asdict(spread)
        if self.spreads[1] is not None:
            out["memory_bytes"]["max"] = int(self.spreads[1].max)
        out["not_measured"] = [name for name, spread in named if spread is None]
        for name, gpu_spread in zip(GPU_METRICS, self.gpu_spreads, strict=True):
            if gpu_spread is not None:  # left out without GPU figures
                out[name] = attrs.asdict(gpu_spread)
        if "gpu_memory_bytes" in out:
            out["gpu_memory_bytes"]["max"] = int(out["gpu_memory_bytes"]["max"])
        out.update(self.extra)
        return out


def subject_profile(
    subject: Subject,
    key: str,
    track: ContainerTrack,
    from_ms: int | None,
    to_ms: int | None,
    pods: Mapping[str, PodNames] | None = None,
) -> Profile | None:
    """`profile_of` for any subject: a container's as it is, and its pod (from `pods`, by id) in a
    last key `pod`, {namespace, name, container}, where its rows named it; a cgroup's, a process's
    or a pod's with the container id of its rows (None for a host one, or rows of several) and a
    last key, `cgroup` (the path), `pid` (the number) or `pod` ({namespace, name, containers})."""
    if subject.kind == "container":
        found = profile_of(key, track, from_ms, to_ms)
        named = (pods or {}).get(key)
        if found is None or named is None:
            return found
        return attrs.evolve(found, extra=(("pod", _pod_json(named)),))
    only = next(iter(track.container_ids)) if len(track.container_ids) == 1 else None
    found = profile_of(only, track, from_ms, to_ms)
    if found is None:
        return None
    if subject.kind == "pod":
        namespace, name = key.split("/", 1)
        containers = sorted(
            {(pods or {}).get(cid, (namespace, name, None))[2] or "" for cid in track.container_ids}
        )
        value: Any = {"namespace": namespace, "name": name, "containers": [c for c in containers if c]}
        return attrs.evolve(found, extra=(("pod", value),))
    value = key if subject.kind == "cgroup" else int(key)
    return attrs.evolve(found, extra=((subject.kind, value),))


def _pod_json(pod: PodNames) -> dict[str, Any]:
    return {"namespace": pod[0], "name": pod[1], "container": pod[2]}


def profile_of(
    container_id: str | None, track: ContainerTrack, from_ms: int | None, to_ms: int | None
) -> Profile | None:
    """The profile of `track` over the window, or None when it has no poll in the window. An open
    end of the window is the container's first (last) row in the window."""
    if not track.polls:
        return None
    keys = sorted(track.polls)
    columns = list(zip(*(track.polls[key] for key in keys), strict=True))
    times = [unix_ms for _, unix_ms in keys]
    return Profile(
        container_id=container_id,
        from_ms=min(times) if from_ms is None else from_ms,
        to_ms=max(times) if to_ms is None else to_ms,
        nodes=tuple(sorted({node for node, _ in keys})),
        polls=len(keys),
        processes=len(track.processes),
        gpu_poll_share=sum(v or 0.0 for v in columns[4]) / len(keys),
        spreads=(_spread(columns[0]), _spread(columns[1]), _spread(columns[2]), _spread(columns[3])),
        gpu_spreads=(_spread(columns[5], 1), _spread(columns[6], 100)),
    )


def _spread(values: Sequence[float | int | None], scale: int = 1) -> Spread | None:
    """The spread of the measured ones of `values` (over `scale`: a GPU figure's integers); None
    when none was measured."""
    measured = [value / scale if scale != 1 else value for value in values if value is not None]
    return Spread.of(measured) if measured else None
