"""The live poll: ask every source once, in one place, and return one `Poll` snapshot."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from croft.adapters.host.cgroup_ids import subtree_paths, watched_roots
from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.netns import NetnsFS
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.kernel import (
    GROUP_ORIGIN,
    ActivitySource,
    GpuHolders,
    GpuHolderSource,
    KernelSample,
    KernelSelection,
    KernelSource,
)
from croft.domain.collector.selection import marked_by_tgid, worth_reading
from croft.domain.collector.snapshot import CgroupMembership, Instant, Poll, ProcessSample, Unread

log = logging.getLogger("croft.poll")


class UnavailableGpu:
    """A `GpuHolderSource` without NVML: nobody holds a GPU by NVML's account."""

    def read(self) -> GpuHolders:
        return GpuHolders(available=False)


class LiveSource:
    """Reads eBPF counters, GPU holders, procfs and cgroupfs for one poll. Only processes that are
    watched or touch a GPU are read in full (`croft.domain.collector.selection.worth_reading`).

    After each poll it tells the kernel what to count (`KernelSelection`): the cgroup-v2 cgroups the
    `watch` prefixes match (walked again every poll, so a new container is counted from the next
    one), and by tgid the GPU holders (by ioctls, NVML or open device files) and the watched
    processes a cgroup-v2 id does not cover. The
    counts of processes procfs did not read (exited, or spilled without a tgid) are handed on as
    `Poll.unread`, by the membership of the process when a previous poll read it, else of the
    group the kernel counted them in. With `netns`, the network namespaces of the processes read
    (`Poll.netns`, the offered-load signals). With `activity` (bpf/oncpu.c), procfs looks only at the
    processes that ran, moved or started since the previous poll (`ProcFS.scan`)."""

    def __init__(
        self,
        procfs: ProcFS,
        cgroupfs: CgroupFS,
        kernel: KernelSource,
        gpu: GpuHolderSource,
        watch: tuple[str, ...],
        netns: NetnsFS | None = None,
        activity: ActivitySource | None = None,
    ) -> None:
        self._procfs = procfs
        self._netns = netns
        self._cgroupfs = cgroupfs
        self._kernel = kernel
        self._gpu = gpu
        self._watch = watch
        self._activity = activity
        self._memberships: dict[int, CgroupMembership] = {}
        self._roots: dict[int, str] = {}
        self._cgroup_paths: dict[int, str] = {}
        self._gpu_before: frozenset[int] = frozenset()
        self.unattributed_total = 0
        self.select()

    def select(
        self, processes: tuple[ProcessSample, ...] = (), gpu_tgids: frozenset[int] = frozenset()
    ) -> None:
        """Tell the kernel what to count from now on."""
        mount = self._cgroupfs.unified
        if mount is not None and self._watch:
            self._roots = watched_roots(mount, self._watch)
        self._kernel.select(
            KernelSelection(
                cgroup_ids=frozenset(self._roots),
                tgids=marked_by_tgid(processes, self._watch, gpu_tgids, has_v2=mount is not None),
            )
        )

    def poll(self, at: Instant) -> Poll:
        """The snapshot of this poll, stamped `at` (read by the caller just before)."""
        kernel = self._kernel.read()
        gpu = self._gpu.read()
        gpu_tgids = set(kernel.gpu_ioctls) | set(gpu.memory_bytes)
        watch = self._watch

        verdicts: dict[int, bool] = {}  # by id(): procfs shares one membership object per cgroup

        def wanted(tgid: int, membership: CgroupMembership) -> bool:
            if tgid in gpu_tgids:
                return True
            verdict = verdicts.get(id(membership))
            if verdict is None:
                verdict = verdicts[id(membership)] = worth_reading(tgid, membership, watch, gpu_tgids)
            return verdict

        if self._activity is not None:
            # `wanted` changes its verdict only for GPU holders (a membership's stays): the scan
            # looks again at those of this poll and the last, and at what changed.
            recheck = gpu_tgids | self._gpu_before
            self._gpu_before = frozenset(gpu_tgids)
            processes, dropped = self._procfs.scan(wanted, self._activity.activity(), recheck)
        else:
            processes, dropped = self._procfs.scan(wanted)
        memberships = {p.tgid: p.cgroups for p in processes}
        unread = self._unread(kernel, memberships)
        self._memberships = memberships
        holders = gpu_tgids | {p.tgid for p in processes if p.gpu_device_fds}
        self.select(processes, frozenset(holders))
        cgroups = self._cgroupfs.read_all(p.cgroups for p in processes)
        netns = self._netns.read(processes) if self._netns is not None else ()
        return Poll(
            at=at,
            ticks_per_s=self._procfs.ticks_per_s,
            processes=processes,
            cgroups=cgroups,
            kernel=kernel,
            gpu=gpu,
            dropped=dropped,
            unread=unread,
            netns=netns,
        )

    def _unread(self, kernel: KernelSample, read: Mapping[int, CgroupMembership]) -> tuple[Unread, ...]:
        tgids: dict[CgroupMembership, int] = {}
        counts: dict[CgroupMembership, dict[str, int]] = {}
        lost = 0
        walked = False

        def membership_of_group(group: int | None) -> CgroupMembership | None:
            nonlocal walked
            if group is None:
                return None
            if group & GROUP_ORIGIN:
                origin = group & ~GROUP_ORIGIN
                return read.get(origin) or self._memberships.get(origin)
            path = self._cgroup_paths.get(group)
            if path is None and not walked and self._cgroupfs.unified is not None:
                walked = True
                self._cgroup_paths = subtree_paths(self._cgroupfs.unified, self._roots)
                path = self._cgroup_paths.get(group)
            return None if path is None else CgroupMembership(unified=path)

        def add(membership: CgroupMembership | None, syscalls: Mapping[str, int], processes: int) -> None:
            nonlocal lost
            if membership is None:
                lost += sum(syscalls.values())
                return
            tgids[membership] = tgids.get(membership, 0) + processes
            into = counts.setdefault(membership, {})
            for name, count in syscalls.items():
                into[name] = into.get(name, 0) + count

        for tgid, syscalls in kernel.syscalls.items():
            if tgid in read:
                continue
            add(self._memberships.get(tgid) or membership_of_group(kernel.groups.get(tgid)), syscalls, 1)
        for group, syscalls in kernel.spilled.items():
            add(membership_of_group(group), syscalls, 0)
        if lost:
            self.unattributed_total += lost
            log.warning("%d syscalls of processes that exited unread found no cgroup and were left out", lost)
        if kernel.dropped_entries or kernel.spilled_entries:
            log.warning(
                "this poll's eBPF maps were full: %d updates lost, %d syscall counts kept per cgroup only "
                "(croft_map_drops_total on /metrics counts the lost ones)",
                kernel.dropped_entries,
                kernel.spilled_entries,
            )
        return tuple(
            Unread(membership=m, processes=tgids[m], syscalls=counts[m])
            for m in sorted(counts, key=lambda m: (m.unified or "", m.controllers))
        )
