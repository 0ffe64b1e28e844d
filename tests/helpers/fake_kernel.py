"""A hand-written KernelSource: counters that a test (or a simulated child) adds to, read and cleared
like croft's BPF maps, with the same bounded capacity and dropped-entry count."""

from __future__ import annotations

import threading
import time

from croft.domain.collector.kernel import GROUP_ORIGIN, GpuIoctls, KernelSample, KernelSelection


class FakeKernel:
    """`capacity` bounds the distinct (tgid, syscall) pairs held between reads, as the BPF map's
    max_entries does; an update beyond it goes to the per-group overflow (`overflow` pairs), and
    beyond that counts as a dropped entry. Syscalls and socket bytes are counted for the tgids of
    the last `select()` only (every tgid before the first call, for the simulations); each is its
    own origin (the fake has no cgroups and no forks); ioctls for every tgid."""

    def __init__(self, capacity: int = 65536, overflow: int = 8192) -> None:
        self._capacity = capacity
        self._overflow_capacity = overflow
        self._selected: frozenset[int] | None = None
        self._lock = threading.Lock()
        self._overflow: dict[tuple[int, str], int] = {}
        self._spilled = 0
        self._syscalls: dict[tuple[int, str], int] = {}
        self._ioctls: dict[int, GpuIoctls] = {}
        self._rx: dict[int, int] = {}
        self._tx: dict[int, int] = {}
        self._dropped = 0
        self.reads = 0

    def select(self, selection: KernelSelection) -> None:
        with self._lock:
            self._selected = selection.tgids

    def _counted(self, tgid: int) -> bool:
        return self._selected is None or tgid in self._selected

    def syscall(self, tgid: int, name: str, count: int = 1) -> None:
        with self._lock:
            if not self._counted(tgid):
                return
            key = (tgid, name)
            if key not in self._syscalls and len(self._syscalls) >= self._capacity:
                spill = (GROUP_ORIGIN | tgid, name)
                if spill not in self._overflow and len(self._overflow) >= self._overflow_capacity:
                    self._dropped += count
                    return
                self._overflow[spill] = self._overflow.get(spill, 0) + count
                self._spilled += count
                return
            self._syscalls[key] = self._syscalls.get(key, 0) + count

    def gpu_ioctl(self, tgid: int, count: int = 1) -> None:
        with self._lock:
            before = self._ioctls.get(tgid, GpuIoctls(count=0, last_monotonic_ns=0))
            self._ioctls[tgid] = GpuIoctls(count=before.count + count, last_monotonic_ns=time.monotonic_ns())

    def moved(self, tgid: int, rx_bytes: int = 0, tx_bytes: int = 0) -> None:
        with self._lock:
            if not self._counted(tgid):
                return
            if rx_bytes:
                self._rx[tgid] = self._rx.get(tgid, 0) + rx_bytes
            if tx_bytes:
                self._tx[tgid] = self._tx.get(tgid, 0) + tx_bytes

    def read(self) -> KernelSample:
        with self._lock:
            syscalls: dict[int, dict[str, int]] = {}
            for (tgid, name), count in self._syscalls.items():
                syscalls.setdefault(tgid, {})[name] = count
            spilled: dict[int, dict[str, int]] = {}
            for (group, name), count in self._overflow.items():
                spilled.setdefault(group, {})[name] = count
            sample = KernelSample(
                syscalls=syscalls,
                gpu_ioctls=dict(self._ioctls),
                net_rx_bytes=dict(self._rx),
                net_tx_bytes=dict(self._tx),
                dropped_entries=self._dropped,
                groups={tgid: GROUP_ORIGIN | tgid for tgid in syscalls},
                spilled=spilled,
                spilled_entries=self._spilled,
            )
            self._syscalls, self._ioctls, self._rx, self._tx, self._dropped = {}, {}, {}, {}, 0
            self._overflow, self._spilled = {}, 0
            self.reads += 1
            return sample


class FakeChild:
    """The simulated twin of tests.helpers.children.Child: each command lands in the fake kernel as
    the real child's syscalls land in the BPF maps (plus its read of stdin and write of `done`)."""

    _next_tgid = 900_000

    def __init__(self, kernels: list[FakeKernel], payload_bytes: int) -> None:
        FakeChild._next_tgid += 1
        self.tgid = FakeChild._next_tgid
        self._kernels = kernels  # every fake loaded: each sees every syscall, as BPF programs do
        self._payload = payload_bytes
        self._running: threading.Thread | None = None

    def start(self, command: str) -> None:
        self._running = threading.Thread(target=self._carry_out, args=(command,))
        self._running.start()

    def wait(self) -> None:
        assert self._running is not None
        self._running.join()

    def do(self, command: str) -> None:
        self.start(command)
        self.wait()

    def close(self) -> None:
        pass

    def _carry_out(self, command: str) -> None:
        for kernel in self._kernels:
            self._land(kernel, command)

    def _land(self, kernel: FakeKernel, command: str) -> None:
        name, *args = command.split()
        tgid = self.tgid
        kernel.syscall(tgid, "read")
        if name == "getppid":
            kernel.syscall(tgid, "getppid", int(args[0]))
        elif name == "sendto":
            kernel.syscall(tgid, "sendto", int(args[0]))
            kernel.syscall(tgid, "recvfrom", int(args[0]))
            kernel.moved(tgid, rx_bytes=int(args[0]) * self._payload, tx_bytes=int(args[0]) * self._payload)
        elif name == "ioctl":
            kernel.syscall(tgid, "ioctl", 2 * int(args[0]))
            kernel.gpu_ioctl(tgid, int(args[0]))
        elif name == "rate":
            rate, seconds = int(args[0]), float(args[1])
            start = time.monotonic()
            for chunk in range(int(seconds * 200)):
                kernel.syscall(tgid, "getppid", rate // 200)
                time.sleep(max(0.0, start + (chunk + 1) / 200 - time.monotonic()))
        kernel.syscall(tgid, "write")
