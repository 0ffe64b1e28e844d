"""A hand-written KernelSource: counters that a test (or a simulated child) adds to, read and cleared
like croft's BPF maps, with the same bounded capacity and dropped-entry count."""

from __future__ import annotations

import threading
import time

from croft.domain.collector.kernel import GpuIoctls, KernelSample


class FakeKernel:
    """`capacity` bounds the distinct (tgid, syscall) pairs held between reads, as the BPF map's
    max_entries does; updates beyond it count as dropped entries."""

    def __init__(self, capacity: int = 65536) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._syscalls: dict[tuple[int, str], int] = {}
        self._ioctls: dict[int, GpuIoctls] = {}
        self._rx: dict[int, int] = {}
        self._tx: dict[int, int] = {}
        self._dropped = 0
        self.reads = 0

    def syscall(self, tgid: int, name: str, count: int = 1) -> None:
        with self._lock:
            key = (tgid, name)
            if key not in self._syscalls and len(self._syscalls) >= self._capacity:
                self._dropped += 1
                return
            self._syscalls[key] = self._syscalls.get(key, 0) + count

    def gpu_ioctl(self, tgid: int, count: int = 1) -> None:
        with self._lock:
            before = self._ioctls.get(tgid, GpuIoctls(count=0, last_monotonic_ns=0))
            self._ioctls[tgid] = GpuIoctls(count=before.count + count, last_monotonic_ns=time.monotonic_ns())

    def moved(self, tgid: int, rx_bytes: int = 0, tx_bytes: int = 0) -> None:
        with self._lock:
            if rx_bytes:
                self._rx[tgid] = self._rx.get(tgid, 0) + rx_bytes
            if tx_bytes:
                self._tx[tgid] = self._tx.get(tgid, 0) + tx_bytes

    def read(self) -> KernelSample:
        with self._lock:
            syscalls: dict[int, dict[str, int]] = {}
            for (tgid, name), count in self._syscalls.items():
                syscalls.setdefault(tgid, {})[name] = count
            sample = KernelSample(
                syscalls=syscalls,
                gpu_ioctls=dict(self._ioctls),
                net_rx_bytes=dict(self._rx),
                net_tx_bytes=dict(self._tx),
                dropped_entries=self._dropped,
            )
            self._syscalls, self._ioctls, self._rx, self._tx, self._dropped = {}, {}, {}, {}, 0
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
