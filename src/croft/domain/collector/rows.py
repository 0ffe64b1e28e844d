"""The collector's core: the rows of one poll, from the previous poll, this one and what the
collector remembers.

`rows(previous, current, state, config) -> (rows, new state)` is pure. A process gets a row only in
a poll where all its rates exist (see `croft.domain.collector.rates`): a first sighting or a reused pid is
remembered and rated from the next poll on; a counter that went backwards skips that poll. Skipped
processes are counted in the state, never written with made-up numbers.

Syscalls of a watched container's processes that get no row of their own this poll (first
sightings, processes that exited before the poll read them, `Poll.unread`) are folded into one row
of the container as its `short_lived` summary (`croft.domain.dataset.row.ShortLived`), so the
container's rate is the sum over everything it ran. That row is the written row with the shortest
cgroup path (then the lowest tgid); when the container has none this poll, the row of its
longest-known process is written for it (a real, rated row: nothing is made up). A container with
no rated process at all cannot carry them: their count is kept in the state (`short_lived_unplaced`).

The same row carries the container's `ingress`, the offered load of its network namespace
(`croft.domain.collector.ingress`); a container with no written row gets one the same way when
anything arrived or waits in its namespace.

A row's `gpus` are what its process used of each GPU (`croft.domain.collector.gpu_use`); a
process with a DRM client open holds a GPU as one with an NVIDIA device file open does.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

import attrs
import msgspec

from croft.domain.collector import gpu
from croft.domain.collector.container import display_path, membership_container_id
from croft.domain.collector.frameworks import Matcher
from croft.domain.collector.gpu_use import gpu_uses
from croft.domain.collector.ingress import active, ingress
from croft.domain.collector.rates import (
    NS_PER_S,
    PER_S_DIGITS,
    UNREAD_CGROUP,
    CgroupRates,
    ProcessRates,
    per_s,
)
from croft.domain.collector.selection import IDLE_EVERY, watched
from croft.domain.collector.snapshot import (
    CgroupMembership,
    CgroupSample,
    Poll,
    ProcessChanges,
    ProcessSample,
)
from croft.domain.dataset import (
    CMDLINE_CHARS,
    CgroupUsage,
    GpuUse,
    Ingress,
    Process,
    Row,
    ShortLived,
    SyscallRate,
    Usage,
)
from croft.domain.os_text import written

_tgid = operator.attrgetter("tgid")

GroupKey = tuple[str, str]
"""(container id, "") for a container, ("", cgroup path) for a watched host cgroup."""


def _written_node(node: str | None) -> str | None:
    return None if node is None else written(node)


@attrs.frozen
class CollectorConfig:
    """`watch` are the cgroup path prefixes of `--watch` (see `croft.domain.collector.selection`);
    `node` the node every row names (None: rows carry no node), as written (a host name that is
    not UTF-8 escaped, `croft.domain.os_text`)."""

    watch: tuple[str, ...]
    matcher: Matcher = attrs.field(eq=False)
    idle_every: int = IDLE_EVERY
    node: str | None = attrs.field(default=None, converter=_written_node)


@attrs.frozen
class ProcessState:
    """What the collector remembers of one process (keyed by tgid, valid for `start_ticks`)."""

    start_ticks: int
    gpu: gpu.GpuState | None = None
    last_written_poll: int | None = None
    framework_key: tuple[str, tuple[str, ...], tuple[str, ...]] | None = None
    framework: str | None = None


@attrs.frozen
class CollectorState:
    """`polls` counts polls seen; `no_rate` the process-polls skipped for lack of a rate (first
    sightings, reused pids, counters gone backwards); `dropped` the pids the adapters dropped.

    So that a poll with `Poll.changes` looks only at what can give a row or change a state,
    `attended` holds the tgids that must be looked at next poll even unchanged (GPU holders,
    watched processes due for a row and not written), and `due_at` by poll index the tgids written
    `idle_every` polls before it (an idle watched process is due again then)."""

    polls: int = 0
    processes: Mapping[int, ProcessState] = attrs.field(factory=dict)
    no_rate: int = 0
    dropped: int = 0
    written: int = 0
    short_lived_unplaced: int = 0
    attended: frozenset[int] = frozenset()
    due_at: Mapping[int, frozenset[int]] = attrs.field(factory=dict)


def rows(
    previous: Poll | None, current: Poll, state: CollectorState, config: CollectorConfig
) -> tuple[tuple[Row, ...], CollectorState]:
    """The rows of `current` (ordered by tgid) and the state after it.

    With `current.changes` relative to `previous`, and `state` what this function returned for
    `previous`, only the processes that changed, are active in the kernel's counts, are in
    `state.attended` or are due are looked at: every other one would give no row and keep its
    state. The rows and the state are the same with the hint as without it."""
    poll_index = state.polls
    interval_ns = current.at.monotonic_ns - previous.at.monotonic_ns if previous is not None else 0
    before = _by_tgid(previous) if previous is not None else {}
    cgroups_before = {c.membership: c for c in previous.cgroups} if previous is not None else {}
    cgroups_now = {c.membership: c for c in current.cgroups}
    cgroup_rates: dict[CgroupMembership, CgroupRates | None] = {}

    out: list[Row] = []
    watched_memo: dict[CgroupMembership, bool] = {}
    active = set(current.kernel.syscalls) | set(current.kernel.gpu_ioctls) | set(current.gpu.memory_bytes)
    if current.drm:
        active.update(tgid for tgid, clients in current.drm.items() if clients)
    uses = gpu_uses(previous, current, interval_ns)
    no_rate = 0
    # The cgroup rates, verdict and row parts of each membership object (by id(): the processes of
    # one cgroup share one), so an idle process costs a few lookups (10,000 of them per poll).
    groups: dict[int, tuple[CgroupRates | None, bool, _Where | None]] = {}
    known_processes = state.processes
    idle_every = config.idle_every
    attended: set[int] = set()
    changes = _usable_changes(previous, current, interval_ns, cgroups_before)
    if changes is None:
        remembered: dict[int, ProcessState] = {}
        looked_at = sorted(current.processes, key=_tgid)
    else:
        remembered = dict(known_processes)
        for tgid in changes.gone:
            remembered.pop(tgid, None)
        now = changes.by_tgid
        wanted = changes.changed | active | state.attended | state.due_at.get(poll_index, frozenset())
        looked_at = [now[tgid] for tgid in sorted(wanted) if tgid in now]
    for sample in looked_at:
        tgid = sample.tgid
        known = known_processes.get(tgid)
        if known is None or known.start_ticks != sample.start_ticks:
            known = ProcessState(start_ticks=sample.start_ticks)
        membership = sample.cgroups
        group = groups.get(id(membership))
        if group is None:
            if membership not in cgroup_rates:
                cgroup_rates[membership] = _cgroup_rates(
                    cgroups_now.get(membership), cgroups_before, interval_ns
                )
                watched_memo[membership] = watched(membership, config.watch)
            group_rates = cgroup_rates[membership]
            where = (
                None if group_rates is None else _where(membership, cgroups_now.get(membership), group_rates)
            )
            group = group_rates, watched_memo[membership], where
            groups[id(membership)] = group
        group_rates, is_watched, where = group
        last = before.get(tgid)
        if (
            group_rates is not None
            and last is not None
            and (last is sample or last == sample)
            and tgid not in active
            and sample.gpu_device_fds == 0
            and (known.gpu is None or not known.gpu.holding)
            and not (
                is_watched
                # an idle watched process is due when never written or written idle_every polls ago
                # (selection's rule; inlined: this runs for every idle process of every poll)
                and (known.last_written_poll is None or poll_index - known.last_written_poll >= idle_every)
            )
        ):
            # Nothing moved and nothing is due: the full path would write no row and change no
            # state, so skip it (thousands of idle processes per poll).
            remembered[tgid] = known
            continue
        rates = ProcessRates.new(sample, last, interval_ns, current.ticks_per_s)
        if rates is None or where is None:
            no_rate += 1
        else:
            row, known = _row(
                sample, rates, where, current, interval_ns, known, poll_index, config, watched_memo, uses
            )
            if row is not None:
                out.append(row)
        remembered[tgid] = known
        if _attended(sample, known, is_watched, poll_index + 1, idle_every):
            attended.add(tgid)
    unplaced = 0
    if interval_ns > 0:
        pending = _short_lived(current, out, config, watched_memo)
        offered = _offered(previous, current, interval_ns, config, watched_memo)
        if pending or offered:
            unplaced = _place_short_lived(
                pending, out, remembered, before, cgroups_now, cgroups_before, cgroup_rates, current,
                interval_ns, poll_index, config, watched_memo, offered, uses,
            )  # fmt: skip
    due_at = {index: tgids for index, tgids in state.due_at.items() if index > poll_index}
    if out:
        due_at[poll_index + idle_every] = frozenset(row.tgid for row in out)
    new_state = CollectorState(
        polls=poll_index + 1,
        processes=remembered,
        no_rate=state.no_rate + no_rate,
        dropped=state.dropped + current.dropped,
        written=state.written + len(out),
        short_lived_unplaced=state.short_lived_unplaced + unplaced,
        attended=frozenset(attended),
        due_at=due_at,
    )
    return tuple(out), new_state


def _usable_changes(
    previous: Poll | None,
    current: Poll,
    interval_ns: int,
    cgroups_before: Mapping[CgroupMembership, CgroupSample],
) -> ProcessChanges | None:
    """`current.changes` when the core may follow them: they are relative to `previous`, time went
    forward, and no cgroup lost its rates (each of its processes then counts a poll without one)."""
    changes = current.changes
    if changes is None or previous is None or changes.since_monotonic_ns != previous.at.monotonic_ns:
        return None
    if interval_ns <= 0:
        return None
    for cgroup in current.cgroups:
        if CgroupRates.new(cgroup, cgroups_before.get(cgroup.membership), interval_ns) is None:
            return None
    return changes


def _attended(
    sample: ProcessSample, known: ProcessState, is_watched: bool, next_poll: int, idle_every: int
) -> bool:
    """Whether an unchanged process must still be looked at in poll `next_poll`: it holds a GPU, or
    it is watched and its row would be due (never written, or written `idle_every` polls before)."""
    if sample.gpu_device_fds or (known.gpu is not None and known.gpu.holding):
        return True
    last = known.last_written_poll
    return is_watched and (last is None or next_poll - last > idle_every)


def _by_tgid(poll: Poll) -> Mapping[int, ProcessSample]:
    """The poll's processes by tgid."""
    if poll.changes is not None:
        return poll.changes.by_tgid
    return {p.tgid: p for p in poll.processes}


def group_key(membership: CgroupMembership) -> GroupKey:
    """The container (or watched host cgroup) a membership belongs to, as rows name it."""
    cid = membership_container_id(membership)
    return (cid, "") if cid else ("", display_path(membership))


def _row_key(row: Row) -> GroupKey:
    cid = row.process.container_id
    return (cid, "") if cid else ("", row.process.cgroup)


@attrs.define
class _Pending:
    """One container's syscalls without a row: the tgids read, how many unread processes, counts."""

    tgids: set[int] = attrs.field(factory=set)
    unread: int = 0
    counts: dict[str, int] = attrs.field(factory=dict)


def _watched(
    membership: CgroupMembership, watched_memo: dict[CgroupMembership, bool], config: CollectorConfig
) -> bool:
    """`watched(membership, config.watch)`, remembered for the rest of the poll."""
    verdict = watched_memo.get(membership)
    if verdict is None:
        verdict = watched_memo[membership] = watched(membership, config.watch)
    return verdict


def _short_lived(
    current: Poll, out: list[Row], config: CollectorConfig, watched_memo: dict[CgroupMembership, bool]
) -> dict[GroupKey, _Pending]:
    """By container: the processes and syscall counts of this poll that no row of `out` carries."""
    carried = {row.tgid for row in out}
    pending: dict[GroupKey, _Pending] = {}

    def fold(membership: CgroupMembership, counts: Mapping[str, int]) -> _Pending | None:
        if not _watched(membership, watched_memo, config) or not any(counts.values()):
            return None
        into = pending.setdefault(group_key(membership), _Pending())
        for name, count in counts.items():
            into.counts[name] = into.counts.get(name, 0) + count
        return into

    syscalls = current.kernel.syscalls
    now = current.changes.by_tgid if current.changes is not None else None
    # The processes with counts: found by tgid where the shell gave the map (10,000 idle processes).
    samples = current.processes if now is None else [now[tgid] for tgid in syscalls if tgid in now]
    for sample in samples:
        counts = syscalls.get(sample.tgid)
        if counts and sample.tgid not in carried:
            folded = fold(sample.cgroups, counts)
            if folded is not None:
                folded.tgids.add(sample.tgid)
    for unread in current.unread:
        folded = fold(unread.membership, unread.syscalls)
        if folded is not None:
            folded.unread += unread.processes
    return pending


def _offered(
    previous: Poll | None,
    current: Poll,
    interval_ns: int,
    config: CollectorConfig,
    watched_memo: dict[CgroupMembership, bool],
) -> dict[GroupKey, Ingress]:
    """By watched container: the `Ingress` of its network namespace this poll (none where the
    namespace has no rate yet, see `croft.domain.collector.ingress`)."""
    if not current.netns:
        return {}
    before = {n.inode: n for n in previous.netns} if previous is not None else {}
    members = _by_tgid(current)
    out: dict[GroupKey, Ingress] = {}
    for sample in current.netns:
        value = ingress(sample, before.get(sample.inode), interval_ns, current.kernel)
        if value is None:
            continue
        seen: set[int] = set()  # id() of the memberships met: the processes of a cgroup share one
        for tgid in sample.tgids:
            member = members.get(tgid)
            if member is None or id(member.cgroups) in seen:
                continue
            membership = member.cgroups
            seen.add(id(membership))
            if _watched(membership, watched_memo, config):
                out.setdefault(group_key(membership), value)
    return out


def _place_short_lived(
    pending: dict[GroupKey, _Pending],
    out: list[Row],
    remembered: dict[int, ProcessState],
    before: Mapping[int, ProcessSample],
    cgroups_now: Mapping[CgroupMembership, CgroupSample],
    cgroups_before: Mapping[CgroupMembership, CgroupSample],
    cgroup_rates: dict[CgroupMembership, CgroupRates | None],
    current: Poll,
    interval_ns: int,
    poll_index: int,
    config: CollectorConfig,
    watched_memo: dict[CgroupMembership, bool],
    offered: Mapping[GroupKey, Ingress],
    uses: Mapping[int, tuple[GpuUse, ...]],
) -> int:
    """Attach each container's pending summary and its `Ingress` to its carrier row (writing one
    when the container has none and has either short-lived syscalls or an active ingress), in
    place; returns the syscall count no row could carry."""
    carriers: dict[GroupKey, int] = {}
    for index, row in enumerate(out):
        key = _row_key(row)
        if key in pending or key in offered:
            best = carriers.get(key)
            if best is None or (len(row.process.cgroup), row.tgid) < (
                len(out[best].process.cgroup),
                out[best].tgid,
            ):
                carriers[key] = index
    missing = {key for key in pending if key not in carriers} | {
        key for key, value in offered.items() if key not in carriers and active(value)
    }
    if missing:
        candidates = sorted(
            (p for p in current.processes if p.tgid in before and group_key(p.cgroups) in missing),
            key=lambda p: (len(display_path(p.cgroups)), p.tgid),
        )
        for sample in candidates:
            key = group_key(sample.cgroups)
            membership = sample.cgroups
            if key in carriers:
                continue
            # The memos hold what the processes looked at this poll found; with the shell's hint a
            # candidate's cgroup may have had none of them.
            if not _watched(membership, watched_memo, config):
                continue
            if membership not in cgroup_rates:
                cgroup_rates[membership] = _cgroup_rates(
                    cgroups_now.get(membership), cgroups_before, interval_ns
                )
            group_rates = cgroup_rates[membership]
            rates = ProcessRates.new(sample, before[sample.tgid], interval_ns, current.ticks_per_s)
            if rates is None or group_rates is None:
                continue
            forced, known = _row(
                sample, rates, _where(sample.cgroups, cgroups_now.get(sample.cgroups), group_rates), current,
                interval_ns, remembered[sample.tgid], poll_index, config, watched_memo, uses, force=True,
            )  # fmt: skip
            assert forced is not None
            remembered[sample.tgid] = known
            out.append(forced)
            carriers[key] = len(out) - 1
    unplaced = 0
    interval_s = interval_ns / NS_PER_S
    for key, folded in pending.items():
        carrier = carriers.get(key)
        if carrier is None:
            unplaced += sum(folded.counts.values())
            continue
        summary = ShortLived(
            processes=len(folded.tgids) + folded.unread, syscalls=_syscalls(folded.counts, interval_s)
        )
        out[carrier] = msgspec.structs.replace(out[carrier], short_lived=summary)
    for key, value in offered.items():
        carrier = carriers.get(key)
        if carrier is not None:
            out[carrier] = msgspec.structs.replace(out[carrier], ingress=value)
    out.sort(key=lambda row: row.tgid)
    return unplaced


def _cgroup_rates(
    cgroup: CgroupSample | None, before: Mapping[CgroupMembership, CgroupSample], interval_ns: int
) -> CgroupRates | None:
    if cgroup is None:
        # cgroupfs said nothing about it: nothing measured, not a reason to skip the process.
        return UNREAD_CGROUP if interval_ns > 0 else None
    return CgroupRates.new(cgroup, before.get(cgroup.membership), interval_ns)


_Where = tuple[CgroupUsage, str, str | None]
"""What every row of one cgroup membership shares in a poll: its cgroup usage, the cgroup path and
container id it names."""


def _where(membership: CgroupMembership, cgroup: CgroupSample | None, group_rates: CgroupRates) -> _Where:
    usage = _cgroup_usage(cgroup, group_rates)
    return usage, display_path(membership), membership_container_id(membership)


def _row(
    sample: ProcessSample,
    rates: ProcessRates,
    where: _Where,
    current: Poll,
    interval_ns: int,
    known: ProcessState,
    poll_index: int,
    config: CollectorConfig,
    watched_memo: Mapping[CgroupMembership, bool],
    uses: Mapping[int, tuple[GpuUse, ...]],
    force: bool = False,
) -> tuple[Row | None, ProcessState]:
    tgid = sample.tgid
    kernel = current.kernel
    reading, gpu_state = gpu.step(
        known.gpu,
        kernel.gpu_ioctls.get(tgid),
        tgid in current.gpu.memory_bytes,
        sample.gpu_device_fds + len(current.drm.get(tgid, ())) if current.drm else sample.gpu_device_fds,
        current.at.monotonic_ns,
    )
    counts = kernel.syscalls.get(tgid)
    write = force or reading.workload != "no-gpu"
    if not write and watched_memo[sample.cgroups]:
        last_written = known.last_written_poll
        # written when busy, never written, or last written idle_every polls ago (selection's
        # rule; inlined: this runs for every rated process of every poll)
        write = (
            last_written is None
            or poll_index - last_written >= config.idle_every
            or rates.cpu_ticks != 0
            or (counts is not None and any(counts.values()))
        )
    framework_key = (sample.exe, sample.cmdline, sample.libraries)
    if known.framework_key != framework_key:
        framework = config.matcher.match(sample.exe, sample.cmdline, sample.libraries)
    else:
        framework = known.framework
    known = ProcessState(  # every field, not attrs.evolve: this runs for each rated process a poll
        start_ticks=known.start_ticks,
        gpu=gpu_state,
        last_written_poll=poll_index if write else known.last_written_poll,
        framework_key=framework_key,
        framework=framework,
    )
    if not write:
        return None, known
    interval_s = interval_ns / NS_PER_S
    cgroup_usage, cgroup_path, container_id = where
    rx, tx = kernel.net_rx_bytes.get(tgid), kernel.net_tx_bytes.get(tgid)
    row = Row(
        unix_ms=current.at.unix_ms,
        tgid=tgid,
        process=Process(
            comm=written(sample.comm),
            exe=written(sample.exe),
            cmdline=command_line(tuple(map(written, sample.cmdline))),
            cgroup=cgroup_path,
            container_id=container_id,
            cwd=written(sample.cwd),
            framework=framework,
        ),
        workload=reading.workload,
        usage=Usage(
            cpu_cores=rates.cpu_cores,
            rss_bytes=sample.rss_bytes,
            threads=sample.threads,
            ctx_voluntary_s=rates.ctx_voluntary_s,
            ctx_involuntary_s=rates.ctx_involuntary_s,
            read_bytes_s=rates.read_bytes_s,
            write_bytes_s=rates.write_bytes_s,
            network_rx_bytes_s=per_s(rx or 0, interval_s) if kernel.counts_network else None,
            network_tx_bytes_s=per_s(tx or 0, interval_s) if kernel.counts_network else None,
            runqueue_s=rates.runqueue_s,
        ),
        cgroup_usage=cgroup_usage,
        syscalls=_syscalls(counts, interval_s) if counts else (),
        ioctl_count=reading.ioctl_count,
        since_last_gpu_ioctl_ms=reading.since_last_gpu_ioctl_ms,
        gpus=uses.get(tgid),
        node=config.node,
    )
    return row, known


def command_line(arguments: tuple[str, ...]) -> str | None:
    """The arguments joined by spaces, as `ps -o args` shows them, in at most `CMDLINE_CHARS`
    characters (cut with an ellipsis); None for a process without arguments."""
    if not arguments:
        return None
    text = " ".join(arguments)
    return text if len(text) <= CMDLINE_CHARS else text[: CMDLINE_CHARS - 1] + "…"


def _cgroup_usage(cgroup: CgroupSample | None, group_rates: CgroupRates) -> CgroupUsage:
    """The row's cgroup figures; one the cgroup does not offer (None in the sample) stays None."""
    if cgroup is None:
        cgroup = CgroupSample(membership=CgroupMembership(unified=None))
    return CgroupUsage(
        cpu_cores=group_rates.cpu_cores,
        cpu_throttled_fraction=group_rates.cpu_throttled_fraction,
        memory_bytes=cgroup.memory_bytes,
        oom_kills=cgroup.oom_kills,
        cpu_pressure_avg10=cgroup.cpu_pressure_avg10,
        memory_pressure_avg10=cgroup.memory_pressure_avg10,
        io_pressure_avg10=cgroup.io_pressure_avg10,
    )


def _syscalls(counts: Mapping[str, int], interval_s: float) -> tuple[SyscallRate, ...]:
    """Syscalls made this poll, busiest first (ties by name), zero counts left out."""
    ordered = sorted(((n, c) for n, c in counts.items() if c > 0), key=lambda item: (-item[1], item[0]))
    return tuple(SyscallRate(name=n, rate_per_sec=per_s(c, interval_s, PER_S_DIGITS)) for n, c in ordered)
