"""The shell's DRM wiring: a real process of this host, a GPU holder by its ioctls once, whose DRM
client (the kernel's documented amdgpu example, fixtures/drm/, in a /proc tree keyed by its real
pid) keeps it a holder in the polls after, when it makes no ioctl: LiveSource reads its clients
each poll and the core writes its rows with the GPU's memory and engine shares."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.helpers.fake_kernel import FakeKernel
from tests.helpers.snapshots import config

from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.clock import SystemClock
from croft.adapters.host.drm import DrmFdinfo
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.domain.collector.rows import CollectorState, rows
from croft.domain.dataset import GpuEngine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "drm"


def test_a_drm_client_keeps_its_process_a_holder_without_ioctls(tmp_path: Path) -> None:
    sample = tomllib.loads((FIXTURES / "amdgpu.toml").read_text())
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
        try:
            tree = tmp_path / "proc" / str(child.pid)
            (tree / "fd").mkdir(parents=True)
            (tree / "fdinfo").mkdir()
            (tree / "fd" / "7").symlink_to(sample["device"])

            def busy_ns(ns: int) -> None:
                text = sample["fdinfo"].replace(
                    "drm-engine-gfx:\t39456116802 ns", f"drm-engine-gfx:\t{ns} ns"
                )
                (tree / "fdinfo" / "7").write_text(text)

            kernel = FakeKernel()
            source = LiveSource(
                ProcFS(), CgroupFS(), kernel, UnavailableGpu(), watch=(), drm=DrmFdinfo(tmp_path / "proc")
            )
            clock, state, previous, written = SystemClock(), CollectorState(), None, []
            for poll_index, gfx_ns in enumerate((10**9, 10**9, 2 * 10**9, 2 * 10**9)):
                if poll_index == 0:
                    kernel.gpu_ioctl(child.pid, 3)  # its first ioctl makes it a holder
                busy_ns(gfx_ns)
                poll = source.poll(clock.now())
                assert child.pid in poll.drm
                got, state = rows(previous, poll, state, config(()))
                written.append(next((r for r in got if r.tgid == child.pid), None))
                previous = poll
                time.sleep(0.5)
        finally:
            child.kill()
    assert written[0] is None  # its first sighting: no rates yet
    assert [r.workload if r else None for r in written[1:]] == ["gpu-onset", "gpu-held", "gpu-held"]
    assert all(r is not None and r.ioctl_count == 0 for r in written[1:])
    first, second, third = (r.gpus[0] for r in written[1:] if r is not None and r.gpus)
    assert first.engines == (GpuEngine(name="gfx", busy_percent=0.0),)
    assert second.engines is not None and second.engines[0].busy_percent == 100.0  # 1 s busy in ~0.5 s
    assert third.engines == first.engines
    assert first.pci == "0000:04:00.0" and first.memory_bytes == 22 * (1 << 20) + 544428 * 1024
