"""The live poll: ask every source once, in one place, and return one `Poll` snapshot."""

from __future__ import annotations

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.kernel import GpuHolders, GpuHolderSource, KernelSample, KernelSource
from croft.domain.collector.selection import worth_reading
from croft.domain.collector.snapshot import CgroupMembership, Instant, Poll


class UnavailableKernel:
    """A `KernelSource` for hosts where eBPF cannot be loaded: every sample is empty."""

    def read(self) -> KernelSample:
        return KernelSample()


class UnavailableGpu:
    """A `GpuHolderSource` without NVML: nobody holds a GPU by NVML's account."""

    def read(self) -> GpuHolders:
        return GpuHolders(available=False)


class LiveSource:
    """Reads eBPF counters, GPU holders, procfs and cgroupfs for one poll. Only processes that are
    watched or touch a GPU are read in full (`croft.domain.collector.selection.worth_reading`)."""

    def __init__(
        self,
        procfs: ProcFS,
        cgroupfs: CgroupFS,
        kernel: KernelSource,
        gpu: GpuHolderSource,
        watch: tuple[str, ...],
    ) -> None:
        self._procfs = procfs
        self._cgroupfs = cgroupfs
        self._kernel = kernel
        self._gpu = gpu
        self._watch = watch

    def poll(self, at: Instant) -> Poll:
        """The snapshot of this poll, stamped `at` (read by the caller just before)."""
        kernel = self._kernel.read()
        gpu = self._gpu.read()
        gpu_tgids = set(kernel.gpu_ioctls) | set(gpu.memory_bytes)
        watch = self._watch

        verdicts: dict[CgroupMembership, bool] = {}

        def wanted(tgid: int, membership: CgroupMembership) -> bool:
            if tgid in gpu_tgids:
                return True
            verdict = verdicts.get(membership)
            if verdict is None:
                verdict = verdicts[membership] = worth_reading(tgid, membership, watch, gpu_tgids)
            return verdict

        processes, dropped = self._procfs.scan(wanted)
        cgroups = self._cgroupfs.read_all(p.cgroups for p in processes)
        return Poll(
            at=at,
            ticks_per_s=self._procfs.ticks_per_s,
            processes=processes,
            cgroups=cgroups,
            kernel=kernel,
            gpu=gpu,
            dropped=dropped,
        )
