"""Fault tests with real processes and real filesystems: kill -9 at random moments, a disk filled to
the brim. What is on disk afterwards is read back with zstandard and the codec."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from croft.adapters.dataset.lock import LOCK_NAME
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import Limits, Naming
from tests.helpers.cli import CROFT
from tests.helpers.dataset import LIVE, dataset_files, file_bytes, file_lines, poll_lines, read_rows
from tests.helpers.filesystems import fill, small_filesystem
from tests.helpers.golden import assert_same_bytes

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_792_505_950_000
NAMING = Naming.for_live(LIVE)


def _completed(stdout: str, default: int) -> int:
    """The last sequence number the driver printed after a completed poll."""
    numbers = [int(line) for line in stdout.splitlines() if line.strip().isdigit()]
    return numbers[-1] if numbers else default


def _leftovers(directory: Path) -> int:
    """Files a crash can leave for the next start to finish: temporaries, and plain segments
    whose compressed copy already exists."""
    names = {p.name for p in directory.iterdir()} - {LOCK_NAME}
    temporaries = sum(name.startswith(".") for name in names)
    return temporaries + sum(f"{name}.zst" in names for name in names)


@pytest.mark.slow
def test_kill_9_of_a_writing_process_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    next_seq, next_ms, crash_leftovers = 0, T0, 0
    for attempt in range(20):
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.dataset_driver",
                str(tmp_path),
                str(next_seq),
                str(next_ms),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.3, 1.5))
        driver.send_signal(signal.SIGKILL)
        stdout, _ = driver.communicate(timeout=30)
        completed = _completed(stdout, next_seq)
        crash_leftovers += _leftovers(tmp_path)
        rows = read_rows(tmp_path)  # before restart, a crash may leave a segment twice
        seqs = sorted({row.tgid for row in rows})
        where = f"seed {seed}, kill {attempt + 1}"
        assert seqs == list(range(len(seqs))), f"a gap in the rows ({where})"
        assert len(seqs) >= completed, f"rows of completed polls are missing ({where})"
        next_seq, next_ms = len(seqs), max((row.unix_ms for row in rows), default=next_ms) + 2000
    final = subprocess.run(
        [sys.executable, "-m", "tests.helpers.dataset_driver", str(tmp_path), str(next_seq), str(next_ms)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = read_rows(tmp_path)
    assert [row.tgid for row in rows] == list(range(_completed(final.stdout, -1))), f"seed {seed}"
    assert not any(p.name.startswith(".") and p.name != LOCK_NAME for p in tmp_path.iterdir())
    print(f"seed {seed}: {len(rows)} rows, {len(dataset_files(tmp_path))} files, {crash_leftovers} leftovers")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded trace: the checked-in ones when there are any, else ~6 s recorded on this host."""
    checked_in = sorted((ROOT / "fixtures" / "traces").glob("**/*.jsonl.zst"))
    if checked_in:
        return checked_in[0]
    if os.geteuid() != 0:
        pytest.skip("no trace in fixtures/traces and recording one needs root")
    where = tmp_path_factory.mktemp("trace")
    recorder = subprocess.Popen(
        [CROFT, "run", "--watch", "/", "--record", str(where / "rec"), "--dataset", str(where / "d.jsonl")],
        stderr=subprocess.DEVNULL,
    )
    time.sleep(7)
    recorder.send_signal(signal.SIGTERM)
    assert recorder.wait(timeout=30) == 0
    (found,) = (where / "rec").glob("*.jsonl.zst")
    return found


@pytest.mark.slow
def test_kill_9_of_croft_run_replay_never_mixes_or_duplicates_runs(trace: Path, tmp_path: Path) -> None:
    # Forty copies of the trace make one replay long enough to be killed in the middle of it.
    replay = tmp_path / "replay"
    replay.mkdir()
    for i in range(40):
        shutil.copy(trace, replay / f"croft-trace-{i:02d}.jsonl.zst")
    golden_dir = tmp_path / "golden"
    subprocess.run(
        [CROFT, "run", "--replay", str(replay), "--dataset", str(golden_dir / LIVE)],
        check=True,
        capture_output=True,
    )
    golden = file_lines(golden_dir / LIVE)
    assert len(golden) > 100
    out = tmp_path / "out"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for _ in range(20):
        run = subprocess.Popen(
            [CROFT, "run", "--replay", str(replay), "--dataset", str(out / LIVE)], stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(0.2, 1.4))
        run.kill()
        run.wait()
    subprocess.run(
        [CROFT, "run", "--replay", str(replay), "--dataset", str(out / LIVE)], check=True, capture_output=True
    )
    files = dataset_files(out)
    # Each killed run left one segment (its live file, closed by the next run) holding a prefix
    # of what a whole replay writes; the last run's live file is the whole replay, byte for byte.
    assert files[-1].name == LIVE
    assert_same_bytes(
        (out / LIVE).read_bytes(),
        (golden_dir / LIVE).read_bytes(),
        "the last run's live file",
        f"seed {seed}: it should be one whole replay",
    )
    stems = [NAMING.parse(p.name) for p in files[:-1]]
    assert len({found[0] for found in stems if found}) == len(files) - 1, f"seed {seed}: a segment twice"
    for path in files[:-1]:
        lines = file_lines(path)
        assert lines == golden[: len(lines)], f"seed {seed}: {path.name} is not a prefix of one replay"
    assert not any(p.name.startswith(".") and p.name != LOCK_NAME for p in out.iterdir())


# --- a full disk -------------------------------------------------------------------------------


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_drops_rows_keeps_running_and_recovers(tmp_path: Path) -> None:
    limits = Limits(rotate_secs=3600, rotate_bytes=40_000, retain_days=3650, retain_bytes=1 << 40)
    with small_filesystem(tmp_path / "small", "2m") as disk:
        writer = DatasetWriter(disk / LIVE, limits)
        now, seq, expected = T0, 0, []

        def poll(rows: int = 20) -> bool:
            nonlocal now, seq
            dropped = writer.counters().rows_dropped
            writer.append(poll_lines(seq, rows, now), now)
            kept = writer.counters().rows_dropped == dropped
            if kept:
                expected.extend(range(seq, seq + rows))
            seq += rows
            now += 2000
            return kept

        for _ in range(20):
            poll()
        # A compression finishing after the fill would free its plain segment's space, and the
        # next ones would keep freeing it: the disk would never stay full. Fill when none is due.
        deadline = time.monotonic() + 60
        while writer.compressor.waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.compressor.waiting() == 0, "the compression thread did not catch up in 60 s"
        fill(disk / "filler")  # to the brim, around the writer's back
        for _ in range(40):  # writes, rotations and compressions now fail; nothing raises
            poll()
            time.sleep(0.002)
        counters = writer.counters()
        assert counters.rows_dropped > 0 and counters.write_failures > 0
        # Every closed segment is intact and the live file holds whole lines only.
        # (The compression thread goes on meanwhile: a plain segment listed may be compressed by
        # the time it is read; file_bytes then reads the compressed copy.)
        for path in dataset_files(disk):
            assert file_bytes(path).endswith(b"\n"), path.name
        assert [row.tgid for row in read_rows(disk)] == expected
        (disk / "filler").unlink()  # space comes back
        assert all(poll() for _ in range(30))
        deadline = time.monotonic() + 20
        now += 120_000  # past the retry delay of failed compressions
        while writer.counters().compression_backlog and time.monotonic() < deadline:
            poll()
            time.sleep(0.05)
        writer.close()
        assert [row.tgid for row in read_rows(disk)] == expected
        assert not any(p.name.startswith(".") and p.name != LOCK_NAME for p in disk.iterdir())
        assert writer.counters().compression_backlog == 0


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_croft_run_replay_into_a_full_disk_keeps_running(trace: Path, tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small", "1m") as disk:
        fill(disk / "filler")
        out = subprocess.run(
            [CROFT, "run", "--replay", str(trace), "--dataset", str(disk / LIVE)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert "dropping rows: the disk is full" in out.stderr
        assert out.stderr.count("dropping rows") == 1  # once a minute, and a replay takes less


def test_three_croft_index_runs_at_once_on_one_directory_each_finish_and_leave_every_summary(
    tmp_path: Path,
) -> None:
    """Three real `croft index` processes (one with --verify) over the same 40 segments without
    summaries, three rounds: each exits 0 without a traceback, and afterwards every segment has a
    trusted summary, no hidden copy is left, and the answers are the full scan's."""
    import zstandard

    from croft.adapters.dataset.files import find_files
    from croft.adapters.dataset.scan import read_stats
    from croft.adapters.dataset.summaries import load
    from croft.domain.dataset.rotation import SegmentName

    for round_ in range(3):
        directory = tmp_path / f"round-{round_}"
        directory.mkdir()
        for k in range(40):
            lines = poll_lines(1000 * k, 200, T0 + 60_000 * k)
            name = NAMING.compressed(SegmentName(T0 + 60_000 * k))
            (directory / name).write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(lines))
        runs = [
            subprocess.Popen(
                [CROFT, "index", str(directory), *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for extra in ([], [], ["--verify"])
        ]
        for run in runs:
            stdout, stderr = run.communicate(timeout=300)
            assert run.returncode == 0, stderr
            assert stderr == "" and "segments summarized" in stdout
        files = find_files(directory)
        assert len(files) == 40 and all(load(f) is not None for f in files)
        assert not [p.name for p in directory.iterdir() if p.name.startswith(".")]
        scanned = read_stats(directory, workers=1, summaries=False)
        summarized = read_stats(directory, workers=1)
        assert summarized[1].summary(summarized[0]) == scanned[1].summary(scanned[0])
        assert scanned[1].rows == 40 * 200
