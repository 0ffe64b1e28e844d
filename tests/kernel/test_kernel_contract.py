"""The KernelSource contract, one body run against the fake and against the real programs, loaded
by each loader (the CO-RE object through libbpf, and BCC): child processes make known syscalls, and
the counters for their tgids show them, once, since the previous read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from croft.domain.collector.kernel import GROUP_ORIGIN, KernelSample, KernelSelection, KernelSource
from tests.helpers.children import PAYLOAD_BYTES, Child, make_gpu_node
from tests.helpers.fake_kernel import FakeChild, FakeKernel
from tests.helpers.loaders import open_source, skip_unless_loadable

K = 5000
# What a child may add on its own: its read of the command and its write of `done`.
HANDFUL = 5


class AnyChild(Protocol):
    tgid: int

    def start(self, command: str) -> None: ...
    def wait(self) -> None: ...
    def do(self, command: str) -> None: ...
    def close(self) -> None: ...


class Harness(Protocol):
    source: KernelSource
    tgids: frozenset[int]

    def spawn(self, selected: bool = True) -> AnyChild: ...
    def with_capacity(self, syscall_pairs: int, overflow_pairs: int) -> KernelSource: ...


class Selecting:
    """Selects every child spawned with `selected` (by tgid) in every source opened."""

    def __init__(self) -> None:
        self.sources: list[KernelSource] = []
        self.tgids: frozenset[int] = frozenset()

    def opened(self, source: KernelSource) -> KernelSource:
        self.sources.append(source)
        source.select(KernelSelection(tgids=self.tgids))
        return source

    def selected(self, child: AnyChild, selected: bool) -> AnyChild:
        if selected:
            self.tgids = self.tgids | {child.tgid}
            for source in self.sources:
                source.select(KernelSelection(tgids=self.tgids))
        return child


class FakeHarness(Selecting):
    def __init__(self) -> None:
        super().__init__()
        self.kernels = [FakeKernel()]
        self.source: KernelSource = self.opened(self.kernels[0])

    def spawn(self, selected: bool = True) -> AnyChild:
        return self.selected(FakeChild(self.kernels, PAYLOAD_BYTES), selected)

    def with_capacity(self, syscall_pairs: int, overflow_pairs: int) -> KernelSource:
        self.kernels.append(FakeKernel(capacity=syscall_pairs, overflow=overflow_pairs))
        return self.opened(self.kernels[-1])


class RealHarness(Selecting):
    def __init__(self, loader: str, device: Path) -> None:
        super().__init__()
        self.loader = loader
        self.device = device
        self.source: KernelSource = self.opened(open_source(loader, gpu_devices=[str(device)]))

    def spawn(self, selected: bool = True) -> AnyChild:
        return self.selected(Child(device=str(self.device)), selected)

    def with_capacity(self, syscall_pairs: int, overflow_pairs: int) -> KernelSource:
        from croft.adapters.host.ebpf_programs import MapSizes

        sizes = MapSizes(syscalls=syscall_pairs, overflow=overflow_pairs)
        return self.opened(open_source(self.loader, gpu_devices=[str(self.device)], sizes=sizes))

    def close(self) -> None:
        for source in self.sources:
            source.close()  # type: ignore[attr-defined]


REAL = [pytest.mark.root, pytest.mark.bpf]


@pytest.fixture(
    scope="module",
    params=["fake", pytest.param("core", marks=REAL), pytest.param("bcc", marks=REAL)],
)
def harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    if request.param == "fake":
        yield FakeHarness()
        return
    skip_unless_loadable(request.param)
    real = RealHarness(request.param, make_gpu_node(tmp_path_factory.mktemp("gpu")))
    yield real
    real.close()


@pytest.fixture
def child(harness: Harness) -> Iterator[AnyChild]:
    spawned = harness.spawn()
    yield spawned
    spawned.close()


def syscalls_of(sample: KernelSample, tgid: int) -> dict[str, int]:
    return dict(sample.syscalls.get(tgid, {}))


def test_counts_are_those_since_the_previous_read(harness: Harness, child: AnyChild) -> None:
    harness.source.read()
    child.do(f"getppid {K}")
    child.do(f"sendto {K}")
    sample = harness.source.read()
    counts = syscalls_of(sample, child.tgid)
    assert K <= counts.get("getppid", 0) <= K + HANDFUL
    assert K <= counts.get("sendto", 0) <= K + HANDFUL
    assert K <= counts.get("recvfrom", 0) <= K + HANDFUL
    assert sample.net_tx_bytes.get(child.tgid, 0) == K * PAYLOAD_BYTES
    assert sample.net_rx_bytes.get(child.tgid, 0) == K * PAYLOAD_BYTES
    assert sample.dropped_entries == 0

    again = harness.source.read()
    assert syscalls_of(again, child.tgid).get("getppid", 0) == 0
    assert again.net_tx_bytes.get(child.tgid, 0) == 0


def test_each_process_is_counted_apart(harness: Harness, child: AnyChild) -> None:
    other = harness.spawn()
    try:
        harness.source.read()
        child.do(f"getppid {K}")
        other.do(f"getppid {2 * K}")
        sample = harness.source.read()
    finally:
        other.close()
    assert K <= syscalls_of(sample, child.tgid).get("getppid", 0) <= K + HANDFUL
    assert 2 * K <= syscalls_of(sample, other.tgid).get("getppid", 0) <= 2 * K + HANDFUL


def test_rate_over_a_poll_is_the_childs_rate(harness: Harness, child: AnyChild) -> None:
    rate_per_s, poll_s = 5000, 2.0
    child.start(f"rate {rate_per_s} 4")
    time.sleep(0.7)
    harness.source.read()
    start = time.monotonic()
    time.sleep(poll_s)
    sample = harness.source.read()
    elapsed = time.monotonic() - start
    child.wait()
    measured = syscalls_of(sample, child.tgid).get("getppid", 0) / elapsed
    assert measured == pytest.approx(rate_per_s, rel=0.03)


def test_gpu_ioctls_are_counted_on_gpu_devices_only_with_their_time(
    harness: Harness, child: AnyChild
) -> None:
    harness.source.read()
    before_ns = time.monotonic_ns()
    child.do(f"ioctl {K}")
    after_ns = time.monotonic_ns()
    sample = harness.source.read()
    ioctls = sample.gpu_ioctls.get(child.tgid)
    assert ioctls is not None
    assert ioctls.count == K  # the K on /dev/null are not GPU ioctls
    assert before_ns <= ioctls.last_monotonic_ns <= after_ns
    assert 2 * K <= syscalls_of(sample, child.tgid).get("ioctl", 0) <= 2 * K + HANDFUL
    assert child.tgid not in harness.source.read().gpu_ioctls


def test_a_full_map_spills_per_group_then_drops_updates_and_counts_them(
    harness: Harness, child: AnyChild
) -> None:
    capacity, overflow = 2, 1
    source = harness.with_capacity(capacity, overflow)
    source.read()
    child.do("getppid 10")
    child.do("sendto 10")
    sample = source.read()
    pairs = sum(len(names) for names in sample.syscalls.values())
    assert pairs <= capacity
    assert [len(names) for names in sample.spilled.values()] == [1]
    assert sample.spilled_entries == sum(sum(names.values()) for names in sample.spilled.values()) > 0
    assert sample.dropped_entries > 0
    (group,) = sample.spilled
    assert group == GROUP_ORIGIN | child.tgid  # selected by tgid: its own origin


def test_only_selected_processes_have_their_syscalls_counted(harness: Harness, child: AnyChild) -> None:
    other = harness.spawn(selected=False)
    try:
        harness.source.read()
        child.do(f"getppid {K}")
        other.do(f"getppid {K}")
        other.do(f"ioctl {K}")
        sample = harness.source.read()
    finally:
        other.close()
    assert K <= syscalls_of(sample, child.tgid).get("getppid", 0) <= K + HANDFUL
    assert other.tgid not in sample.syscalls
    assert sample.gpu_ioctls[other.tgid].count == K  # GPU holders are found by ioctls: all counted
    assert sample.groups[child.tgid] == GROUP_ORIGIN | child.tgid


@pytest.mark.root
@pytest.mark.bpf
def test_keys_are_host_tgids_for_a_process_in_its_own_pid_namespace(harness: Harness) -> None:
    if isinstance(harness, FakeHarness):
        pytest.skip("pid namespaces are the real kernel's")
    wrapped = Child(argv_prefix=("unshare", "--pid", "--fork"))
    try:
        unshare_pid = wrapped.process.pid
        children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
        host_tgid = int(children[0])
        # Child.tgid is unshare's pid here: select the host tgid of the Python inside.
        harness.source.select(KernelSelection(tgids=harness.tgids | {host_tgid}))
        harness.source.read()
        wrapped.do(f"getppid {K}")
        sample = harness.source.read()
    finally:
        wrapped.close()
    assert K <= syscalls_of(sample, host_tgid).get("getppid", 0) <= K + HANDFUL
    assert syscalls_of(sample, 1).get("getppid", 0) < K  # not keyed by its pid 1 in the namespace
