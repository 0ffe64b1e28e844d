"""A busy node, for real (root, eBPF): fork bursts inside and outside a watched cgroup, and
short-lived processes, through the live poll; counts against syscount-bpfcc over the same window.

syscount-bpfcc here cannot filter by cgroup (no --cgroupmap) and its -c reads task_struct through
headers of another kernel version, so it traces the whole host and the comparison is on what only
the watched children do: `getppid` (nothing else on the host calls it thousands of times a second)
and syscall numbers past the kernel's table (ENOSYS) that only they use.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.ebpf_programs import MapSizes
from croft.adapters.host.ebpf_source import EbpfKernelSource
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.app.bootstrap import Settings, collector_config
from croft.domain.collector import rows as collect
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset.row import ShortLived
from croft.domain.metrics.series import MetricsMemory, groups_of, series
from tests.helpers.burst import Spawner, Syscount, counts_of, run_polls, scratch_cgroup
from tests.helpers.loaders import open_source
from tests.helpers.snapshots import HEALTH

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

WATCHED_NR, NOISE_NR, V1_NR = 2000, 1000, 2500
GETPPIDS, DISTINCT = 2000, 40


@pytest.fixture
def kernel(loader: str) -> Iterator[EbpfKernelSource]:
    if shutil.which("syscount-bpfcc") is None:
        pytest.fail("syscount-bpfcc is missing: run scripts/setup-bpf.sh as root (installs bpfcc-tools)")
    with open_source(loader) as loaded:
        yield loaded


@pytest.fixture
def unified() -> Path:
    mount = CgroupFS().unified
    if mount is None:
        pytest.skip("no cgroup2 hierarchy on this host")
    return Path(mount)


def own_numbers(counts: dict[str, int], first: int, syscount: bool = False) -> int:
    names = (f"[unknown: {first + i}]" if syscount else f"syscall_{first + i}" for i in range(DISTINCT))
    return sum(counts.get(name, 0) for name in names)


def test_a_fork_burst_elsewhere_costs_the_watched_cgroup_nothing(
    kernel: EbpfKernelSource, unified: Path
) -> None:
    """600 children touching 150 syscall numbers each in an unwatched cgroup (90,000 (tgid, nr)
    pairs, more than the map holds), then 300 in the watched one: before the kernel filter this lost
    a third of the watched children's counts (the busy-node note)."""
    tag = f"croft-test-burst-{os.getpid()}"
    with (
        scratch_cgroup(unified, f"{tag}-watched") as watched,
        scratch_cgroup(unified, f"{tag}-noise") as noise,
    ):
        source = LiveSource(ProcFS(), CgroupFS(), kernel, UnavailableGpu(), (watched.name,))
        inside = Spawner((watched,), getppids=GETPPIDS, distinct=DISTINCT, first_nr=WATCHED_NR)
        outside = Spawner((noise,), getppids=0, distinct=150, first_nr=NOISE_NR)
        syscount = Syscount()
        children: list[int] = []
        try:

            def burst() -> None:
                outside.start_burst(600)
                inside.start_burst(300)

            def release() -> None:
                inside.start_release()
                outside.start_release()

            # Nothing in the poll loop waits for the spawners: a gap is croft's own.
            records = run_polls(source, 7, {1: burst, 4: release})
            children.extend(inside.burst_pids())
            outside.burst_pids()
            inside.released()
            outside.released()
            records += run_polls(source, 1, {})
            theirs = syscount.stop()
        finally:
            syscount.close()
            inside.close()
            outside.close()
    for k, record in enumerate(records):
        print(
            f"poll {k}: took {record.took_s:.2f} s, gap {record.gap_s:.2f} s, "
            f"dropped {record.poll.kernel.dropped_entries}, spilled {record.poll.kernel.spilled_entries}, "
            f"tgids {len(record.poll.kernel.syscalls)}, load {record.load:.2f}"
        )
    ours = counts_of(records, children)
    print(f"getppid croft {ours.get('getppid')} syscount {theirs.get('getppid')}")
    assert len(children) == 300
    assert sum(r.poll.kernel.dropped_entries for r in records) == 0
    assert sum(r.poll.kernel.spilled_entries for r in records) == 0
    assert max(r.gap_s for r in records) <= 3.0
    assert ours["getppid"] == 300 * GETPPIDS
    # syscount counts the whole machine: every getppid of ours, and any other process's besides
    # (on a loaded machine, hundreds of thousands), so it bounds ours from above
    assert theirs["getppid"] >= ours["getppid"] * 0.99
    assert own_numbers(ours, WATCHED_NR) == own_numbers(theirs, WATCHED_NR, syscount=True) == 300 * DISTINCT
    assert (
        own_numbers(counts_of(records, [t for r in records for t in r.poll.kernel.syscalls]), NOISE_NR) == 0
    )


def test_a_process_watched_through_cgroup_v1_is_counted_with_every_child_it_forks(
    kernel: EbpfKernelSource,
) -> None:
    """A hybrid host: the watch prefix matches the spawner's v1 `pids` path, not its v2 path, so it
    is counted by tgid; its children are marked as they fork (task:task_newtask), before procfs
    could ever see them."""
    controller = Path("/sys/fs/cgroup/pids")
    if not (controller / "cgroup.procs").exists():
        pytest.skip("no cgroup-v1 pids hierarchy on this host")
    with scratch_cgroup(controller, f"croft-test-v1-{os.getpid()}") as v1:
        source = LiveSource(ProcFS(), CgroupFS(), kernel, UnavailableGpu(), (v1.name,))
        spawner = Spawner((v1,), getppids=GETPPIDS, distinct=DISTINCT, first_nr=V1_NR)
        children: list[int] = []
        try:
            records = run_polls(
                source,
                4,
                {0: lambda: spawner.start_burst(50), 1: lambda: children.extend(spawner.burst_pids())},
            )
            spawner.release()
            records += run_polls(source, 1, {})
        finally:
            spawner.close()
    ours = counts_of(records, children)
    assert ours.get("getppid", 0) == 50 * GETPPIDS
    assert own_numbers(ours, V1_NR) == 50 * DISTINCT
    assert sum(r.poll.kernel.dropped_entries for r in records) == 0


SHORT_NR, PER_S, SECONDS = 3000, 50, 6


def test_a_container_running_50_short_lived_processes_a_second_is_rated_for_all_of_them(
    kernel: EbpfKernelSource, unified: Path, tmp_path: Path
) -> None:
    """Each child lives a few milliseconds (far less than a poll): no row of its own, yet every
    syscall it made is in its container's rate, in a row's `short_lived` summary and on /metrics."""
    name = f"croft-test-short-{os.getpid()}"
    config = collector_config(Settings(dataset=tmp_path / "d.jsonl", watch=name))
    with scratch_cgroup(unified, name) as cgroup:
        source = LiveSource(ProcFS(), CgroupFS(), kernel, UnavailableGpu(), (cgroup.name,))
        spawner = Spawner((cgroup,), getppids=300, distinct=10, first_nr=SHORT_NR)
        syscount = Syscount()
        try:
            records = run_polls(source, 5, {0: lambda: spawner.start_rate(PER_S, SECONDS)})
            spawned = spawner.wait_rate()
            records += run_polls(source, 2, {})
            theirs = syscount.stop()
        finally:
            syscount.close()
            spawner.close()
    previous: Poll | None = None
    state = collect.CollectorState()
    metrics: dict[str, float] = {}  # syscall -> calls, from /metrics' rates times each poll's interval
    summaries: list[ShortLived] = []
    rows_alone = 0.0  # what the rows' own syscalls say: all there was before short_lived
    for record in records:
        rows, state = collect.rows(previous, record.poll, state, config)
        if previous is not None:
            interval_s = (record.poll.at.monotonic_ns - previous.at.monotonic_ns) / 1e9
            groups = groups_of(rows)
            assert set(groups) <= {("", f"/{name}")}
            for group in groups.values():
                for syscall, rate in group.syscalls:
                    metrics[syscall] = metrics.get(syscall, 0.0) + rate * interval_s
            summaries += [row.short_lived for row in rows if row.short_lived is not None]
            own = sum(c.rate_per_sec for r in rows for c in r.syscalls if c.name == "getppid")
            rows_alone += own * interval_s
        previous = record.poll
    print(f"\nspawned {spawned}; summaries {[s.processes for s in summaries]}")
    print(
        f"getppid: /metrics {metrics.get('getppid', 0.0):.0f} syscount {theirs.get('getppid')} "
        f"rows alone {rows_alone:.0f}"
    )
    assert spawned == PER_S * SECONDS
    assert sum(s.processes for s in summaries) >= spawned
    assert state.short_lived_unplaced == 0
    assert metrics["getppid"] == pytest.approx(spawned * 300, rel=0.02)
    assert theirs["getppid"] >= metrics["getppid"] * 0.98  # the whole machine's: ours and others'
    for k in range(10):
        ours = metrics.get(f"syscall_{SHORT_NR + k}", 0.0)
        assert ours == pytest.approx(theirs[f"[unknown: {SHORT_NR + k}]"], rel=0.02)
        assert ours == pytest.approx(spawned, rel=0.02)


def test_when_the_maps_are_full_the_container_keeps_its_counts_and_the_loss_is_logged_and_counted(
    loader: str, unified: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Maps far too small for a burst: what the per-process map cannot hold goes to the per-cgroup
    overflow (in the container's rate through `short_lived`), what neither holds is a drop, logged
    with its poll and added to croft_map_drops_total."""
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    name = f"croft-test-full-{os.getpid()}"
    with (
        open_source(loader, sizes=MapSizes(syscalls=64, overflow=8)) as small,
        scratch_cgroup(unified, name) as cgroup,
    ):
        source = LiveSource(ProcFS(), CgroupFS(), small, UnavailableGpu(), (cgroup.name,))
        spawner = Spawner((cgroup,), getppids=100, distinct=20, first_nr=SHORT_NR)
        try:
            with caplog.at_level(logging.WARNING, "croft.poll"):
                records = run_polls(source, 3, {0: lambda: spawner.start_burst(20)})
            spawner.burst_pids()
            spawner.release()
        finally:
            spawner.close()
    full = [r.poll for r in records if r.poll.kernel.dropped_entries]
    assert full, "the burst overflowed nothing"
    for poll in full:
        print(f"\nspilled {poll.kernel.spilled_entries} dropped {poll.kernel.dropped_entries}")
        assert f"{poll.kernel.dropped_entries} updates lost" in caplog.text
    assert sum(r.poll.kernel.spilled_entries for r in records) > 0
    assert any(u.processes == 0 and u.syscalls for r in records for u in r.poll.unread)  # the spilled
    memory = MetricsMemory()
    for record in records:
        _, memory = series(record.poll, (), HEALTH, memory)
    assert memory.map_drops_total == sum(r.poll.kernel.dropped_entries for r in records) > 0
