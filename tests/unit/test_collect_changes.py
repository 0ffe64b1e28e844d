"""The core with the shell's hint (`Poll.changes`): the rows and the state are those of the full
pass over every process, on any trace where the hint tells the truth."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from croft.domain.collector.kernel import GpuHolders, GpuIoctls, KernelSample
from croft.domain.collector.rows import CollectorState, rows
from croft.domain.collector.snapshot import (
    CgroupMembership,
    Instant,
    NetnsSample,
    Poll,
    ProcessChanges,
    ProcessSample,
    Unread,
)
from croft.domain.collector.trace import poll_from_json, poll_to_json
from tests.helpers.snapshots import HOST, WATCHED, cgroup, config, proc

V1_ONLY = CgroupMembership(unified="/user.slice", controllers=(("cpu", "/kubepods/v1-only"),))
MEMBERSHIPS = (WATCHED, HOST, V1_ONLY)
TGIDS = range(100, 112)

# One step of a process between two polls: stays the very same sample, moves forward (ran), has
# its memory reclaimed while asleep, is replaced by a new process on the same pid, goes, or has a
# counter go backwards.
ACTIONS = ("keep", "keep", "keep", "ran", "memory", "reused", "gone", "backwards")

steps = st.lists(
    st.tuples(
        st.lists(st.sampled_from(ACTIONS), min_size=len(TGIDS), max_size=len(TGIDS)),
        st.sets(st.sampled_from([*TGIDS, 900, 901])),  # syscalls this poll (900, 901: never read)
        st.sets(st.sampled_from(TGIDS), max_size=2),  # GPU ioctls
        st.sets(st.sampled_from(TGIDS), max_size=1),  # NVML holders
        st.sampled_from((2.0, 2.0, 2.0, 0.0, 3.5)),  # seconds since the previous poll
        st.booleans(),  # a cgroup recreated (its counters go back)
        st.sets(st.sampled_from(range(len(MEMBERSHIPS))), max_size=2),  # unread syscalls, by membership
        st.tuples(st.sets(st.sampled_from(TGIDS), max_size=4), st.integers(0, 3)),  # a namespace
    ),
    min_size=1,
    max_size=24,
)


def first_sample(tgid: int, seed: int) -> ProcessSample:
    return proc(
        tgid,
        cgroups=MEMBERSHIPS[(tgid + seed) % len(MEMBERSHIPS)],
        start_ticks=5000 + seed,
        cpu_ticks=0,
        gpu_device_fds=1 if tgid == 107 and seed % 2 else 0,
    )


def step(sample: ProcessSample | None, tgid: int, action: str, seed: int) -> ProcessSample | None:
    if sample is None:
        return first_sample(tgid, seed) if action in ("ran", "reused") else None
    if action == "keep":
        return sample  # the incremental scan hands the very object back
    if action == "ran":
        return attrs.evolve(sample, cpu_ticks=sample.cpu_ticks + 3, ctx_voluntary=sample.ctx_voluntary + 1)
    if action == "memory":
        return attrs.evolve(sample, rss_bytes=sample.rss_bytes + 4096)
    if action == "reused":
        return first_sample(tgid, seed + 1)
    if action == "backwards":
        return attrs.evolve(sample, cpu_ticks=max(sample.cpu_ticks - 1, 0), read_bytes=0)
    return None


def netns(tgids: list[int], opens: int) -> NetnsSample:
    """The one pod namespace of a trace: `opens` connections accepted so far."""
    return NetnsSample(
        inode=4026532000,
        tgids=tuple(tgids),
        passive_opens=opens,
        in_segs=3 * opens,
        listen_drops=0,
        rx_bytes=100 * opens,
        rx_packets=3 * opens,
        listen_backlog=0,
        unread_bytes=0,
    )


def polls_of(trace: list[tuple]) -> list[Poll]:
    """The polls of a drawn trace, each with the true `ProcessChanges` since the one before."""
    polls: list[Poll] = []
    table: dict[int, ProcessSample] = {}
    second = 0.0
    cpu_ns = 10_000_000_000
    opens = 0
    for seed, (actions, syscalls, ioctls, nvml, gap_s, recreated, *more) in enumerate(trace):
        unread, (in_netns, accepted) = more if more else (set(), (set(), 0))
        opens += accepted
        before = dict(table)
        for tgid, action in zip(TGIDS, actions, strict=True):
            moved = step(table.get(tgid), tgid, action, seed)
            if moved is None:
                table.pop(tgid, None)
            else:
                table[tgid] = moved
        second += gap_s
        cpu_ns = 0 if recreated else cpu_ns + 1_000_000
        processes = tuple(table[tgid] for tgid in sorted(table))
        at = Instant(unix_ms=1_700_000_000_000 + int(second * 1000), monotonic_ns=int(second * 1e9))
        changes = None
        if polls:
            changes = ProcessChanges(
                since_monotonic_ns=polls[-1].at.monotonic_ns,
                changed=frozenset(t for t, s in table.items() if before.get(t) is not s),
                gone=frozenset(before.keys() - table.keys()),
                by_tgid=dict(table),
            )
        polls.append(
            Poll(
                at=at,
                ticks_per_s=100,
                processes=processes,
                cgroups=tuple(cgroup(m, cpu_usage_ns=cpu_ns) for m in MEMBERSHIPS),
                kernel=KernelSample(
                    syscalls={tgid: {"read": 2, "futex": 1} for tgid in syscalls},
                    gpu_ioctls={
                        tgid: GpuIoctls(count=1, last_monotonic_ns=at.monotonic_ns) for tgid in ioctls
                    },
                ),
                gpu=GpuHolders(memory_bytes=dict.fromkeys(nvml, 1 << 30), available=True),
                unread=tuple(Unread(MEMBERSHIPS[i], 1, {"execve": 1}) for i in sorted(unread)),
                netns=(netns(sorted(t for t in in_netns if t in table), opens),)
                if in_netns & table.keys()
                else (),
                changes=changes,
            )
        )
    return polls


def replay(polls: list[Poll], hinted: bool, idle_every: int) -> list[tuple[tuple, CollectorState]]:
    settings_ = attrs.evolve(config(("kubepods",)), idle_every=idle_every)
    state = CollectorState()
    previous: Poll | None = None
    out = []
    for poll in polls:
        current = poll if hinted else attrs.evolve(poll, changes=None)
        got, state = rows(previous, current, state, settings_)
        out.append((got, state))
        previous = current
    return out


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(1, 4))
def test_rows_and_state_with_the_hint_are_those_of_the_full_pass(trace: list[tuple], idle_every: int) -> None:
    polls = polls_of(trace)
    assert replay(polls, hinted=True, idle_every=idle_every) == replay(
        polls, hinted=False, idle_every=idle_every
    )


def test_an_idle_watched_process_is_still_written_every_idle_every_polls_with_the_hint() -> None:
    """Nothing changes for 40 polls: the hinted core looks at nothing, yet writes the idle row on
    schedule (the due index), as the full pass does."""
    trace = [(["ran"] * len(TGIDS), set(), set(), set(), 2.0, False)]
    trace += [(["keep"] * len(TGIDS), set(), set(), set(), 2.0, False)] * 40
    polls = polls_of(trace)
    hinted = replay(polls, hinted=True, idle_every=15)
    assert hinted == replay(polls, hinted=False, idle_every=15)
    written_polls = [index for index, (got, _) in enumerate(hinted) if any(r.tgid == 102 for r in got)]
    assert written_polls == [1, 16, 31]


def test_a_hint_for_another_previous_poll_is_not_followed() -> None:
    """A hint relative to a poll the core did not see (a restart, a lost poll) would skip what
    changed since: it is ignored, and the full pass finds the change."""
    trace = [(["ran"] * len(TGIDS), set(), set(), set(), 2.0, False)]
    trace += [(["keep"] * len(TGIDS), set(), set(), set(), 2.0, False)] * 3
    polls = polls_of(trace)
    watched = polls[3].changes.by_tgid[102]
    busy = attrs.evolve(watched, cpu_ticks=watched.cpu_ticks + 50)
    now = {**polls[3].changes.by_tgid, busy.tgid: busy}
    # It says nothing changed, but relative to a poll of another time.
    lying = attrs.evolve(
        polls[3],
        processes=tuple(now[tgid] for tgid in sorted(now)),
        changes=attrs.evolve(polls[3].changes, since_monotonic_ns=1, by_tgid=now),
    )
    state, previous = CollectorState(), None
    for poll in polls[:3]:
        _, state = rows(previous, poll, state, config())
        previous = poll
    got, _ = rows(previous, lying, state, config())
    assert [row.tgid for row in got] == [busy.tgid]
    assert got[0].usage.cpu_cores == 0.25


def test_traces_keep_what_was_read_not_the_hint() -> None:
    polls = polls_of([(["ran"] * 3 + ["keep"] * 9, {100}, set(), set(), 2.0, False)] * 2)
    line = poll_to_json(polls[1])
    assert b"changes" not in line and b"by_tgid" not in line
    back = poll_from_json(line)
    assert back == polls[1] and back.changes is None


def test_a_container_s_short_lived_syscalls_find_a_carrier_when_none_of_its_processes_changed() -> None:
    """Every process of the watched cgroup is idle and not due, and short-lived processes of that
    cgroup made syscalls (`Poll.unread`), or its namespace accepted connections: the full pass
    writes one of its processes to carry them; so must the hinted core, which looked at none of
    them (found on the live node: the carrier needs its cgroup's rates, which only a looked-at
    process computed)."""
    keep = ["keep"] * len(TGIDS)
    trace = [(["ran"] * len(TGIDS), set(), set(), set(), 2.0, False)]
    trace += [(keep, set(), set(), set(), 2.0, False)] * 3
    trace += [(keep, set(), set(), set(), 2.0, False, {0}, (set(), 0))]  # unread in WATCHED
    trace += [(keep, set(), set(), set(), 2.0, False, set(), ({102, 105}, 0))]
    trace += [(keep, set(), set(), set(), 2.0, False, set(), ({102, 105}, 2))]  # accepted 2
    polls = polls_of(trace)
    hinted = replay(polls, hinted=True, idle_every=15)
    assert hinted == replay(polls, hinted=False, idle_every=15)
    carriers = [[row.tgid for row in got] for got, _ in hinted[4:]]
    assert carriers[0] and carriers[2], "a carrier row was written for the unread syscalls and the ingress"
