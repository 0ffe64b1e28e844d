"""The live poll: ask every source once, in one place, and return one `Poll` snapshot."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from croft.adapters.host.cgroup_ids import subtree_paths, watched_roots
from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.drm import DrmFdinfo
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
from croft.domain.collector.snapshot import (
    CgroupMembership,
    Instant,
    Poll,
    ProcessChanges,
    ProcessSample,
    Unread,
)

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
    processes that ran, moved or started since the previous poll (`ProcFS.scan`). With `drm`, the
    DRM clients (`Poll.drm`) of the poll's GPU holders and of the processes that held any the poll
    before (a process whose GPU work runs on while it makes no ioctl)."""

    def __init__(
        self,
        procfs: ProcFS,
        cgroupfs: CgroupFS,
        kernel: KernelSource,
        gpu: GpuHolderSource,
        watch: tuple[str, ...],
        netns: NetnsFS | None = None,
        activity: ActivitySource | None = None,
        drm: DrmFdinfo | None = None,
    ) -> None:
        self._procfs = procfs
        self._netns = netns
        self._cgroupfs = cgroupfs
        self._kernel = kernel
        self._gpu = gpu
        self._watch = watch
        self._activity = activity
        self._drm = drm
        self._drm_before: frozenset[int] = frozenset()
        self._samples: Mapping[int, ProcessSample] = {}  # the previous poll's processes by tgid
        # The distinct memberships of the previous poll's processes, by id(), with how many hold each.
        self._held: dict[int, tuple[CgroupMembership, int]] = {}
        self._last_poll_ns: int | None = None  # the previous poll's time, when it was returned
        self._roots: dict[int, str] = {}
        self._cgroup_paths: dict[int, str] = {}
        self._gpu_before: frozenset[int] = frozenset()
        self.unattributed_total = 0
        self.select()

    def select(
        self,
        processes: tuple[ProcessSample, ...] = (),
        gpu_tgids: frozenset[int] = frozenset(),
        memberships: Collection[CgroupMembership] | None = None,
    ) -> None:
        """Tell the kernel what to count from now on (`memberships`: those of `processes`, when known)."""
        mount = self._cgroupfs.unified
        if mount is not None and self._watch:
            self._roots = watched_roots(mount, self._watch)
        self._kernel.select(
            KernelSelection(
                cgroup_ids=frozenset(self._roots),
                tgids=marked_by_tgid(
                    processes, self._watch, gpu_tgids, has_v2=mount is not None, memberships=memberships
                ),
            )
        )

    def poll(self, at: Instant) -> Poll:
        """The snapshot of this poll, stamped `at` (read by the caller just before)."""
        kernel = self._kernel.read()
        gpu = self._gpu.read()
        # The holders of DRM clients last poll stay holders while they keep them (the poll's own
        # are read after procfs): an AMD or Intel process whose work runs on without an ioctl.
        gpu_tgids = set(kernel.gpu_ioctls) | set(gpu.memory_bytes) | self._drm_before
        watch = self._watch

        verdicts: dict[int, bool] = {}  # by id(): procfs shares one membership object per cgroup

        def wanted(tgid: int, membership: CgroupMembership) -> bool:
            if tgid in gpu_tgids:
                return True
            verdict = verdicts.get(id(membership))
            if verdict is None:
                verdict = verdicts[id(membership)] = worth_reading(tgid, membership, watch, gpu_tgids)
            return verdict

        since_ns, self._last_poll_ns = self._last_poll_ns, None  # set again once this poll is made
        if self._activity is not None:
            # `wanted` changes its verdict only for GPU holders (a membership's stays): the scan
            # looks again at those of this poll and the last, and at what changed.
            recheck = gpu_tgids | self._gpu_before
            self._gpu_before = frozenset(gpu_tgids)
            processes, dropped = self._procfs.scan(wanted, self._activity.activity(), recheck)
        else:
            processes, dropped = self._procfs.scan(wanted)
        delta = self._procfs.delta
        changes = None
        if delta is not None and since_ns is not None:
            changes = ProcessChanges(since_ns, delta.changed, delta.gone, delta.by_tgid)
        by_tgid = changes.by_tgid if changes is not None else {p.tgid: p for p in processes}
        unread = self._unread(kernel, by_tgid)
        memberships = self._hold(processes, changes)
        self._samples = by_tgid
        holders = gpu_tgids | {p.tgid for p in processes if p.gpu_device_fds}
        self.select(processes, frozenset(holders), memberships)
        cgroups = self._cgroupfs.read_all(memberships)
        netns = self._netns.read(processes, changes) if self._netns is not None else ()
        drm = self._drm.read(holders | self._drm_before) if self._drm is not None else {}
        self._drm_before = frozenset(drm)
        poll = Poll(
            at=at,
            ticks_per_s=self._procfs.ticks_per_s,
            processes=processes,
            cgroups=cgroups,
            kernel=kernel,
            gpu=gpu,
            dropped=dropped,
            unread=unread,
            netns=netns,
            drm=drm,
            changes=changes,
        )
        self._last_poll_ns = at.monotonic_ns
        return poll

    def _hold(
        self, processes: tuple[ProcessSample, ...], changes: ProcessChanges | None
    ) -> list[CgroupMembership]:
        """The distinct memberships of `processes` (by object: procfs shares one per cgroup), kept
        with a count of their processes and moved by `changes` when known, so an unchanged poll
        does not walk every process."""
        held = self._held
        if changes is None:
            held.clear()
            for process in processes:
                key = id(process.cgroups)
                entry = held.get(key)
                held[key] = (process.cgroups, 1 if entry is None else entry[1] + 1)
        else:

            def move(membership: CgroupMembership, by: int) -> None:
                key = id(membership)
                entry = held.get(key)
                count = by if entry is None else entry[1] + by
                if count:
                    held[key] = (membership, count)
                else:
                    del held[key]

            before, now = self._samples, changes.by_tgid
            for tgid in changes.gone:
                move(before[tgid].cgroups, -1)
            for tgid in changes.changed:
                was = before.get(tgid)
                if was is not None:
                    move(was.cgroups, -1)
                move(now[tgid].cgroups, 1)
        return [membership for membership, _ in held.values()]

    def _unread(self, kernel: KernelSample, read: Mapping[int, ProcessSample]) -> tuple[Unread, ...]:
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
                sample = read.get(origin) or self._samples.get(origin)
                return None if sample is None else sample.cgroups
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
            last = self._samples.get(tgid)
            add(
                last.cgroups if last is not None else membership_of_group(kernel.groups.get(tgid)),
                syscalls,
                1,
            )
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
