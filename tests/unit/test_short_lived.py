"""Syscalls of processes without a row of their own are folded into their container's rate: one
row per container carries them as `short_lived` (croft.domain.collector.rows)."""

from __future__ import annotations

import attrs
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector import rows as collect
from croft.domain.collector.kernel import KernelSample
from croft.domain.collector.snapshot import CgroupMembership, Poll, Unread
from croft.domain.dataset.codec import decode_row, encode_row
from croft.domain.dataset.row import Row, ShortLived, SyscallRate
from croft.domain.metrics.series import groups_of
from tests.helpers.snapshots import HOST, WATCHED, config, poll, proc

CONFIG = config()
CHILD_OF_WATCHED = CgroupMembership(unified=WATCHED.unified + "/sub")


def two_polls(third: Poll) -> tuple[tuple[Row, ...], collect.CollectorState]:
    """`third`'s rows after two polls in which 100 (watched) and 101 (host) did nothing; 100's idle
    row was written at the second, so it is not due at the third."""
    first = poll(0.0, (proc(100), proc(101, cgroups=HOST)))
    second = poll(2.0, (proc(100), proc(101, cgroups=HOST)))
    _, state = collect.rows(None, first, collect.CollectorState(), CONFIG)
    rows, state = collect.rows(first, second, state, CONFIG)
    assert [row.tgid for row in rows] == [100]
    return collect.rows(second, third, state, CONFIG)


def test_first_sightings_and_exited_processes_ride_on_one_row_of_their_container() -> None:
    kernel = KernelSample(
        syscalls={100: {"wait4": 10}, 200: {"execve": 2, "getppid": 40}, 300: {"getppid": 99}},
    )
    unread = (
        Unread(membership=WATCHED, processes=3, syscalls={"execve": 6, "exit_group": 6}),
        Unread(membership=HOST, processes=1, syscalls={"getppid": 5}),  # not watched: left out
    )
    second = attrs.evolve(
        poll(4.0, (proc(100, cpu_ticks=1100), proc(101, cgroups=HOST), proc(200), proc(300, cgroups=HOST))),
        kernel=kernel,
        unread=unread,
    )
    rows, state = two_polls(second)
    assert [row.tgid for row in rows] == [100]
    (row,) = rows
    assert row.syscalls == (SyscallRate(name="wait4", rate_per_sec=5.0),)
    assert row.short_lived == ShortLived(
        processes=4,  # 200, first seen, and three that exited unread
        syscalls=(
            SyscallRate(name="getppid", rate_per_sec=20.0),
            SyscallRate(name="execve", rate_per_sec=4.0),
            SyscallRate(name="exit_group", rate_per_sec=3.0),
        ),
    )
    assert state.short_lived_unplaced == 0
    (group,) = groups_of(rows).values()
    assert dict(group.syscalls) == {"getppid": 20.0, "wait4": 5.0, "execve": 4.0, "exit_group": 3.0}


def test_an_idle_container_gets_a_row_written_to_carry_them() -> None:
    second = attrs.evolve(
        poll(4.0, (proc(100), proc(101, cgroups=HOST))),  # 100 unchanged: idle, not due
        unread=(Unread(membership=CHILD_OF_WATCHED, processes=2, syscalls={"execve": 4}),),
    )
    rows, state = two_polls(second)
    (row,) = rows
    assert row.tgid == 100 and row.syscalls == ()
    assert row.usage.cpu_cores == 0.0  # its own, measured, rates
    assert row.short_lived == ShortLived(
        processes=2, syscalls=(SyscallRate(name="execve", rate_per_sec=2.0),)
    )
    assert state.processes[100].last_written_poll == 2


def test_a_container_with_no_rated_process_counts_them_unplaced() -> None:
    other = CgroupMembership(unified="/kubepods/besteffort/pod99/" + "cd" * 32)
    second = attrs.evolve(
        poll(4.0, (proc(100), proc(101, cgroups=HOST))),
        unread=(Unread(membership=other, processes=1, syscalls={"execve": 3, "getppid": 4}),),
    )
    rows, state = two_polls(second)
    assert rows == ()
    assert state.short_lived_unplaced == 7


@given(
    st.lists(
        st.tuples(st.sampled_from(["read", "write", "execve", "getppid"]), st.integers(1, 10_000)),
        min_size=1,
        max_size=8,
    ),
    st.integers(0, 5),
)
def test_the_containers_rate_is_the_sum_over_everything_it_ran(
    calls: list[tuple[str, int]], exited: int
) -> None:
    """Whatever splits the counts between a rated process, a first sighting and unread processes,
    /metrics' rate per syscall is the total count over the interval."""
    own, new, gone = calls[0::3], calls[1::3], calls[2::3]

    def counts(pairs: list[tuple[str, int]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, count in pairs:
            out[name] = out.get(name, 0) + count
        return out

    second = attrs.evolve(
        poll(4.0, (proc(100, cpu_ticks=1100), proc(101, cgroups=HOST), proc(200))),
        kernel=KernelSample(syscalls={100: counts(own), 200: counts(new)}),
        unread=(Unread(membership=WATCHED, processes=exited, syscalls=counts(gone)),) if gone else (),
    )
    rows, state = two_polls(second)
    (group,) = groups_of(rows).values()
    total = counts(calls)
    assert dict(group.syscalls) == {name: count / 2.0 for name, count in total.items()}
    assert state.short_lived_unplaced == 0


def test_short_lived_is_an_optional_key_after_syscalls() -> None:
    rows, _ = two_polls(
        attrs.evolve(
            poll(4.0, (proc(100, cpu_ticks=1100), proc(101, cgroups=HOST))),
            unread=(Unread(membership=WATCHED, processes=1, syscalls={"execve": 1}),),
        )
    )
    line = encode_row(rows[0])
    keys = list(msgspec.json.decode(line))
    assert keys[keys.index("syscalls") + 1] == "short_lived"
    assert msgspec.json.decode(line)["short_lived"] == {
        "processes": 1,
        "syscalls": [{"name": "execve", "rate_per_sec": 0.5}],
    }
    assert decode_row(line) == rows[0]
    plain = msgspec.structs.replace(rows[0], short_lived=None)
    assert b"short_lived" not in encode_row(plain)
    assert decode_row(encode_row(plain)) == plain
