"""The dataset writer on real files: appending, rotation, compression, retention, recovery, errors."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import zstandard

from croft.adapters.dataset.lock import LOCK_NAME
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.codec import decode_row
from croft.domain.dataset.rotation import Limits, Naming, SegmentName
from croft.domain.dataset.row import Row
from croft.domain.utc import parse_stamp
from croft.errors import UserError
from tests.helpers.dataset import LIVE, dataset_files, file_lines, poll_lines, read_rows

T0 = parse_stamp("20261020T130000Z") or 0
NAMING = Naming.for_live(LIVE)
SMALL = Limits(rotate_secs=60, rotate_bytes=4000, retain_days=30, retain_bytes=1 << 30)


def names(directory: Path) -> list[str]:
    """The directory's files but the writer's lock file."""
    return sorted(p.name for p in directory.iterdir() if p.name != LOCK_NAME)


def file_rows(path: Path) -> list[Row]:
    return [decode_row(line) for line in file_lines(path)]


def writer(directory: Path, limits: Limits = SMALL) -> DatasetWriter:
    return DatasetWriter(directory / LIVE, limits, background=False)


def test_each_poll_is_appended_as_whole_lines(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.append(poll_lines(0, 3, T0), T0)
    w.append(b"", T0 + 2000)
    w.append(poll_lines(3, 2, T0 + 4000), T0 + 4000)
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1, 2, 3, 4]
    assert (tmp_path / LIVE).read_bytes().endswith(b"\n")
    assert w.counters().rows_written == 5
    w.close()


def test_rotation_by_age_names_the_segment_by_its_first_row_and_compresses_it(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.append(poll_lines(0, 1, T0 + 1500), T0 + 1500)
    w.append(poll_lines(1, 1, T0 + 59_000), T0 + 59_000)
    assert names(tmp_path) == [LIVE]
    w.append(poll_lines(2, 1, T0 + 61_500), T0 + 61_500)
    assert names(tmp_path) == ["croft-dataset-20261020T130001Z.jsonl", LIVE]
    w.compress_now()
    assert names(tmp_path) == ["croft-dataset-20261020T130001Z.jsonl.zst", LIVE]
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1, 2]
    counters = w.counters()
    assert (counters.segments_closed, counters.segments_compressed) == (1, 1)
    w.close()


def test_rotation_by_size_happens_before_the_poll_that_would_follow_the_limit(tmp_path: Path) -> None:
    w = writer(tmp_path, Limits(rotate_secs=3600, rotate_bytes=1000, retain_days=1, retain_bytes=1 << 20))
    for i in range(12):
        w.append(poll_lines(i, 1, T0 + 2000 * i), T0 + 2000 * i)
    w.compress_now()
    files = dataset_files(tmp_path)
    assert len(files) > 3
    for path in files[:-1]:
        assert path.name.endswith(".jsonl.zst")
        assert len(b"\n".join(file_lines(path))) < 1000 + 1000  # rotated at 1000, one poll over at most
    assert [row.tgid for row in read_rows(tmp_path)] == list(range(12))
    w.close()


def test_the_mtime_of_a_segment_survives_compression(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.append(poll_lines(0, 1, T0), T0)
    w.append(b"", T0 + 61_000)
    plain = tmp_path / "croft-dataset-20261020T130000Z.jsonl"
    os.utime(plain, ns=(T0 * 1_000_000, T0 * 1_000_000))
    w.compress_now()
    assert (tmp_path / "croft-dataset-20261020T130000Z.jsonl.zst").stat().st_mtime_ns == T0 * 1_000_000
    w.close()


def test_a_live_file_left_by_an_earlier_run_becomes_a_segment_at_the_first_poll(tmp_path: Path) -> None:
    (tmp_path / LIVE).write_bytes(poll_lines(0, 2, T0 + 7000) + b'{"unix_ms": 17')  # torn by a crash
    w = writer(tmp_path)
    assert names(tmp_path) == [LIVE]
    w.append(poll_lines(2, 1, T0 + 9000), T0 + 9000)
    assert names(tmp_path) == ["croft-dataset-20261020T130007Z.jsonl", LIVE]
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1, 2]
    w.close()


def test_a_name_clash_gets_a_suffix_that_sorts_after_it(tmp_path: Path) -> None:
    for attempt in range(3):
        # Each run leaves a live file whose first row falls in the same second.
        (tmp_path / LIVE).write_bytes(poll_lines(attempt, 1, T0 + 100 * attempt))
        w = writer(tmp_path)
        w.append(b"", T0 + 500)
        w.close()
        (tmp_path / LIVE).unlink()
    assert names(tmp_path) == [
        "croft-dataset-20261020T130000Z.jsonl",
        "croft-dataset-20261020T130000Z_001.jsonl",
        "croft-dataset-20261020T130000Z_002.jsonl",
    ]
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1, 2]


def test_an_empty_live_file_left_behind_is_simply_reused(tmp_path: Path) -> None:
    (tmp_path / LIVE).touch()
    w = writer(tmp_path)
    w.append(poll_lines(0, 1, T0), T0)
    assert names(tmp_path) == [LIVE]
    w.close()


def test_retention_deletes_old_and_excess_segments_but_never_the_live_file(tmp_path: Path) -> None:
    day = 86_400_000
    limits = Limits(rotate_secs=3600, rotate_bytes=1 << 20, retain_days=2, retain_bytes=1 << 30)
    w = writer(tmp_path, limits)
    for hour in range(0, 24 * 4, 12):
        at = T0 + hour * 3_600_000
        w.append(poll_lines(hour, 1, at), at)
        w.compress_now()
    kept = [row.unix_ms for row in read_rows(tmp_path)]
    now = T0 + 84 * 3_600_000
    assert kept and all(now - at <= 2 * day + 12 * 3_600_000 for at in kept)
    assert (tmp_path / LIVE).exists()
    assert w.counters().segments_deleted >= 3
    w.close()


def test_a_corrupt_segment_does_not_stop_retention(tmp_path: Path) -> None:
    old = SegmentName(T0)
    (tmp_path / NAMING.compressed(old)).write_bytes(b"\x28\xb5\x2f\xfd garbage, not a frame")
    (tmp_path / NAMING.plain(SegmentName(T0 + 1000))).write_bytes(b"\x00\xff half a line")
    os.utime(tmp_path / NAMING.compressed(old), ns=(T0 * 1_000_000,) * 2)
    os.utime(tmp_path / NAMING.plain(SegmentName(T0 + 1000)), ns=((T0 + 1000) * 1_000_000,) * 2)
    w = writer(tmp_path, Limits(rotate_secs=60, rotate_bytes=1000, retain_days=1, retain_bytes=1 << 30))
    w.compress_now()  # the garbage plain segment compresses like any other bytes
    w.append(poll_lines(0, 1, T0 + 2 * 86_400_000), T0 + 2 * 86_400_000)
    assert names(tmp_path) == [LIVE]
    assert w.counters().segments_deleted == 2
    w.close()


def test_a_failed_compression_leaves_the_plain_segment_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    w = writer(tmp_path)
    w.append(poll_lines(0, 1, T0), T0)
    seg = SegmentName(T0)
    w.append(poll_lines(1, 1, T0 + 60_000), T0 + 60_000)
    (tmp_path / NAMING.temporary(seg)).mkdir()  # the temporary cannot be opened: an I/O error
    with caplog.at_level(logging.WARNING, "croft.dataset"):
        w.compress_now()
    assert "could not compress croft-dataset-20261020T130000Z.jsonl" in caplog.text
    assert w.counters().compression_failures == 1
    assert (tmp_path / NAMING.plain(seg)).exists()
    (tmp_path / NAMING.temporary(seg)).rmdir()
    w.append(b"", T0 + 62_000)
    w.compress_now()
    assert not (tmp_path / NAMING.compressed(seg)).exists()  # not before RETRY_MS
    w.append(b"", T0 + 62_000 + 60_000)
    w.compress_now()
    assert (tmp_path / NAMING.compressed(seg)).exists()
    assert not (tmp_path / NAMING.plain(seg)).exists()
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1]
    w.close()


def _plain_segment(directory: Path, seg: SegmentName, first: int) -> bytes:
    data = poll_lines(first, 3, seg.start_ms)
    (directory / NAMING.plain(seg)).write_bytes(data)
    return data


def test_recovery_finishes_or_redoes_half_compressed_segments(tmp_path: Path) -> None:
    a, b, c, d = (SegmentName(T0 + i * 3_600_000) for i in range(4))
    data_a = _plain_segment(tmp_path, a, 0)
    (tmp_path / NAMING.temporary(a)).write_bytes(zstandard.ZstdCompressor().compress(data_a)[:9])
    data_b = _plain_segment(tmp_path, b, 3)
    (tmp_path / NAMING.compressed(b)).write_bytes(zstandard.ZstdCompressor().compress(data_b))
    data_c = _plain_segment(tmp_path, c, 6)
    (tmp_path / NAMING.compressed(c)).write_bytes(zstandard.ZstdCompressor().compress(data_c + data_c))
    (tmp_path / NAMING.temporary(d)).write_bytes(b"the only copy")
    w = writer(tmp_path)
    w.compress_now()
    assert names(tmp_path) == sorted(
        [NAMING.temporary(d), NAMING.compressed(a), NAMING.compressed(b), NAMING.compressed(c), LIVE]
    )
    assert [row.tgid for row in read_rows(tmp_path)] == list(range(9))
    w.close()


def test_compression_runs_on_its_own_thread(tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path / LIVE, SMALL)
    w.append(poll_lines(0, 50, T0), T0)
    w.append(poll_lines(50, 1, T0 + 60_000), T0 + 60_000)
    deadline = time.monotonic() + 20
    while w.counters().segments_compressed == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    w.append(b"", T0 + 62_000)
    assert names(tmp_path) == ["croft-dataset-20261020T130000Z.jsonl.zst", LIVE]
    assert w.counters().compression_backlog == 0
    w.close()
    assert [row.tgid for row in read_rows(tmp_path)] == list(range(51))


def test_a_directory_below_a_file_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="cannot create the dataset directory"):
        writer(tmp_path / "file" / "sub")


def test_a_dataset_path_that_is_a_directory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        DatasetWriter(tmp_path, SMALL, background=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_a_directory_another_user_cannot_write_is_a_user_error() -> None:
    # Outside pytest's tmp tree, whose parents only root may enter; imports come before the drop,
    # since this interpreter lives under /root.
    code = (
        "import os, sys; from pathlib import Path\n"
        "from croft.adapters.dataset.writer import DatasetWriter\n"
        "from croft.domain.dataset.rotation import Limits\n"
        "from croft.errors import UserError\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "try:\n    DatasetWriter(Path(sys.argv[1]), Limits(), background=False)\n"
        "except UserError as e:\n    print(e)\n"
    )
    directory = Path(tempfile.mkdtemp(prefix="croft-unwritable-"))
    try:
        directory.chmod(0o755)
        out = subprocess.run(
            [sys.executable, "-c", code, str(directory / LIVE)], capture_output=True, text=True, check=True
        )
    finally:
        shutil.rmtree(directory)
    assert out.stdout.startswith(f"cannot write to the dataset directory {directory};")


def test_a_second_writer_on_the_directory_is_refused_naming_the_first_ones_pid(tmp_path: Path) -> None:
    first = writer(tmp_path)
    with pytest.raises(UserError) as refused:
        DatasetWriter(tmp_path / "other-name.jsonl", SMALL, background=False)  # one writer per directory
    message = str(refused.value)
    assert f"another croft run (pid {os.getpid()}) writes the dataset in {tmp_path}" in message
    assert "--dataset" in message
    first.append(poll_lines(0, 2, T0), T0)
    assert [row.tgid for row in read_rows(tmp_path)] == [0, 1]  # the first goes on undisturbed
    first.close()
    second = writer(tmp_path)  # the lock went with the first writer
    second.close()


@pytest.mark.parametrize("how", ["deleted", "renamed"])
def test_a_live_file_taken_away_is_counted_and_replaced_never_written_unlinked(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    w = writer(tmp_path)
    w.append(poll_lines(0, 2, T0), T0, 10_000)
    if how == "deleted":
        (tmp_path / LIVE).unlink()
    else:
        (tmp_path / LIVE).rename(tmp_path / "moved-away.jsonl")
    with caplog.at_level(logging.WARNING, logger="croft.dataset"):
        w.append(poll_lines(2, 3, T0 + 2000), T0 + 2000, 2_000_010_000)
    assert [row.tgid for row in file_rows(tmp_path / LIVE)] == [2, 3, 4]  # a new live file, at its path
    counters = w.counters()
    assert (counters.live_files_lost, counters.live_file_lost_ns) == (1, 2_000_010_000)
    assert counters.rows_written == 5
    assert f"the live file {tmp_path / LIVE} was renamed or deleted under this collector" in caplog.text
    w.append(poll_lines(5, 1, T0 + 4000), T0 + 4000, 4_000_010_000)
    assert w.counters().live_files_lost == 1  # counted once
    assert [row.tgid for row in file_rows(tmp_path / LIVE)] == [2, 3, 4, 5]
    if how == "renamed":
        assert [row.tgid for row in file_rows(tmp_path / "moved-away.jsonl")] == [0, 1]
    w.close()
