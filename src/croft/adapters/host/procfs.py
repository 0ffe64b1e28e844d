"""procfs: what the kernel says about each process, read from a root path (`/proc` on the host, a
fixture tree in tests) and parsed by `croft.domain.collector.procparse`.

Per pid and poll croft reads `stat` (every pid: it carries the start time that tells a reused pid)
and, for the processes worth reading, `status`, `io` and `schedstat`. What does not change for a
pid + start time is cached: cgroup membership, and for the processes worth reading exe, cwd and
cmdline (never read for the others: see `_Static`), are re-read every `refresh_every` polls (a
process can be moved between cgroups or chdir); the mapped libraries are
re-read when the virtual size changed, at most every `maps_every` polls. A single-threaded process
whose `stat` and `schedstat` are byte for byte what they were is known not to have run since the
last poll (schedstat counts every time slice it got), so its previous sample is returned as it was,
without reading `status` and `io` again.

Given the kernel's `Activity` (bpf/oncpu.c: which tgids ran or were forked, which pids were moved to
another cgroup since the previous poll), a process known from an earlier poll that did neither is
not read at all: its previous sample is returned as it was. Everything procfs says of it can only
change by it running (counters, threads, exe, cwd, cmdline, GPU files) or by a move (cgroups), but
its memory: the kernel can reclaim or swap out pages of a sleeping process. So every such process
that is returned is still checked once every `verify_every` polls (by pid, spread evenly over the
polls): its `stat` is read, and the process read in full when that changed. When the kernel also
reports the processes started and reaped, /proc is listed only once every `verify_every` polls;
between listings the list is kept from those reports (a reaped pid is reported a moment after its
/proc entry goes, so a process can be listed one poll after it was reaped, its last sample
unchanged). A pid that exits
between listing and reading, or whose file is torn, is dropped for that poll and counted, never an error.

With `recheck` as well, a poll costs what changed, not what is there (10,000 idle processes): the
samples returned last poll are kept by pid, and only the processes that ran, moved, started, are
due for their check, were dropped last poll or are in `recheck` are looked at; every other process
keeps its place (returned or not) and its sample. Such a scan says what it changed (`ProcFS.delta`),
so that the poll after it can follow that too. The caller promises that `wanted` gives the same
verdict as the previous poll for every process that did not change, but those in `recheck`.

Paths are plain strings joined by hand: this runs for thousands of pids every 2 s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import attrs

from croft.domain.collector.cgroupns import host_membership
from croft.domain.collector.kernel import Activity
from croft.domain.collector.procparse import (
    Stat,
    Unparsable,
    parse_cgroup_membership,
    parse_cmdline,
    parse_io,
    parse_maps_libraries,
    parse_schedstat,
    parse_stat,
    parse_status_ctxt,
)
from croft.domain.collector.snapshot import CgroupMembership, ProcessSample

Wanted = Callable[[int, CgroupMembership], bool]

_GONE = (FileNotFoundError, ProcessLookupError)


class _Read:
    """The marker `ProcFS._kept` returns for a process that must be read."""


_READ = _Read()


def read_bytes(path: str) -> bytes:
    """The whole content of a pseudo-file, without trusting its stat size. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 65536)
        if len(data) < 65536:
            return data
        chunks = [data]
        while data:
            data = os.read(fd, 1 << 20)
            chunks.append(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _readlink(path: str) -> str:
    """The target of a /proc symlink, or '' for a kernel thread or a link we may not read."""
    try:
        return os.readlink(path)  # noqa: PTH115 - str paths on the hot path
    except _GONE:
        return ""
    except PermissionError:
        return ""


@attrs.frozen
class _Static:
    """What does not change for a pid and start time. The names (exe, cwd, cmdline) are read only
    for a process that is returned (None until then): reading another process's cmdline takes its
    memory map's lock, which a process being forked or exec'd holds, so on a node busy forking
    the poll would wait on every new process it does not even watch."""

    start_ticks: int
    read_at_poll: int
    cgroups: CgroupMembership
    exe: str | None = None
    cwd: str | None = None
    cmdline: tuple[str, ...] | None = None


@attrs.frozen
class _Maps:
    start_ticks: int
    vsize_bytes: int
    read_at_poll: int
    libraries: tuple[str, ...]


@attrs.frozen
class ScanDelta:
    """What an incremental scan changed in what the scan before it returned: the pids whose sample
    is another object (new ones too), the pids no longer returned, and the samples returned now by
    pid (a copy)."""

    changed: frozenset[int]
    gone: frozenset[int]
    by_tgid: Mapping[int, ProcessSample]


class ProcFS:
    """The process side of a poll. `gpu_device_prefixes` (e.g. `/dev/nvidia`) turns on the scan of
    every process's open files for GPU devices; leave it empty on hosts without such devices.
    `cgroup_namespace_root` is the host path of the collector's cgroup namespace root
    (`croft.adapters.host.cgroupns`), joined onto every v2 path read; None in the host's namespace."""

    def __init__(
        self,
        root: Path = Path("/proc"),
        *,
        gpu_device_prefixes: tuple[str, ...] = (),
        refresh_every: int = 15,
        maps_every: int = 5,
        verify_every: int = 15,
        cgroup_namespace_root: str | None = None,
    ) -> None:
        self._root = str(root)
        self._namespace_root = cgroup_namespace_root
        self._gpu_prefixes = gpu_device_prefixes
        self._refresh_every = refresh_every
        self._maps_every = maps_every
        self._verify_every = verify_every
        self._page_size = os.sysconf("SC_PAGE_SIZE")
        self._static: dict[int, _Static] = {}
        self._maps: dict[int, _Maps] = {}
        self._unchanged: dict[int, tuple[bytes, Stat, bytes, ProcessSample | None]] = {}
        self._memberships: dict[bytes, CgroupMembership] = {}
        self._known: set[int] = set()
        self._poll = 0
        # The incremental scan's (see the module docstring): the samples returned last poll, by
        # ascending pid; the known pids by `pid % verify_every` (whose check is due in which poll);
        # the pids dropped last poll (read again).
        self._returned: dict[int, ProcessSample] | None = None
        self._due: list[set[int]] = []
        self._retry: set[int] = set()
        self.delta: ScanDelta | None = None

    @property
    def ticks_per_s(self) -> int:
        """Clock ticks per second of `stat`'s utime/stime/starttime (USER_HZ)."""
        return os.sysconf("SC_CLK_TCK")

    def pids(self) -> list[int]:
        """The process ids listed now, ascending."""
        return sorted(int(name) for name in os.listdir(self._root) if name.isdigit())  # noqa: PTH208

    def scan(
        self, wanted: Wanted, activity: Activity | None = None, recheck: Collection[int] | None = None
    ) -> tuple[tuple[ProcessSample, ...], int]:
        """Samples of the processes `wanted(tgid, membership)` selects (or that hold a GPU device
        open), ascending by pid, and how many pids were dropped because they vanished or were torn
        mid-read. With `activity`, processes that neither ran nor moved are not read; with `recheck`
        too, only what changed is looked at (see the module docstring)."""
        self._poll += 1
        self.delta = None
        if recheck is None:
            self._returned = None
        elif activity is not None and self._returned is not None:
            return self._scan_changed(wanted, activity, recheck)
        samples, dropped = self._scan_all(wanted, activity)
        if recheck is not None:
            self._returned = {sample.tgid: sample for sample in samples}
            self._due = [set() for _ in range(self._verify_every)]
            for pid in self._known:
                self._due[pid % self._verify_every].add(pid)
            self._retry = set()
        return samples, dropped

    def _scan_all(self, wanted: Wanted, activity: Activity | None) -> tuple[tuple[ProcessSample, ...], int]:
        """Every listed pid looked at (read, or with `activity` its previous sample kept)."""
        samples: list[ProcessSample] = []
        dropped = 0
        listed = self._listed(activity)
        # Read whatever ran, moved or started (a reused pid is both reaped and started).
        touched = None if activity is None else activity.ran | activity.moved | activity.started
        moved: frozenset[int] = frozenset() if activity is None else activity.moved
        unchanged, poll, verify_every = self._unchanged, self._poll, self._verify_every
        for pid in listed:
            if touched is not None and pid not in touched:
                known = unchanged.get(pid)
                if known is not None and (pid + poll) % verify_every and known[3] is not None:
                    # The common case, inlined (10,000 idle processes a poll): `_kept` of a process
                    # read in full before and not due for its check.
                    last = known[3]
                    if last.gpu_device_fds or wanted(pid, last.cgroups):
                        samples.append(last)
                    continue
                kept = self._kept(pid, wanted)
                if not isinstance(kept, _Read):
                    if kept is not None:
                        samples.append(kept)
                    continue
            try:
                sample = self._sample(pid, wanted, pid in moved)
            except (Unparsable, *_GONE):
                dropped += 1
                continue
            if sample is not None:
                samples.append(sample)
        self._forget_all_but(listed)
        return tuple(samples), dropped

    def _listed(self, activity: Activity | None) -> list[int]:
        """The pids of this poll: /proc listed, or (with an `activity` that tracks pids, between the
        listings every `verify_every` polls) the previous ones without the freed, with the started
        and with any that ran and was unknown, each checked to exist."""
        if (
            activity is None
            or not activity.tracks_pids
            or not self._known
            or self._poll % self._verify_every == 0
        ):
            listed = self.pids()
            self._known = set(listed)
            return listed
        known = self._known
        known.difference_update(activity.freed)
        for pid in activity.started | activity.ran:
            if pid not in known and os.path.isdir(f"{self._root}/{pid}"):  # noqa: PTH112
                known.add(pid)
        return sorted(known)

    def _forget_all_but(self, listed: list[int]) -> None:
        if len(self._static) > len(listed):
            gone = self._static.keys() - set(listed)
            for pid in gone:
                self._forget(pid)

    def _forget(self, pid: int) -> None:
        self._static.pop(pid, None)
        self._maps.pop(pid, None)
        self._unchanged.pop(pid, None)

    def _scan_changed(
        self, wanted: Wanted, activity: Activity, recheck: Collection[int]
    ) -> tuple[tuple[ProcessSample, ...], int]:
        """The incremental scan: the previous poll's samples, with what changed looked at again."""
        returned = self._returned
        assert returned is not None
        known, due, every = self._known, self._due, self._verify_every
        if not activity.tracks_pids or self._poll % every == 0:
            listed = {int(name) for name in os.listdir(self._root) if name.isdigit()}  # noqa: PTH208
            gone = known - listed
            new = listed - known
        else:
            gone = known.intersection(activity.freed)
            new = {
                pid
                for pid in activity.started | activity.ran
                if (pid not in known or pid in gone) and os.path.isdir(f"{self._root}/{pid}")  # noqa: PTH112
            }
        left: list[int] = []  # pids returned last poll and taken out
        for pid in gone:
            known.discard(pid)
            due[pid % every].discard(pid)
            if returned.pop(pid, None) is not None:
                left.append(pid)
            self._forget(pid)
        for pid in new:
            known.add(pid)
            due[pid % every].add(pid)
        # Read: what ran, moved or started (a reused pid too), new pids, last poll's dropped ones.
        read = ((activity.ran | activity.moved | activity.started | self._retry) & known) | new
        # Looked at without a read unless needed: those due for their check, and `recheck`.
        look = (due[-self._poll % every] | known.intersection(recheck)) - read
        retry: set[int] = set()
        changed: set[int] = set()
        unsorted = False
        last_pid = next(reversed(returned), -1)
        moved = activity.moved
        for pid in sorted(read | look):
            if pid in read:
                kept: ProcessSample | _Read | None = _READ
            else:
                kept = self._kept(pid, wanted)
            if isinstance(kept, _Read):
                try:
                    kept = self._sample(pid, wanted, pid in moved)
                except (Unparsable, *_GONE):
                    retry.add(pid)
                    if returned.pop(pid, None) is not None:
                        left.append(pid)
                    self._unchanged.pop(pid, None)
                    continue
            if kept is None:
                if returned.pop(pid, None) is not None:
                    left.append(pid)
                continue
            was = returned.get(pid)
            if was is None:
                if pid < last_pid:
                    unsorted = True
                last_pid = max(last_pid, pid)
            if was is not kept:
                changed.add(pid)
                returned[pid] = kept
        if unsorted:
            self._returned = returned = dict(sorted(returned.items()))
        self._retry = retry
        self.delta = ScanDelta(
            changed=frozenset(changed),
            gone=frozenset(pid for pid in left if pid not in returned),
            by_tgid=dict(returned),
        )
        return tuple(returned.values()), len(retry)

    def _kept(self, pid: int, wanted: Wanted) -> ProcessSample | _Read | None:
        """For a process that did not run or move: what the previous poll found, or `_READ` when it
        must be read (first seen, newly worth reading, or due for its check and its `stat` changed:
        memory reclaimed while it slept)."""
        known = self._unchanged.get(pid)
        if known is None:
            return _READ
        sample = known[3]
        static = self._static[pid]
        if sample is None:  # not returned: what its memory does matters to no one
            return None if not wanted(pid, static.cgroups) else _READ
        if (pid + self._poll) % self._verify_every == 0 and not self._same_memory(pid, known[0]):
            return _READ
        if sample.gpu_device_fds == 0 and not wanted(pid, static.cgroups):
            return None
        return sample

    def _same_memory(self, pid: int, stat_bytes: bytes) -> bool:
        """Whether a process that did not run still has the `stat` of its last read (its memory is
        what can change while it sleeps). A file that is gone or torn says no: the read then drops
        and counts it. (Not `statm`: its resident pages are the exact sum of the per-CPU counters,
        `stat`'s their cheap approximate, so the two differ.)"""
        try:
            return read_bytes(f"{self._root}/{pid}/stat") == stat_bytes
        except _GONE:
            return False

    def _sample(self, pid: int, wanted: Wanted, moved: bool = False) -> ProcessSample | None:
        base = f"{self._root}/{pid}/"
        stat_bytes = read_bytes(base + "stat")
        last = self._unchanged.get(pid)
        stat = last[1] if last is not None and last[0] == stat_bytes else parse_stat(stat_bytes)
        static = self._static.get(pid)
        if (
            static is None
            or moved
            or static.start_ticks != stat.start_ticks
            or self._poll - static.read_at_poll >= self._refresh_every
        ):
            static = _Static(
                start_ticks=stat.start_ticks,
                read_at_poll=self._poll,
                cgroups=self._membership(read_bytes(base + "cgroup")),
            )
            self._static[pid] = static
        device_fds = self._gpu_fds(base) if self._gpu_prefixes else 0
        if device_fds == 0 and not wanted(pid, static.cgroups):
            self._unchanged[pid] = (stat_bytes, stat, b"", None)
            return None
        exe, cwd, cmdline = static.exe, static.cwd, static.cmdline
        if exe is None or cwd is None or cmdline is None:
            exe, cwd = _readlink(base + "exe"), _readlink(base + "cwd")
            cmdline = parse_cmdline(read_bytes(base + "cmdline"))
            static = attrs.evolve(static, exe=exe, cwd=cwd, cmdline=cmdline)
            self._static[pid] = static
        try:
            schedstat_bytes = read_bytes(base + "schedstat")
            runqueue: int | None = parse_schedstat(schedstat_bytes)
        except FileNotFoundError:
            schedstat_bytes, runqueue = b"", None  # kernel without CONFIG_SCHED_INFO
            if not os.path.isdir(base):  # noqa: PTH112 - or the pid is gone
                raise
        if last is not None and stat.threads == 1 and schedstat_bytes:
            _, _, last_schedstat, last_sample = last
            if (
                last_sample is not None
                and last[0] == stat_bytes
                and last_schedstat == schedstat_bytes
                and last_sample.cgroups is static.cgroups
                and last_sample.exe is exe
                and last_sample.cwd is cwd
                and last_sample.gpu_device_fds == device_fds
            ):
                return last_sample
        voluntary, involuntary = parse_status_ctxt(read_bytes(base + "status"))
        read: int | None
        written: int | None
        try:
            read, written = parse_io(read_bytes(base + "io"))
        except PermissionError:
            read = written = None
        sample = ProcessSample(
            tgid=pid,
            comm=stat.comm,
            exe=exe,
            cwd=cwd,
            cmdline=cmdline,
            cgroups=static.cgroups,
            start_ticks=stat.start_ticks,
            cpu_ticks=stat.cpu_ticks,
            rss_bytes=stat.rss_pages * self._page_size,
            threads=stat.threads,
            ctx_voluntary=voluntary,
            ctx_involuntary=involuntary,
            read_bytes=read,
            write_bytes=written,
            runqueue_ns=runqueue,
            libraries=self._libraries(pid, base, stat.start_ticks, stat.vsize_bytes),
            gpu_device_fds=device_fds,
        )
        self._unchanged[pid] = (stat_bytes, stat, schedstat_bytes, sample)
        return sample

    def _membership(self, data: bytes) -> CgroupMembership:
        """The parsed /proc/<pid>/cgroup with host paths, one shared object per distinct content, so
        processes of one cgroup share it and lookups by it are cheap."""
        membership = self._memberships.get(data)
        if membership is None:
            if len(self._memberships) > 100_000:
                self._memberships.clear()
            membership = host_membership(parse_cgroup_membership(data), self._namespace_root)
            self._memberships[data] = membership
        return membership

    def _libraries(self, pid: int, base: str, start_ticks: int, vsize_bytes: int) -> tuple[str, ...]:
        cached = self._maps.get(pid)
        if (
            cached is not None
            and cached.start_ticks == start_ticks
            and (cached.vsize_bytes == vsize_bytes or self._poll - cached.read_at_poll < self._maps_every)
        ):
            return cached.libraries
        try:
            libraries = parse_maps_libraries(read_bytes(base + "maps"))
        except PermissionError:
            libraries = ()
        self._maps[pid] = _Maps(start_ticks, vsize_bytes, self._poll, libraries)
        return libraries

    def _gpu_fds(self, base: str) -> int:
        fd_dir = base + "fd"
        try:
            names = os.listdir(fd_dir)  # noqa: PTH208
        except PermissionError:
            return 0
        count = 0
        for name in names:
            target = _readlink(f"{fd_dir}/{name}")
            if target.startswith(self._gpu_prefixes):
                count += 1
        return count
