"""The series `croft run --metrics-addr` serves, from the newest poll: a pure function.

`series(poll, rows, health, previous) -> (samples, memory)` turns the poll's rows and the collector's
health counters into the samples of `croft.domain.metrics.names`, in a fixed order, labels sorted.

A *group* is one container (every row with that container id, all its processes together) or, for
watched host processes, one cgroup (`container_id=""`). Its cgroup gauges come from the row of its
shortest cgroup path (the container's own cgroup), its syscall rates are summed over its rows and
their `short_lived` summaries (processes without a row of their own this poll).

Cardinality is bounded by the newest poll:
- a group is served when it has a row in this poll, or when it had one before and a process of it
  is still in this poll. That second case is an idle group (idle processes get a row only once every
  `IDLE_EVERY` polls, see `croft.domain.collector.selection`) or one whose processes have no rate yet: it is
  served with no syscall series (its rate is 0: `croft scale` still sees the container through its
  CPU series), CPU 0 and its last memory and pressure, so it does not blink in and out of Prometheus;
- a group none of whose processes is in the poll disappears;
- a group carries its `SYSCALLS_PER_CONTAINER` busiest syscalls (ties by name) and the rest summed
  under `syscall="other"`: at most 25 syscall series, 31 series in all, per group, plus, when its
  row carries an `ingress` this poll, up to 7 ingress rates and 2 queue gauges, and per GPU its
  rows name, a memory gauge and a counter per engine (`croft.domain.metrics.counters`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import attrs

from croft.domain.collector import PER_S_DIGITS, CgroupMembership, Poll, display_path, membership_container_id
from croft.domain.dataset import Ingress, Pod, Row, gpu_label
from croft.domain.metrics import names as names
from croft.domain.metrics.counters import GroupCounters, advance, own_samples, pod_uid
from croft.domain.metrics.exposition import Sample

GroupKey = tuple[str, str]
"""(container id, "") for a container, ("", cgroup path) for a watched host cgroup."""


@attrs.frozen
class GroupValues:
    """What one group's series say. `syscalls` are (name, calls/s), busiest first, `other` last."""

    container_id: str
    cgroup: str
    syscalls: tuple[tuple[str, float], ...]
    cpu_cores: float | None  # None, here and below: the cgroup does not offer it (no series)
    cpu_throttled_fraction: float | None
    memory_bytes: int | None
    pressure_avg10: tuple[float | None, float | None, float | None]  # cpu, memory, io (PRESSURE_RESOURCES)
    ingress: Ingress | None = None
    gpu_memory: tuple[tuple[str, int], ...] = ()  # (gpu label, bytes) summed over the rows, by label
    pod: Pod | None = None  # the Kubernetes names its rows carry (labels namespace, pod, container)
    oom_kills: int | None = None  # the cgroup's OOM kills so far (the kernel's counter)
    rates: Mapping[str, float] = attrs.field(factory=dict)  # every syscall's calls/s, before the cut


@attrs.frozen
class Health:
    """What the shell measured or counted: seconds the poll took, the dataset writer's counters;
    the eBPF loader in use (`ebpf_mode`; None in a replay)."""

    poll_duration_s: float
    rows_written_total: int
    rows_dropped_total: int
    compression_backlog_segments: int
    compression_failures_total: int
    live_files_lost_total: int = 0
    ebpf_mode: str | None = None


@attrs.frozen
class MetricsMemory:
    """What the series remember between polls: the groups served last, eBPF drops so far."""

    groups: Mapping[GroupKey, GroupValues] = attrs.field(factory=dict)
    map_drops_total: int = 0
    counters: Mapping[GroupKey, GroupCounters] = attrs.field(factory=dict)
    last_poll_ns: int | None = None


def top_syscalls(
    totals: Mapping[str, float],
    limit: int = names.SYSCALLS_PER_CONTAINER,
    ranked_by: Mapping[str, float] | None = None,
    named: Collection[str] | None = None,
) -> tuple[tuple[str, float], ...]:
    """The syscalls of `totals` (calls/s) that have a series of their own, busiest first (ties by
    name), then the rest summed as `other` when there is a rest (a syscall itself named `other`
    always counts as rest, so no two series share a label set). Zero rates are left out; the total
    is kept. Those with a series: the ones in `named` (an operator's list, `--metrics-syscalls`),
    else the `limit` first by `ranked_by` (the calls counted so far: a cut that one poll's noise
    does not move; where syscalls share a count, as the ones every exec makes once do, by rate and
    then by name), else by rate."""
    other = names.OTHER_SYSCALLS
    present = [n for n, r in totals.items() if r > 0 and n != other]
    if named is not None:
        chosen = {n for n in present if n in named}
    else:
        rank = ranked_by or {}
        chosen = set(sorted(present, key=lambda n: (-rank.get(n, 0.0), -totals[n], n))[:limit])
    kept = tuple((n, round(totals[n], PER_S_DIGITS)) for n in sorted(chosen, key=lambda n: (-totals[n], n)))
    rest = [totals[n] for n in present if n not in chosen]
    if totals.get(other, 0.0) > 0:
        rest.append(totals[other])
    if not rest:
        return kept
    return (*kept, (other, round(sum(rest), PER_S_DIGITS)))


def label_text(text: str) -> str:
    """`text` as a label value can carry it: valid UTF-8 (a lone surrogate, which a replayed trace
    can hold, becomes `?`). Quotes, backslashes and newlines are the exposition's to escape."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _row_key(row: Row) -> GroupKey:
    cid = row.process.container_id
    return (cid, "") if cid else ("", row.process.cgroup)


def _membership_key(membership: CgroupMembership) -> GroupKey:
    cid = membership_container_id(membership)
    return (cid, "") if cid else ("", display_path(membership))


def groups_of(rows: Iterable[Row]) -> dict[GroupKey, GroupValues]:
    """Each group of `rows` with its summed syscalls and its own cgroup's gauges."""
    members: dict[GroupKey, list[Row]] = {}
    for row in rows:
        members.setdefault(_row_key(row), []).append(row)
    out: dict[GroupKey, GroupValues] = {}
    for key, group_rows in members.items():
        own = min(group_rows, key=lambda r: (len(r.process.cgroup), r.process.cgroup))
        totals: dict[str, float] = {}
        for row in group_rows:
            calls = row.syscalls if row.short_lived is None else (*row.syscalls, *row.short_lived.syscalls)
            for call in calls:
                name = label_text(call.name)
                totals[name] = totals.get(name, 0.0) + call.rate_per_sec
        usage = own.cgroup_usage
        offered = next((row.ingress for row in group_rows if row.ingress is not None), None)
        named = next((row.pod for row in group_rows if row.pod is not None), None)
        out[key] = GroupValues(
            container_id=label_text(key[0]),
            cgroup=label_text(own.process.cgroup),
            syscalls=top_syscalls(totals),
            rates=totals,
            cpu_cores=usage.cpu_cores,
            cpu_throttled_fraction=usage.cpu_throttled_fraction,
            memory_bytes=usage.memory_bytes,
            pressure_avg10=(usage.cpu_pressure_avg10, usage.memory_pressure_avg10, usage.io_pressure_avg10),
            ingress=offered,
            oom_kills=usage.oom_kills,
            gpu_memory=_gpu_memory(group_rows),
            pod=named,
        )
    return out


def _gpu_memory(group_rows: Iterable[Row]) -> tuple[tuple[str, int], ...]:
    """The GPU memory of a group's rows, summed by GPU; a GPU none of whose uses says is left out."""
    memory: dict[str, int] = {}
    for row in group_rows:
        for use in row.gpus or ():
            if use.memory_bytes is not None:
                label = gpu_label(use)
                memory[label] = memory.get(label, 0) + use.memory_bytes
    return tuple(sorted(memory.items()))


def _quiet(values: GroupValues) -> GroupValues:
    """An idle group: no syscalls, no CPU and no throttling where they were measured, no GPU memory."""
    cores = None if values.cpu_cores is None else 0.0
    throttled = None if values.cpu_throttled_fraction is None else 0.0
    return attrs.evolve(
        values,
        syscalls=(),
        rates={},
        cpu_cores=cores,
        cpu_throttled_fraction=throttled,
        ingress=None,
        gpu_memory=(),
    )


def series(
    poll: Poll,
    rows: Sequence[Row],
    health: Health,
    previous: MetricsMemory,
    syscall_names: Collection[str] | None = None,
) -> tuple[tuple[Sample, ...], MetricsMemory]:
    """The samples of /metrics after `poll` (whose rows are `rows`) and the memory for the next.
    A container whose rows name their pod (`Row.pod`) carries `namespace`, `pod` and `container`
    labels on each of its series, as cAdvisor's kubelet series do. With `syscall_names`
    (`--metrics-syscalls`), the syscall series name only those syscalls, the rest summed as
    `other` (see `top_syscalls`)."""
    groups = groups_of(rows)
    missing = [key for key in previous.groups if key not in groups]
    if missing:
        alive = {_membership_key(m) for m in {p.cgroups for p in poll.processes}}
        for key in missing:
            if key in alive:
                groups[key] = _quiet(previous.groups[key])
    counters = _counters(poll, rows, groups, previous, syscall_names)
    groups = {
        key: attrs.evolve(
            group,
            syscalls=top_syscalls(group.rates, ranked_by=counters[key].syscalls, named=syscall_names),
        )
        for key, group in groups.items()
    }
    drops = previous.map_drops_total + max(poll.kernel.dropped_entries, 0)
    memory = MetricsMemory(groups, drops, counters, poll.at.monotonic_ns)
    samples = _samples(groups, poll.at.unix_ms, health, memory.map_drops_total)
    mode = (
        ()
        if health.ebpf_mode is None
        else (Sample(names.EBPF_MODE, ((names.LABEL_MODE, health.ebpf_mode),), 1.0),)
    )
    return (
        *samples[: -len(HEALTH_NAMES)],
        *_counter_samples(groups, counters),
        *samples[-len(HEALTH_NAMES) :],
        *mode,
    ), memory


def _counters(
    poll: Poll,
    rows: Sequence[Row],
    groups: Mapping[GroupKey, GroupValues],
    previous: MetricsMemory,
    syscall_names: Collection[str] | None,
) -> dict[GroupKey, GroupCounters]:
    """Each served group's counters after `poll` (see `croft.domain.metrics.counters`)."""
    last = previous.last_poll_ns
    interval_s = max(poll.at.monotonic_ns - last, 0) / 1e9 if last is not None else 0.0
    members: dict[GroupKey, list[Row]] = {}
    for row in rows:
        members.setdefault(_row_key(row), []).append(row)
    out: dict[GroupKey, GroupCounters] = {}
    own_sample = own_samples(poll)
    for key in groups:
        group_rows = members.get(key, [])
        own = min(group_rows, key=lambda r: (len(r.process.cgroup), r.process.cgroup)) if group_rows else None
        sample = own_sample(own) if own is not None else None
        out[key] = advance(previous.counters.get(key), group_rows, sample, interval_s, syscall_names)
    return out


def _counter_samples(
    groups: Mapping[GroupKey, GroupValues],
    counters: Mapping[GroupKey, GroupCounters],
) -> list[Sample]:
    keys = sorted(groups)
    out: list[Sample] = []
    for key in keys:
        group = groups[key]
        for syscall, calls in sorted(counters[key].syscalls.items()):
            out.append(
                Sample(
                    names.CONTAINER_SYSCALLS_TOTAL,
                    _labels(group, (names.LABEL_SYSCALL, label_text(syscall))),
                    float(calls),
                )
            )
    simple: tuple[tuple[str, Callable[[GroupCounters], float | int | None]], ...] = (
        (names.CONTAINER_CPU_SECONDS_TOTAL, lambda c: c.cpu_seconds),
        (names.CONTAINER_CPU_PERIODS_TOTAL, lambda c: c.periods),
        (names.CONTAINER_CPU_THROTTLED_PERIODS_TOTAL, lambda c: c.throttled_periods),
        (names.CONTAINER_NETWORK_RECEIVE_BYTES_TOTAL, lambda c: c.network_receive_bytes),
        (names.CONTAINER_NETWORK_TRANSMIT_BYTES_TOTAL, lambda c: c.network_transmit_bytes),
        (names.CONTAINER_FS_READ_BYTES_TOTAL, lambda c: c.read_bytes),
        (names.CONTAINER_FS_WRITE_BYTES_TOTAL, lambda c: c.write_bytes),
    )
    for name, value_of in simple:
        for key in keys:
            value = value_of(counters[key])
            if value is not None:
                out.append(Sample(name, _labels(groups[key]), round(float(value), 6)))
    for key in keys:
        group = groups[key]
        for resource, avg10 in zip(names.PRESSURE_RESOURCES, group.pressure_avg10, strict=True):
            if avg10 is not None:
                labels = _labels(group, (names.LABEL_RESOURCE, resource))
                out.append(Sample(names.CONTAINER_PRESSURE_RATIO, labels, round(avg10 / 100, 6)))
    for key in keys:
        waiting = counters[key].pressure_waiting_seconds
        for resource, seconds in zip(names.PRESSURE_RESOURCES, waiting, strict=True):
            if seconds is not None:
                labels = _labels(groups[key], (names.LABEL_RESOURCE, resource))
                out.append(Sample(names.CONTAINER_PRESSURE_WAITING_SECONDS_TOTAL, labels, round(seconds, 6)))
    for key in keys:
        for (gpu, engine), seconds in sorted(counters[key].gpu_engine_seconds.items()):
            labels = _labels(
                groups[key], (names.LABEL_ENGINE, label_text(engine)), (names.LABEL_GPU, label_text(gpu))
            )
            out.append(Sample(names.CONTAINER_GPU_ENGINE_SECONDS_TOTAL, labels, round(seconds, 6)))
    for key in keys:
        if (kills := groups[key].oom_kills) is not None:
            out.append(Sample(names.CONTAINER_OOM_EVENTS_TOTAL, _labels(groups[key]), float(kills)))
    for key in keys:
        group = groups[key]
        labels = _labels(group, (names.LABEL_POD_UID, pod_uid(group.cgroup)))
        out.append(Sample(names.CONTAINER_INFO, labels, 1.0))
    return out


def _samples(
    groups: Mapping[GroupKey, GroupValues], unix_ms: int, health: Health, map_drops_total: int
) -> tuple[Sample, ...]:
    ordered = [groups[key] for key in sorted(groups)]
    out: list[Sample] = []
    for group in ordered:
        for syscall, rate in group.syscalls:
            labels = _labels(group, (names.LABEL_SYSCALL, syscall))
            out.append(Sample(names.CONTAINER_SYSCALL_RATE, labels, rate))
    # A figure the group's cgroup does not offer has no series (cAdvisor omits what a cgroup lacks).
    out.extend(
        Sample(names.CONTAINER_CPU_CORES, _labels(g), g.cpu_cores) for g in ordered if g.cpu_cores is not None
    )
    out.extend(
        Sample(names.CONTAINER_MEMORY_USAGE_BYTES, _labels(g), float(g.memory_bytes))
        for g in ordered
        if g.memory_bytes is not None
    )
    throttled = names.CONTAINER_CPU_THROTTLED_FRACTION
    out.extend(
        Sample(throttled, _labels(g), g.cpu_throttled_fraction)
        for g in ordered
        if g.cpu_throttled_fraction is not None
    )
    out.extend(_ingress_samples(ordered))
    for group in ordered:
        for gpu, used in group.gpu_memory:
            labels = _labels(group, (names.LABEL_GPU, label_text(gpu)))
            out.append(Sample(names.CONTAINER_GPU_MEMORY_BYTES, labels, float(used)))
    out.extend(
        Sample(name, (), float(value))
        for name, value in zip(
            HEALTH_NAMES,
            (
                health.poll_duration_s,
                unix_ms / 1000,
                health.rows_written_total,
                health.rows_dropped_total,
                map_drops_total,
                health.compression_backlog_segments,
                health.compression_failures_total,
                health.live_files_lost_total,
            ),
            strict=True,
        )
    )
    return tuple(out)


def ingress_rates(value: Ingress) -> tuple[tuple[str, float], ...]:
    """(signal, per second) of `value` in `names.INGRESS_SIGNALS` order; eBPF ones only when measured."""
    rates = (
        value.tcp_data_segments_s,
        value.tcp_connections_s,
        value.tcp_passive_opens_s,
        value.tcp_in_segs_s,
        value.rx_packets_s,
        value.rx_bytes_s,
        value.listen_drops_s,
    )
    return tuple((n, r) for n, r in zip(names.INGRESS_SIGNALS, rates, strict=True) if r is not None)


def _ingress_samples(ordered: Sequence[GroupValues]) -> list[Sample]:
    measured = [g for g in ordered if g.ingress is not None]
    out: list[Sample] = []
    for group in measured:
        assert group.ingress is not None
        for signal, rate in ingress_rates(group.ingress):
            labels = _labels(group, (names.LABEL_SIGNAL, signal))
            out.append(Sample(names.CONTAINER_INGRESS_RATE, labels, rate))
    queues: tuple[tuple[str, Callable[[Ingress], int]], ...] = (
        (names.CONTAINER_LISTEN_BACKLOG, lambda i: i.listen_backlog),
        (names.CONTAINER_UNREAD_BYTES, lambda i: i.unread_bytes),
    )
    for name, value_of in queues:
        for group in measured:
            assert group.ingress is not None
            out.append(Sample(name, _labels(group), float(value_of(group.ingress))))
    return out


HEALTH_NAMES = (
    names.POLL_DURATION_SECONDS,
    names.LAST_POLL_TIMESTAMP_SECONDS,
    names.ROWS_WRITTEN_TOTAL,
    names.ROWS_DROPPED_TOTAL,
    names.MAP_DROPS_TOTAL,
    names.COMPRESSION_BACKLOG_SEGMENTS,
    names.COMPRESSION_FAILURES_TOTAL,
    names.LIVE_FILES_LOST_TOTAL,
)


def _labels(group: GroupValues, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """The group's labels plus `extra`, sorted by name (as `Sample` wants them): `cgroup`,
    `container_id` and, for a container of a pod, `namespace`, `pod` and `container` (its name in
    the pod; left out for the sandbox)."""
    base = ((names.LABEL_CGROUP, group.cgroup), (names.LABEL_CONTAINER_ID, group.container_id))
    return tuple(sorted((*base, *_pod_labels(group.pod), *extra)))


def _pod_labels(pod: Pod | None) -> tuple[tuple[str, str], ...]:
    if pod is None:
        return ()
    named = ((names.LABEL_NAMESPACE, label_text(pod.namespace)), (names.LABEL_POD, label_text(pod.name)))
    return named if pod.container is None else (*named, (names.LABEL_CONTAINER, label_text(pod.container)))
