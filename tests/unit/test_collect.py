"""The core `rows(previous, current, state, config)`: which processes are written and with what."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.kernel import GpuHolders, GpuIoctls, KernelSample
from croft.domain.collector.rows import CollectorState, rows
from croft.domain.collector.selection import marked_by_tgid, matches, parse_watch, watched
from croft.domain.collector.snapshot import CgroupMembership, Poll
from croft.domain.dataset import CgroupUsage
from croft.domain.dataset.codec import decode_row, encode_row
from tests.helpers.snapshots import HOST, WATCHED, cgroup, config, poll, proc


def run(polls: list[Poll], watch: tuple[str, ...] = ("kubepods",)) -> list[tuple]:
    state = CollectorState()
    previous = None
    out = []
    for current in polls:
        got, state = rows(previous, current, state, config(watch))
        out.append(got)
        previous = current
    return out


def test_first_sighting_is_rated_from_the_next_poll() -> None:
    first, second = run([poll(0, (proc(cpu_ticks=0),)), poll(2, (proc(cpu_ticks=100),))])
    assert first == ()
    (row,) = second
    assert row.usage.cpu_cores == 0.5
    assert row.process.container_id == "ab" * 32
    assert row.process.cgroup == WATCHED.unified
    assert row.cgroup_usage.memory_bytes == 1 << 30
    assert row.unix_ms == 1_700_000_002_000


def test_reused_pid_skips_one_poll_then_starts_over() -> None:
    out = run(
        [
            poll(0, (proc(cpu_ticks=100),)),
            poll(2, (proc(cpu_ticks=200),)),
            poll(4, (proc(cpu_ticks=5, start_ticks=9999),)),
            poll(6, (proc(cpu_ticks=105, start_ticks=9999),)),
        ]
    )
    assert [len(r) for r in out] == [0, 1, 0, 1]
    assert out[3][0].usage.cpu_cores == 0.5


def test_counter_reset_skips_that_poll_without_a_negative_rate() -> None:
    out = run([poll(0, (proc(),)), poll(2, (proc(write_bytes=10),)), poll(4, (proc(write_bytes=2010),))])
    assert [len(r) for r in out] == [0, 0, 1]
    assert out[2][0].usage.write_bytes_s == 1000.0


def test_recreated_cgroup_skips_that_poll() -> None:
    out = run(
        [
            poll(0, (proc(),), (cgroup(cpu_usage_ns=10**12),)),
            poll(2, (proc(cpu_ticks=1100),), (cgroup(cpu_usage_ns=5),)),
            poll(4, (proc(cpu_ticks=1200),), (cgroup(cpu_usage_ns=10**9 + 5),)),
        ]
    )
    assert [len(r) for r in out] == [0, 0, 1]
    assert out[2][0].cgroup_usage.cpu_cores == 0.5


def test_idle_watched_process_is_written_once_every_15_polls() -> None:
    out = run([poll(2 * i, (proc(),)) for i in range(32)])
    written = [i for i, r in enumerate(out) if r]
    assert written == [1, 16, 31]


def test_busy_watched_process_is_written_every_poll() -> None:
    out = run([poll(2 * i, (proc(cpu_ticks=1000 + i),)) for i in range(6)])
    assert [len(r) for r in out] == [0, 1, 1, 1, 1, 1]


def test_syscalls_alone_make_a_process_busy() -> None:
    kernel = KernelSample(syscalls={100: {"futex": 30, "read": 30, "write": 4}})
    out = run([poll(2 * i, (proc(),), kernel=kernel) for i in range(4)])
    assert [len(r) for r in out] == [0, 1, 1, 1]
    assert [(s.name, s.rate_per_sec) for s in out[1][0].syscalls] == [
        ("futex", 15.0),
        ("read", 15.0),
        ("write", 2.0),
    ]


def test_without_watch_only_gpu_holders_are_written() -> None:
    gpu_proc = proc(tgid=7, cgroups=HOST)
    host_proc = proc(tgid=8, cgroups=HOST, cpu_ticks=0)
    polls = []
    for i in range(4):
        kernel = KernelSample(gpu_ioctls={7: GpuIoctls(count=3 if i < 2 else 0, last_monotonic_ns=2 * 10**9)})
        polls.append(poll(2 * i, (gpu_proc, attrs.evolve(host_proc, cpu_ticks=i)), kernel=kernel))
    out = run(polls, watch=())
    assert [[(r.tgid, r.workload) for r in got] for got in out] == [[], [(7, "gpu-onset")], [], []]
    assert out[1][0].ioctl_count == 3
    assert out[1][0].since_last_gpu_ioctl_ms == 0
    assert out[1][0].process.container_id is None
    assert out[1][0].process.cwd == "/srv/project"


def test_gpu_states_and_fields_for_a_watched_process() -> None:
    polls = []
    for i in range(5):
        kernel = KernelSample(
            gpu_ioctls={100: GpuIoctls(count=2, last_monotonic_ns=2 * i * 10**9)} if 1 <= i <= 2 else {}
        )
        polls.append(poll(2 * i, (proc(cpu_ticks=1000 + i),), kernel=kernel))
    out = run(polls)
    assert [(r[0].workload, r[0].ioctl_count, r[0].since_last_gpu_ioctl_ms) for r in out[1:]] == [
        ("gpu-onset", 2, 0),
        ("gpu-held", 2, 0),
        ("no-gpu", 0, 2000),
        ("no-gpu", 0, 4000),
    ]


def test_nvml_holder_and_device_fds_count_as_holding() -> None:
    out = run(
        [
            poll(0, (proc(gpu_device_fds=1),)),
            poll(2, (proc(gpu_device_fds=1),), gpu=GpuHolders({100: 1 << 30}, True)),
        ],
        watch=(),
    )
    assert out[1][0].workload == "gpu-onset"


def test_host_process_gets_framework_from_libraries_and_never_gpu_fields() -> None:
    sample = proc(libraries=("libc.so.6", "libtorch_cpu.so"))
    (row,) = run([poll(0, (sample,)), poll(2, (attrs.evolve(sample, cpu_ticks=1100),))])[1]
    assert row.process.framework == "pytorch"
    assert row.ioctl_count is None and row.since_last_gpu_ioctl_ms is None
    assert b"ioctl_count" not in encode_row(row)
    assert decode_row(encode_row(row)) == row


def test_network_bytes_are_per_second_over_the_real_interval() -> None:
    kernel = KernelSample(net_rx_bytes={100: 3000}, net_tx_bytes={100: 300})
    out = run([poll(0, (proc(),)), poll(3, (proc(cpu_ticks=1001),), kernel=kernel)])
    assert (out[1][0].usage.network_rx_bytes_s, out[1][0].usage.network_tx_bytes_s) == (1000.0, 100.0)


def test_state_counts_what_it_skipped() -> None:
    state = CollectorState()
    first = poll(0, (proc(tgid=1), proc(tgid=2)))
    _, state = rows(None, attrs.evolve(first, dropped=3), state, config())
    assert (state.polls, state.no_rate, state.dropped) == (1, 2, 3)


def test_watch_prefixes() -> None:
    assert parse_watch(" kubepods, /system.slice/docker ,,") == ("kubepods", "system.slice/docker")
    docker = attrs.evolve(HOST, unified="/system.slice/docker-abc.scope")
    assert watched(docker, ("system.slice/docker",))
    assert not watched(HOST, ("system.slice/docker",))
    assert not watched(docker, ())


# Memberships as procfs gives them (one object per cgroup, shared by its processes): watched or not
# by their v2 path, by a v1 path only (a hybrid host), or without a v2 path.
MEMBERSHIPS = [
    WATCHED,
    HOST,
    CgroupMembership(unified="/user.slice", controllers=(("cpu", "/kubepods/pod1/c1"),)),
    CgroupMembership(unified=None, controllers=(("memory", "/kubepods/pod2/c2"),)),
    CgroupMembership(unified=None, controllers=(("memory", "/system.slice"),)),
]


@given(
    st.lists(st.tuples(st.integers(1, 60), st.sampled_from(MEMBERSHIPS)), max_size=20),
    st.sets(st.integers(1, 60), max_size=4),
    st.booleans(),
)
def test_the_kernel_counts_by_tgid_gpu_holders_and_the_watched_a_v2_path_does_not_make_watched(
    members: list[tuple[int, CgroupMembership]], gpu_tgids: set[int], has_v2: bool
) -> None:
    processes = [proc(tgid, cgroups=membership) for tgid, membership in members]
    prefixes = ("kubepods",)
    expected = set(gpu_tgids) | {
        p.tgid
        for p in processes
        if watched(p.cgroups, prefixes)
        and not (has_v2 and p.cgroups.unified is not None and matches(p.cgroups.unified, prefixes))
    }
    assert marked_by_tgid(processes, prefixes, gpu_tgids, has_v2) == expected


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.integers(1, 5_000)), min_size=2, max_size=12
    )
)
def test_rows_are_never_negative_over_random_counter_walks(walk: list[tuple[int, int, int]]) -> None:
    polls = []
    second = 0.0
    for ticks, start, gap_ms in walk:
        second += gap_ms / 1000
        polls.append(poll(second, (proc(cpu_ticks=ticks, start_ticks=start),)))
    for got in run(polls):
        for row in got:
            assert row.usage.cpu_cores >= 0 and row.cgroup_usage.cpu_cores >= 0


def test_a_figure_croft_could_not_read_is_left_out_of_the_row_never_written_0() -> None:
    """A v2 cgroup on a hybrid host offers CPU usage and PSI, no memory and no CFS counters; the
    process's /proc/<pid>/io is unreadable and the socket tracepoints are missing."""
    hybrid_v2 = cgroup(WATCHED, memory_bytes=None, oom_kills=None, nr_periods=None, nr_throttled=None)
    no_io = {"read_bytes": None, "write_bytes": None}
    kernel = KernelSample(counts_network=False)
    later = attrs.evolve(hybrid_v2, cpu_usage_ns=11 * 10**9)
    out = run(
        [
            poll(0, (proc(**no_io),), cgroups=(hybrid_v2,), kernel=kernel),
            poll(2, (proc(cpu_ticks=1100, **no_io),), cgroups=(later,), kernel=kernel),
        ]
    )
    (row,) = out[1]
    usage = row.cgroup_usage
    assert (usage.memory_bytes, usage.oom_kills, usage.cpu_throttled_fraction) == (None, None, None)
    assert (usage.cpu_cores, usage.cpu_pressure_avg10) == (0.5, 1.5)
    assert (row.usage.read_bytes_s, row.usage.write_bytes_s) == (None, None)
    assert (row.usage.network_rx_bytes_s, row.usage.network_tx_bytes_s) == (None, None)
    assert row.usage.runqueue_s is not None
    line = encode_row(row)
    for key in (b'"memory_bytes"', b'"oom_kills"', b'"cpu_throttled_fraction"', b'"read_bytes_s"'):
        assert key not in line
    assert decode_row(line.rstrip(b"\n")) == row


def test_a_cgroup_cgroupfs_said_nothing_about_gives_a_row_with_no_cgroup_figures() -> None:
    out = run([poll(0, (proc(),), cgroups=()), poll(2, (proc(cpu_ticks=1100),), cgroups=())])
    (row,) = out[1]
    assert row.cgroup_usage == CgroupUsage()
    assert b'"cgroup_usage":{}' in encode_row(row)


def test_rows_of_collectors_that_wrote_0_stay_readable_as_0() -> None:
    (row,) = run([poll(0, (proc(),)), poll(2, (proc(cpu_ticks=1100),))])[1]
    # a line with a 0 where a figure was not offered is what collectors before wrote
    line = encode_row(row).replace(b'"memory_bytes":1073741824', b'"memory_bytes":0')
    assert decode_row(line.rstrip(b"\n")).cgroup_usage.memory_bytes == 0
    nulled = encode_row(row).replace(b'"memory_bytes":1073741824', b'"memory_bytes":null')
    assert decode_row(nulled.rstrip(b"\n")).cgroup_usage.memory_bytes is None
