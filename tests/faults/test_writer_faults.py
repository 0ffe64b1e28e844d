"""The dataset writer (croft run's sink) under file-system faults injected through the `Disk` port:
a short write, ENOSPC or EIO at every write, fsync and rename of a run with rotations and
compressions, one after the other. `append` never raises; the rows it counts as written are exactly
the rows on disk, once each; every file under a final name is whole; a next run on a sound disk
keeps them all."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard

from croft.adapters.dataset.lock import LOCK_NAME
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import Limits
from tests.helpers.dataset import LIVE, dataset_files, poll_lines, read_rows
from tests.helpers.faulty_disk import FAULTS, FaultyDisk

T0 = 1_792_505_950_000
ROWS = 5
LIMITS = Limits(rotate_secs=3600, rotate_bytes=6_000, retain_days=3650, retain_bytes=1 << 40)


def _run(directory: Path, disk: FaultyDisk, polls: int = 12, first: int = 0, t0: int = T0) -> list[int]:
    """`polls` polls through a writer on `disk`; the sequence numbers of the rows it kept."""
    writer = DatasetWriter(directory / LIVE, LIMITS, background=False, disk=disk)
    kept: list[int] = []
    for i in range(polls):
        before = writer.counters()
        seq = first + i * ROWS
        writer.append(poll_lines(seq, ROWS, t0 + 2000 * i), t0 + 2000 * i)  # never raises
        writer.compress_now()
        after = writer.counters()
        assert after.rows_written + after.rows_dropped == before.rows_written + before.rows_dropped + ROWS
        if after.rows_written > before.rows_written:
            kept.extend(range(seq, seq + ROWS))
    writer.close()
    assert writer.counters().rows_written == len(kept)
    return kept


def _whole(directory: Path) -> None:
    for path in dataset_files(directory):
        data = path.read_bytes()
        if path.name.endswith(".zst"):
            data = zstandard.ZstdDecompressor().decompress(data)  # a cut frame raises
        assert data == b"" or data.endswith(b"\n"), f"{path.name} ends in a torn line"


def _calls() -> int:
    counting = FaultyDisk()
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        _run(Path(where), counting)
    return len(counting.calls)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_every_call_loses_only_counted_rows_and_tears_nothing(tmp_path: Path, fault: str) -> None:
    calls = _calls()
    assert calls >= 20
    for at in range(calls):
        directory = tmp_path / f"{fault}-{at}"
        disk = FaultyDisk(at, fault)
        kept = _run(directory, disk)
        assert disk.fired
        _whole(directory)
        assert sorted(row.tgid for row in read_rows(directory)) == kept, (at, disk.calls)
        # The next run, on a sound disk, finishes what was left and loses nothing kept.
        later = _run(directory, FaultyDisk(), polls=4, first=10_000, t0=T0 + 10_000_000)
        _whole(directory)
        assert sorted(row.tgid for row in read_rows(directory)) == kept + later
        assert not any(p.name.startswith(".") and p.name != LOCK_NAME for p in directory.iterdir())
    print(f"{fault}: {calls} faults injected")
