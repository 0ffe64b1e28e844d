"""croft top's tail reader on real files: the newest complete poll, read from the end only."""

from __future__ import annotations

import io
import random
from pathlib import Path

import msgspec
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.dataset.tail import (
    LIVE_NAME,
    NoDataset,
    PollTail,
    newest_poll,
    read_newest,
    tail_file,
    tail_open,
    tail_zstd,
)
from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.row import Row
from croft.domain.top.table import build_table
from croft.errors import UserError
from tests.helpers.rows import T0_MS, encode, make_row, poll


class CountingReader:
    """A binary file that counts the bytes handed out by `read`."""

    def __init__(self, f: io.BufferedReader) -> None:
        self._f = f
        self.bytes_read = 0
        self.reads = 0

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return self._f.seek(offset, whence)

    def read(self, size: int = -1, /) -> bytes:
        data = self._f.read(size)
        self.bytes_read += len(data)
        self.reads += 1
        return data


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def tgids(tail: PollTail) -> list[int]:
    return [row.tgid for row in tail.rows]


def test_the_newest_poll_of_three(tmp_path: Path) -> None:
    data = encode(
        poll(T0_MS, 4) + poll(T0_MS + 2000, 5, first_tgid=2000) + poll(T0_MS + 4000, 3, first_tgid=3000)
    )
    tail = tail_file(write(tmp_path / LIVE_NAME, data))
    assert tgids(tail) == [3000, 3001, 3002]
    assert {row.unix_ms for row in tail.rows} == {T0_MS + 4000}
    assert (tail.skipped_lines, tail.torn, tail.partial) == (0, False, False)


def test_a_torn_line_of_a_new_poll_is_skipped(tmp_path: Path) -> None:
    whole = encode(poll(T0_MS, 3) + poll(T0_MS + 2000, 2, first_tgid=2000))
    torn = encode_row(make_row(3000, T0_MS + 4000))[:57]  # the next poll, cut while being written
    tail = tail_file(write(tmp_path / LIVE_NAME, whole + torn))
    assert tgids(tail) == [2000, 2001]
    assert tail.torn
    assert tail.skipped_lines == 0


def test_a_poll_still_being_written_gives_way_to_the_one_before(tmp_path: Path) -> None:
    older = poll(T0_MS, 3)
    writing = poll(T0_MS + 2000, 4, first_tgid=2000)
    data = encode(older + writing[:2]) + encode_row(writing[2])[:80]  # two rows in, the third torn
    tail = tail_file(write(tmp_path / LIVE_NAME, data))
    assert tgids(tail) == [1000, 1001, 1002]
    assert tail.torn


def test_a_last_row_without_its_newline_still_counts(tmp_path: Path) -> None:
    data = encode(poll(T0_MS, 2) + poll(T0_MS + 2000, 2, first_tgid=2000)).removesuffix(b"\n")
    assert tgids(tail_file(write(tmp_path / LIVE_NAME, data))) == [2000, 2001]


def test_lines_that_are_not_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    data = (
        encode(poll(T0_MS, 2))
        + b"not json\n"
        + b'{"unix_ms": 1}\n'
        + encode(poll(T0_MS + 2000, 2, first_tgid=5))
    )
    data += b"\n"  # a blank line holds nothing: not counted, as by every reader
    tail = tail_file(write(tmp_path / LIVE_NAME, data))
    assert tgids(tail) == [5, 6]
    assert tail.skipped_lines == 2  # the two read on the way to poll T0's last row
    tail = tail_file(write(tmp_path / "b.jsonl", encode(poll(T0_MS, 2)) + b"not json\n{}\n"))
    assert (tgids(tail), tail.skipped_lines) == ([1000, 1001], 2)


def test_a_multi_megabyte_file_is_read_only_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / LIVE_NAME
    with path.open("wb") as f:
        for k in range(400):  # 400 polls of 20 rows: about 6 MB
            f.write(encode(poll(T0_MS + 2000 * k, 20, first_tgid=100)))
        last = encode(poll(T0_MS + 2000 * 400, 20, first_tgid=9000))
        f.write(last)
    size = path.stat().st_size
    assert size > 5_000_000
    with path.open("rb") as raw:
        counting = CountingReader(raw)
        tail = newest_poll(counting, size)
    assert tgids(tail) == list(range(9000, 9020))
    assert counting.bytes_read <= 64 << 10  # the first 64 KiB block holds the poll and its boundary
    assert counting.bytes_read < size / 50


def test_a_poll_bigger_than_the_first_block_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / LIVE_NAME
    big = encode(poll(T0_MS + 2000, 600, first_tgid=10_000, pad=200))  # ~600 KB in one poll
    write(path, encode(poll(T0_MS, 700, pad=200)) + big)
    with path.open("rb") as raw:
        counting = CountingReader(raw)
        tail = newest_poll(counting, path.stat().st_size)
    assert tgids(tail) == list(range(10_000, 10_600))
    assert counting.bytes_read < 2 * len(big) + (64 << 10)  # blocks double: never more than twice


def noisy(rows: list[Row]) -> list[Row]:
    """The rows with a random exe each, so they compress about as little as real rows do."""
    rng = random.Random(7)
    return [
        msgspec.structs.replace(r, process=msgspec.structs.replace(r.process, exe=rng.randbytes(150).hex()))
        for r in rows
    ]


def naive_newest(data: bytes) -> list[int]:
    """What reading the whole file forwards would give: the rows of the last unix_ms seen."""
    from croft.domain.dataset.codec import decode_row

    complete = data[: data.rfind(b"\n") + 1].splitlines()
    found = [decode_row(line) for line in complete]
    if not found:
        return []
    return [row.tgid for row in found if row.unix_ms == found[-1].unix_ms]


@given(
    st.lists(st.integers(min_value=1, max_value=6), min_size=0, max_size=6),
    st.integers(min_value=1, max_value=700),
    st.integers(min_value=0, max_value=30),
)
def test_reading_back_in_blocks_agrees_with_reading_forwards(sizes: list[int], block: int, torn: int) -> None:
    """Whatever the block size, the backwards reader finds the rows a forward read would; a torn
    tail of a new poll never changes the answer."""
    rows = [r for k, n in enumerate(sizes) for r in poll(T0_MS + 2000 * k, n, first_tgid=100 * k)]
    data = encode(rows) + encode_row(make_row(99_999, T0_MS + 2000 * len(sizes)))[: torn and torn + 20]
    tail = newest_poll(io.BytesIO(data), len(data), first_block=block)
    assert tgids(tail) == naive_newest(data)
    assert tail.skipped_lines == 0


def test_a_compressed_segment_is_streamed_keeping_only_its_end(tmp_path: Path) -> None:
    data = encode(noisy(poll(T0_MS, 400) + poll(T0_MS + 2000, 300, first_tgid=7000)))
    segment = write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", zstandard.compress(data))
    whole = tail_file(segment)
    assert tgids(whole) == list(range(7000, 7300))
    assert not whole.damaged
    small_window = tail_zstd(segment, window_bytes=100_000)  # the poll begins before what is kept
    assert small_window.partial
    assert 0 < len(small_window.rows) < 300
    assert tgids(small_window) == list(range(7300 - len(small_window.rows), 7300))


def test_tail_open_reads_from_the_current_end(tmp_path: Path) -> None:
    path = write(tmp_path / LIVE_NAME, encode(poll(T0_MS, 2)))
    with path.open("rb") as f:
        assert tgids(tail_open(f)) == [1000, 1001]


def test_a_dataset_directory_means_its_live_file(tmp_path: Path) -> None:
    write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", zstandard.compress(encode(poll(T0_MS, 2))))
    write(tmp_path / LIVE_NAME, encode(poll(T0_MS + 2000, 3, first_tgid=50)))
    snapshot = read_newest(tmp_path, "here")
    (only,) = snapshot.polls
    assert (only.node, only.unix_ms, [r.tgid for r in only.rows]) == ("here", T0_MS + 2000, [50, 51, 52])
    assert snapshot.notes == ()


def test_without_a_live_file_the_newest_segment_is_shown_and_said(tmp_path: Path) -> None:
    write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", zstandard.compress(encode(poll(T0_MS, 2))))
    newest = encode(poll(T0_MS + 2000, 2, first_tgid=60))
    write(tmp_path / "croft-dataset-20261020T142010Z.jsonl.zst", zstandard.compress(newest))
    snapshot = read_newest(tmp_path, "here")
    assert [r.tgid for r in snapshot.polls[0].rows] == [60, 61]
    assert snapshot.notes == (
        "no live file: showing closed segment croft-dataset-20261020T142010Z.jsonl.zst (decompressed whole)",
    )


def test_an_empty_live_file_after_rotation_falls_back_to_the_plain_segment(tmp_path: Path) -> None:
    plain = encode(poll(T0_MS, 2, first_tgid=70))
    write(tmp_path / "croft-dataset-20261020T141910Z.jsonl", plain)
    write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", zstandard.compress(plain)[:10])  # mid-way
    write(tmp_path / LIVE_NAME, b"")
    snapshot = read_newest(tmp_path, "here")
    assert [r.tgid for r in snapshot.polls[0].rows] == [70, 71]
    assert snapshot.notes == (
        "the live file has no complete poll: showing closed segment croft-dataset-20261020T141910Z.jsonl",
    )


def test_per_node_directories_give_each_node_its_newest_poll(tmp_path: Path) -> None:
    for k, node in enumerate(["gpu-a", "gpu-b"]):
        (tmp_path / node).mkdir()
        write(
            tmp_path / node / LIVE_NAME,
            encode(poll(T0_MS, 2) + poll(T0_MS + 2000 * (k + 1), 2, first_tgid=(k + 1) * 10)),
        )
    (tmp_path / "cpu-c").mkdir()
    write(tmp_path / "cpu-c" / LIVE_NAME, encode_row(make_row(1))[:40])  # only a torn line so far
    (tmp_path / "notes").mkdir()  # not a dataset: ignored
    snapshot = read_newest(tmp_path, "here")
    assert [(p.node, [r.tgid for r in p.rows]) for p in snapshot.polls] == [
        ("gpu-a", [10, 11]),
        ("gpu-b", [20, 21]),
    ]
    assert snapshot.notes == ("cpu-c: no complete poll yet",)


def test_a_node_is_named_by_its_rows_node_key_and_by_its_directory_only_without_one(tmp_path: Path) -> None:
    """Directories named after a copy (`croft collect` into any name) or a renamed host still show
    the node each collector wrote into its rows; rows of older collectors, without the key, fall
    back to the directory's name, and a single dataset to this machine's."""
    named = [msgspec.structs.replace(row, node="gpu-node-7") for row in poll(T0_MS, 2, first_tgid=10)]
    (tmp_path / "copy-of-a").mkdir()
    write(tmp_path / "copy-of-a" / LIVE_NAME, encode(named))
    (tmp_path / "old-b").mkdir()
    write(tmp_path / "old-b" / LIVE_NAME, encode(poll(T0_MS, 2, first_tgid=20)))
    snapshot = read_newest(tmp_path, "here")
    assert [(p.node, [r.tgid for r in p.rows]) for p in snapshot.polls] == [
        ("gpu-node-7", [10, 11]),
        ("old-b", [20, 21]),
    ]
    table = build_table(snapshot.polls, T0_MS)
    assert "2 nodes (gpu-node-7, old-b)" in table.header
    node_cells = {row.cells[0] for row in table.rows}
    assert node_cells == {"gpu-node-7", "old-b"}
    single = tmp_path / "single"
    single.mkdir()
    write(single / LIVE_NAME, encode(named))
    assert [p.node for p in read_newest(single, "here").polls] == ["gpu-node-7"]
    write(single / LIVE_NAME, encode(poll(T0_MS, 1)))
    assert [p.node for p in read_newest(single, "here").polls] == ["here"]


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda p: p / "missing.jsonl", UserError, "does not exist"),
        (lambda p: write(p / LIVE_NAME, b""), NoDataset, "is empty: no poll has been written yet"),
        (lambda p: p, UserError, "holds no dataset files"),
    ],
)
def test_no_dataset_is_an_error_naming_the_path(
    tmp_path: Path, make: object, error: type[Exception], message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(error, match=message):
        read_newest(path, "here")


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_segment_gives_a_poll_from_before_the_damage(tmp_path: Path, damage: str) -> None:
    """The collector's frames carry a checksum: a truncated frame stops at the cut, a corrupt one
    fails its checksum at the frame's end; either way the segment is reported damaged."""
    polls = noisy([r for k in range(40) for r in poll(T0_MS + 2000 * k, 25, first_tgid=100 * k)])
    packed = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(encode(polls))
    if damage == "truncated":
        packed = packed[: len(packed) * 2 // 3]
    else:
        middle = len(packed) // 2
        packed = (
            packed[:middle] + bytes(b ^ 0x5A for b in packed[middle : middle + 64]) + packed[middle + 64 :]
        )
    tail = tail_file(write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", packed))
    assert tail.damaged
    assert tail.rows, "some polls decompress before the damage"
    newest = tail.rows[0].unix_ms
    assert all(row.unix_ms == newest for row in tail.rows)
    if damage == "truncated":
        assert T0_MS <= newest < T0_MS + 2000 * 39
        assert tgids(tail) == list(range(tail.rows[0].tgid, tail.rows[0].tgid + 25))


def test_a_damaged_segment_is_said_in_the_notes(tmp_path: Path) -> None:
    packed = zstandard.ZstdCompressor(write_checksum=True).compress(encode(noisy(poll(T0_MS, 300))))
    write(tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst", packed[:-100])
    snapshot = read_newest(tmp_path, "here")
    assert (
        snapshot.notes[-1]
        == "the segment is damaged (truncated or corrupt): showing its last poll before that"
    )


def test_the_polls_before_the_newest_come_as_earlier_rows(tmp_path: Path) -> None:
    """croft top holds idle processes' rows from the 14 polls before the newest: `polls` asks for
    them, a torn poll still being written is never among them, and no more polls are read."""
    polls = [poll(T0_MS + 2000 * k, 2, first_tgid=1000 * (k + 1)) for k in range(20)]
    torn = encode_row(make_row(9, T0_MS + 40_000))[:30]
    path = write(tmp_path / LIVE_NAME, encode([row for rows in polls for row in rows]) + torn)
    tail = tail_file(path, polls=15)
    assert tgids(tail) == [20_000, 20_001]
    assert [row.tgid for row in tail.earlier] == [
        t for k in range(5, 19) for t in (1000 * (k + 1), 1000 * (k + 1) + 1)
    ]
    assert tail_file(path, polls=1).earlier == ()
    assert [row.tgid for row in tail_file(path, polls=3).earlier] == [18_000, 18_001, 19_000, 19_001]
    assert read_newest(path, "n").polls[0].earlier == tail.earlier
