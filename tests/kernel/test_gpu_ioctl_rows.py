"""The GPU ioctl path without a GPU, down to rows: a test character device configured as a GPU
device, a child issuing ioctls on it, croft's real eBPF source, procfs and collector core. Its rows
go gpu-onset, then gpu-held, with this poll's ioctl_count, and since_last_gpu_ioctl_ms grows once
the child stops issuing ioctls (it keeps the device open and keeps busy)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.clock import SystemClock
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.app.bootstrap import Settings, collector_config
from croft.domain.collector import rows as collect
from croft.domain.collector.snapshot import Poll
from croft.domain.dataset.row import Row
from tests.helpers.children import Child, make_gpu_node
from tests.helpers.loaders import open_source

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]


class Collector:
    """The live poll and the core, as croft run chains them, without the loop or the sink."""

    def __init__(self, source: LiveSource, tmp_path: Path) -> None:
        self._source = source
        self._config = collector_config(Settings(dataset=tmp_path / "unused.jsonl"))
        self._clock = SystemClock()
        self._previous: Poll | None = None
        self._state = collect.CollectorState()

    def poll(self, tgid: int) -> Row | None:
        poll = self._source.poll(self._clock.now())
        rows, self._state = collect.rows(self._previous, poll, self._state, self._config)
        self._previous = poll
        return next((row for row in rows if row.tgid == tgid), None)


@pytest.fixture
def device(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs and mknod need root")
    yield make_gpu_node(tmp_path)


def test_rows_follow_the_childs_gpu_ioctls(loader: str, device: Path, tmp_path: Path) -> None:
    with open_source(loader, gpu_devices=[str(device)]) as kernel:
        source = LiveSource(
            ProcFS(gpu_device_prefixes=(str(device),)), CgroupFS(), kernel, UnavailableGpu(), watch=()
        )
        collector = Collector(source, tmp_path)
        child = Child(device=str(device))
        try:
            collector.poll(child.tgid)  # its first sighting: no rates yet
            rows: list[Row | None] = []
            for count in (300, 200):
                child.do(f"ioctl {count}")
                time.sleep(0.5)
                rows.append(collector.poll(child.tgid))
            child.start("rate 1000 3.2")  # busy, device still open, no more ioctls
            for _ in range(3):
                time.sleep(1.0)
                rows.append(collector.poll(child.tgid))
            child.wait()
        finally:
            child.close()
    assert all(row is not None for row in rows), rows
    written = [row for row in rows if row is not None]
    print([(row.workload, row.ioctl_count, row.since_last_gpu_ioctl_ms) for row in written])
    assert [row.workload for row in written] == ["gpu-onset", "gpu-held", "gpu-held", "gpu-held", "gpu-held"]
    assert [row.ioctl_count for row in written] == [300, 200, 0, 0, 0]
    since = [row.since_last_gpu_ioctl_ms for row in written]
    assert all(ms is not None for ms in since)
    assert since[0] is not None and since[0] < 1000
    stopped = [ms for ms in since[2:] if ms is not None]
    assert stopped == sorted(stopped)
    assert stopped[-1] - stopped[0] >= 1500  # two polls a second apart each
