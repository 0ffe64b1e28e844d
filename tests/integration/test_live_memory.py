"""Remembered totals of plain files (croft.adapters.dataset.live_memory.LiveMemory): croft stats
answers an unchanged live file from them, reads one that changed since (any write gives it a new
ctime), and remembers none written too recently to tell, with skipped lines, or read without the
memory on; the answers equal a read of every line."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
from tests.helpers.rows import T0_MS, make_row

from croft.adapters.dataset.files import find_files
from croft.adapters.dataset.live_memory import FILE_NAME, LiveMemory
from croft.adapters.dataset.scan import read_stats
from croft.adapters.dataset.summaries import _live, _memory, remembered_checks
from croft.domain.dataset import codec

SECOND_NS = 1_000_000_000
LIVE = "croft-dataset.jsonl"


def rows(first: int, count: int) -> bytes:
    return b"".join(
        orjson.dumps(codec.row_to_dict(make_row(t, T0_MS + t * 2000))) + b"\n"
        for t in range(first, first + count)
    )


def answer(path: Path, cache: Path | None, now_ns: int = 0) -> dict[str, object]:
    """croft stats --json's object for `path`, with the memory in `cache` (None: off) as of `now_ns`."""
    if cache is not None:
        remembered_checks(now_ns, cache / "trusted-summaries.json")
    try:
        facts, total = read_stats(path, syscalls=True, workers=1)
    finally:
        _memory.clear()
        _live.clear()
    return total.summary(facts).to_json()


def later_than(path: Path) -> int:
    return path.stat().st_ctime_ns + 3 * SECOND_NS


def test_an_unchanged_live_file_is_answered_from_its_remembered_totals(tmp_path: Path) -> None:
    node = tmp_path / "data" / "n1"
    node.mkdir(parents=True)
    live = node / LIVE
    live.write_bytes(rows(1, 40))
    cache = tmp_path / "cache"
    now = later_than(live)
    first = answer(tmp_path / "data", cache, now)
    assert first == answer(tmp_path / "data", None)
    (f,) = find_files(tmp_path / "data")
    memory = LiveMemory(cache / FILE_NAME, now)
    key = LiveMemory.key(f)
    assert key is not None and key in memory.states
    # The totals alone answer: under another file's identity they answer for it, unread.
    other = node / "other.jsonl"
    other.write_bytes(rows(100, 3))
    (g,) = (x for x in find_files(node) if x.path == other)
    other_key = LiveMemory.key(g)
    assert other_key is not None
    memory.states[other_key] = memory.states[key]
    memory.added = True
    memory.save()
    assert answer(other, cache, now)["rows"] == 40


def test_a_live_file_written_since_is_read_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    live = data / LIVE
    live.write_bytes(rows(1, 40))
    cache = tmp_path / "cache"
    assert answer(data, cache, later_than(live))["rows"] == 40
    with live.open("ab") as out:
        out.write(rows(41, 5))
    assert answer(data, cache, later_than(live))["rows"] == 45
    assert answer(data, cache, later_than(live)) == answer(data, None)


def test_what_cannot_be_told_or_skipped_lines_are_not_remembered(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    live = data / LIVE
    live.write_bytes(rows(1, 10))
    cache = tmp_path / "cache"
    answer(data, cache, live.stat().st_ctime_ns + SECOND_NS)  # written a second before: too recent
    assert not (cache / FILE_NAME).exists()
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / LIVE).write_bytes(rows(1, 10) + b'{"unix_ms": 1')  # a line being written
    assert answer(torn, cache, later_than(torn / LIVE)) == answer(torn, None)
    assert not (cache / FILE_NAME).exists()


def test_a_broken_memory_file_is_ignored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / LIVE).write_bytes(rows(1, 10))
    cache = tmp_path / "cache"
    cache.mkdir()
    for body in (b"not json", b"[[1, 2]]", b'[["n", 1, 2, 3, 4, 5, 6, {"rows": "x"}]]'):
        (cache / FILE_NAME).write_bytes(body)
        assert answer(data, cache, later_than(data / LIVE)) == answer(data, None)
    shutil.rmtree(cache)


def test_a_live_file_rewritten_to_the_same_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    import os

    data = tmp_path / "data"
    data.mkdir()
    live = data / LIVE
    live.write_bytes(rows(10, 40))
    cache = tmp_path / "cache"
    before = answer(data, cache, later_than(live))
    facts = live.stat()
    live.write_bytes(rows(50, 40))  # as many bytes: only the ctime tells
    os.utime(live, ns=(facts.st_atime_ns, facts.st_mtime_ns))
    assert live.stat().st_size == facts.st_size
    after = answer(data, cache, later_than(live))
    assert after != before and after == answer(data, None)
