"""croft collect's write side under file-system faults injected through the `Disk` port: a short
write, ENOSPC or EIO at every single write, fsync and rename of a copy, one after the other. After
each, nothing torn is under a final name, the failure is one sentence, and a second collect on a
sound disk ends with an exact copy. The copies come from a real collector server process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from croft.adapters.dataset.lock import LOCK_NAME
from croft.adapters.dataset.node_copy import LocalWriteError, NodeCopy
from tests.helpers.collect import collector, dataset_source, write_polls
from tests.helpers.dataset import LIVE
from tests.helpers.faulty_disk import FAULTS, FaultyDisk

START_MS = 1_792_505_950_000


def _copy(url: str, out: Path, disk: FaultyDisk) -> None:
    with dataset_source(url) as source:
        NodeCopy(source, out, disk=disk).run()


def _nothing_torn(node: Path, out: Path) -> None:
    """Every file under a final name is the node's file, or (the live copy) a whole-line prefix of it."""
    for path in out.iterdir():
        if path.name.startswith("."):
            continue  # a part file: hidden, continued by the next collect
        original = (node / path.name).read_bytes()
        local = path.read_bytes()
        if path.name == LIVE:
            assert original.startswith(local) and (local == b"" or local.endswith(b"\n")), path.name
        else:
            assert local == original, f"{path.name} is torn"


def _exact(node: Path, out: Path) -> None:
    served = sorted(p.name for p in node.iterdir() if p.name != LOCK_NAME)  # the writer's lock is not served
    assert sorted(p.name for p in out.iterdir()) == served
    for name in served:
        assert (out / name).read_bytes() == (node / name).read_bytes(), name


def _calls(url: str, out: Path) -> int:
    counting = FaultyDisk()
    _copy(url, out, counting)
    return len(counting.calls)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    directory = tmp_path / "node"
    directory.mkdir()
    seq = write_polls(directory, 0, 20, START_MS)
    seq = write_polls(directory, seq, 20, START_MS + 1_000_000)  # the first run's file is a segment
    write_polls(directory, seq, 200, START_MS + 2_000_000)  # a live file of several network reads
    return directory


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_every_call_of_a_first_copy_tears_nothing(node: Path, tmp_path: Path, fault: str) -> None:
    fired = 0
    with collector(node) as server:
        calls = _calls(server.url, tmp_path / "count")
        assert calls >= 6
        for at in range(calls + 2):  # the network splits bodies differently each time
            out = tmp_path / f"out-{fault}-{at}"
            disk = FaultyDisk(at, fault)
            try:
                _copy(server.url, out, disk)
                failed = False
            except LocalWriteError as exc:
                failed = True
                message = str(exc)
                assert message.startswith(f"cannot write {out}/") and "\n" not in message
            fired += disk.fired
            assert failed == disk.hurt, (at, disk.calls)
            _nothing_torn(node, out)
            _copy(server.url, out, FaultyDisk())
            _exact(node, out)
            shutil.rmtree(out)
    assert fired >= calls * 3 // 4  # (the network may split a body into fewer reads)
    print(f"{fault}: {fired} faults injected over {calls} calls")


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_every_call_of_a_live_continuation_tears_nothing(
    node: Path, tmp_path: Path, fault: str
) -> None:
    base = tmp_path / "base"
    fired = 0
    with collector(node) as server:
        _copy(server.url, base, FaultyDisk())
        with (node / LIVE).open("ab") as f:  # the collector's next polls
            f.write((node / LIVE).read_bytes()[:1_000_000].rsplit(b"\n", 1)[0] + b"\n")
        shutil.copytree(base, tmp_path / "count", copy_function=shutil.copy2)
        calls = _calls(server.url, tmp_path / "count")
        for at in range(calls + 2):
            out = tmp_path / f"out-{at}"
            shutil.copytree(base, out, copy_function=shutil.copy2)
            disk = FaultyDisk(at, fault)
            try:
                _copy(server.url, out, disk)
                failed = False
            except LocalWriteError:
                failed = True
            assert failed == disk.hurt, (at, disk.calls)
            fired += disk.fired
            _nothing_torn(node, out)
            _copy(server.url, out, FaultyDisk())
            _exact(node, out)
            shutil.rmtree(out)
    assert fired >= calls * 3 // 4
    print(f"{fault}: {fired} faults injected over {calls} calls of a continuation")
