"""Remembered trust checks (croft.adapters.dataset.summaries.CheckMemory): a check that passed is
not run again while the file's device, inode, size, mtime and ctime are what they were; any write
gives the file a new ctime, so a damaged segment is checked again and scanned; a file written too
recently to tell is never remembered."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from tests.helpers.rows import T0_MS, make_row

from croft.adapters.dataset.compressor import compress_segment
from croft.adapters.dataset.files import DatasetFile, find_files
from croft.adapters.dataset.summaries import CheckMemory, _memory, load_all, read_frame, remembered_checks
from croft.domain.dataset import codec
from croft.domain.dataset.rotation import Naming, SegmentName

NAMING = Naming.for_live("croft-dataset.jsonl")
SECOND_NS = 1_000_000_000


def segment(directory: Path) -> DatasetFile:
    directory.mkdir()
    name = SegmentName(T0_MS // 1000 * 1000)
    rows = b"".join(orjson.dumps(codec.row_to_dict(make_row(t, T0_MS + t))) + b"\n" for t in range(1, 50))
    (directory / NAMING.plain(name)).write_bytes(rows)
    compress_segment(directory, NAMING, name)
    (f,) = find_files(directory)
    return f


def checked(f: DatasetFile, memory_at: Path, now_ns: int) -> bool:
    remembered_checks(now_ns, memory_at)
    try:
        (summary,) = load_all([f], workers=1)
    finally:
        _memory.clear()
    return summary is not None


def damage(f: DatasetFile) -> None:
    facts = f.path.stat()
    whole = f.path.read_bytes()
    f.path.write_bytes(whole[:10] + bytes([whole[10] ^ 1]) + whole[11:])  # same size
    os.utime(f.path, ns=(facts.st_atime_ns, facts.st_mtime_ns))  # same mtime: only the ctime tells


def test_a_passed_check_is_remembered_and_a_write_makes_it_checked_again(tmp_path: Path) -> None:
    f = segment(tmp_path / "d")
    memory_at = tmp_path / "cache" / "trusted-summaries.json"
    later = f.path.stat().st_ctime_ns + 3 * SECOND_NS
    assert checked(f, memory_at, later)
    assert len(orjson.loads(memory_at.read_bytes())) == 1
    summary = read_frame(f)
    assert summary is not None
    key = CheckMemory.key(f.path, summary)
    assert key in CheckMemory(memory_at, later).passed
    damage(f)
    assert CheckMemory.key(f.path, summary) != key  # the ctime moved
    assert not checked(f, memory_at, f.path.stat().st_ctime_ns + 3 * SECOND_NS)


def test_a_remembered_check_is_not_run_again(tmp_path: Path) -> None:
    f = segment(tmp_path / "d")
    memory_at = tmp_path / "trusted-summaries.json"
    damage(f)
    summary = read_frame(f)
    assert summary is not None
    assert not checked(f, memory_at, f.path.stat().st_ctime_ns + 3 * SECOND_NS)
    key = CheckMemory.key(f.path, summary)
    assert key is not None
    memory_at.write_bytes(orjson.dumps([[*key, 1]]))  # as if these very bytes had passed before
    assert checked(f, memory_at, f.path.stat().st_ctime_ns + 3 * SECOND_NS)


def test_a_file_written_within_the_clock_tick_margin_is_not_remembered(tmp_path: Path) -> None:
    f = segment(tmp_path / "d")
    memory_at = tmp_path / "trusted-summaries.json"
    assert checked(f, memory_at, f.path.stat().st_ctime_ns + SECOND_NS)
    assert not memory_at.exists()


def test_an_unreadable_memory_checks_everything(tmp_path: Path) -> None:
    f = segment(tmp_path / "d")
    memory_at = tmp_path / "trusted-summaries.json"
    for junk in (b"", b"{", b'[["x"]]', b"[[1, 2]]", b"null"):
        memory_at.write_bytes(junk)
        assert checked(f, memory_at, f.path.stat().st_ctime_ns + 3 * SECOND_NS)
    damage(f)
    assert not checked(f, memory_at, f.path.stat().st_ctime_ns + 3 * SECOND_NS)
