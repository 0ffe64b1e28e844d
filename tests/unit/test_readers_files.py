"""Finding a dataset's files and streaming their lines: layouts, order, parts, damage."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from croft.adapters.dataset.files import (
    Damaged,
    DatasetFile,
    Lines,
    Part,
    TooLong,
    Torn,
    find_files,
    read_part,
    split,
)
from croft.domain.dataset.lines import MAX_LINE_BYTES
from croft.errors import UserError

SEG1 = "croft-dataset-20261020T130000Z.jsonl.zst"
SEG2 = "croft-dataset-20261020T140000Z.jsonl"
SEG2_CLASH = "croft-dataset-20261020T140000Z_001.jsonl.zst"
LIVE = "croft-dataset.jsonl"


def touch(directory: Path, *names: str, data: bytes = b"{}\n") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(data)


def names(files: tuple[DatasetFile, ...]) -> list[tuple[str, str]]:
    return [(f.node, f.path.name) for f in files]


def test_a_dataset_directory_reads_segments_in_time_order_then_the_live_file(tmp_path: Path) -> None:
    touch(
        tmp_path, LIVE, SEG2_CLASH, SEG2, SEG1, ".croft-dataset-20261020T150000Z.jsonl.zst.tmp", "notes.txt"
    )
    files = find_files(tmp_path, host="h1")
    assert names(files) == [("h1", SEG1), ("h1", SEG2), ("h1", SEG2_CLASH), ("h1", LIVE)]
    assert [f.compressed for f in files] == [True, False, True, False]
    assert all(f.size_bytes == 3 for f in files)


def test_a_segment_both_plain_and_compressed_is_read_once_from_the_plain_file(tmp_path: Path) -> None:
    touch(tmp_path, SEG2, SEG2 + ".zst", LIVE)
    assert names(find_files(tmp_path, host="h")) == [("h", SEG2), ("h", LIVE)]


def test_a_directory_of_node_directories_names_each_file_by_its_node(tmp_path: Path) -> None:
    touch(tmp_path / "gpu-b", SEG1, LIVE)
    touch(tmp_path / "gpu-a", LIVE)
    touch(tmp_path / ".hidden", LIVE)
    assert names(find_files(tmp_path, host="h")) == [("gpu-a", LIVE), ("gpu-b", SEG1), ("gpu-b", LIVE)]


def test_the_live_file_path_means_its_whole_dataset(tmp_path: Path) -> None:
    touch(tmp_path, SEG1, LIVE, "other.jsonl", "other-20261020T130000Z.jsonl.zst")
    assert names(find_files(tmp_path / LIVE, host="h")) == [("h", SEG1), ("h", LIVE)]


def test_segments_are_read_while_the_live_file_is_missing(tmp_path: Path) -> None:
    touch(tmp_path, SEG1)
    assert names(find_files(tmp_path / LIVE, host="h")) == [("h", SEG1)]


def test_a_single_file_is_read_alone(tmp_path: Path) -> None:
    touch(tmp_path, "export.jsonl", SEG1)
    assert names(find_files(tmp_path / "export.jsonl", host="h")) == [("h", "export.jsonl")]
    assert names(find_files(tmp_path / SEG1, host="h")) == [("h", SEG1)]


def test_a_missing_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        find_files(tmp_path / "nope" / LIVE)


def test_a_directory_without_dataset_files_is_a_user_error(tmp_path: Path) -> None:
    touch(tmp_path / "node", "readme.txt")
    with pytest.raises(UserError, match="holds no dataset files"):
        find_files(tmp_path)


def test_the_host_name_is_the_default_node(tmp_path: Path) -> None:
    import socket

    touch(tmp_path, LIVE)
    assert find_files(tmp_path)[0].node == socket.gethostname()


# --- lines ---------------------------------------------------------------------------------------


def collect(
    part: Part, plain_bytes: int = 1 << 18, zstd_bytes: int = 1 << 14, **options: int
) -> tuple[bytes, list[object]]:
    data, others = [], []
    for item in read_part(part, plain_bytes, zstd_bytes, **options):
        if isinstance(item, Lines):
            chunk = item.data[item.start : item.stop]
            assert chunk.endswith(b"\n")
            data.append(chunk)
        else:
            others.append(item)
    return b"".join(data), others


def plain_file(path: Path, data: bytes) -> DatasetFile:
    path.write_bytes(data)
    return DatasetFile(path, "n", False, len(data))


line_texts = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30)


@given(
    lines=line_texts,
    tail=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    block=st.integers(1, 64),
)
def test_lines_come_whole_in_order_and_a_torn_tail_is_flagged(
    lines: list[bytes], tail: bytes, block: int
) -> None:
    body = b"".join(line + b"\n" for line in lines)
    with tempfile.TemporaryDirectory() as tmp:
        got, others = collect(Part(plain_file(Path(tmp) / "f.jsonl", body + tail)), plain_bytes=block)
    assert got == body
    assert others == ([Torn(tail)] if tail.strip(b" \t\r\n") else [])


@given(lines=line_texts, cuts=st.lists(st.integers(1, 200), max_size=6), block=st.integers(1, 64))
def test_parts_of_a_plain_file_read_every_line_exactly_once(
    lines: list[bytes], cuts: list[int], block: int
) -> None:
    body = b"".join(line + b"\n" for line in lines)
    bounds = sorted({0, *(c for c in cuts if c < len(body))})
    with tempfile.TemporaryDirectory() as tmp:
        f = plain_file(Path(tmp) / "f.jsonl", body)
        stops: list[int | None] = [*bounds[1:], None]
        pieces = [
            collect(Part(f, start, stop), plain_bytes=block)[0]
            for start, stop in zip(bounds, stops, strict=True)
        ]
    assert b"".join(pieces) == body


def test_split_cuts_only_plain_files_and_puts_the_largest_first(tmp_path: Path) -> None:
    big = plain_file(tmp_path / "live.jsonl", b"x" * 250)
    zst = DatasetFile(tmp_path / SEG1, "n", True, 400)
    small = plain_file(tmp_path / "small.jsonl", b"y" * 50)
    parts = split((small, big, zst), part_bytes=100)
    assert parts[0] == Part(zst)
    assert sorted((p.start, p.stop) for p in parts if p.file == big) == [(0, 100), (100, 200), (200, None)]
    assert Part(small) in parts and len(parts) == 5


def zst(path: Path, data: bytes) -> DatasetFile:
    compressed = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)
    path.write_bytes(compressed)
    return DatasetFile(path, "n", True, len(compressed))


def numbered(count: int) -> bytes:
    return b"".join(b'{"line": %d, "pad": "%s"}\n' % (i, b"p" * (i % 50)) for i in range(count))


def test_a_zstd_segment_reads_like_its_plain_content(tmp_path: Path) -> None:
    data = numbered(20_000)
    assert collect(Part(zst(tmp_path / SEG1, data))) == (data, [])


@given(
    lengths=st.lists(st.integers(0, 90) | st.sampled_from([-1, 0, 1]).map(str), max_size=40),
    tail=st.integers(0, 90),
    max_line=st.integers(1, 40),
    room=st.integers(1, 64),
    fill=st.integers(0, 400),
)
def test_lines_too_long_are_found_inside_blocks_of_several_reads(
    lengths: list[int | str], tail: int, max_line: int, room: int, fill: int
) -> None:
    """A block of several reads' output holds lines longer than a line may be (and longer than
    each read's output): each is a `TooLong` in its place, every other line read whole. A length
    given as text is that many bytes from the longest a line may be."""
    sizes = [max_line + int(n) if isinstance(n, str) else n for n in lengths]
    data = b"".join(b"%d" % (i % 10) * n + b"\n" for i, n in enumerate(sizes)) + b"t" * tail
    with tempfile.TemporaryDirectory() as tmp:
        f = zst(Path(tmp) / SEG1, data)
        got, others = collect(Part(f), zstd_bytes=room, max_line_bytes=max_line, zstd_fill=fill)
    kept, items = model_lines(data, max_line)
    assert got == kept
    assert others == items


def test_concatenated_zstd_frames_are_all_read(tmp_path: Path) -> None:
    one, two = numbered(300), numbered(500)
    cctx = zstandard.ZstdCompressor()
    path = tmp_path / SEG1
    path.write_bytes(cctx.compress(one) + cctx.compress(two))
    assert collect(Part(DatasetFile(path, "n", True, path.stat().st_size))) == (one + two, [])


def test_a_truncated_zstd_segment_yields_its_lines_up_to_the_cut_then_damage(tmp_path: Path) -> None:
    data = numbered(40_000)
    f = zst(tmp_path / SEG1, data)
    f.path.write_bytes(f.path.read_bytes()[: f.size_bytes // 2])
    got, others = collect(Part(f))
    assert len(got) > 0 and data.startswith(got)
    assert others[-1] == Damaged("truncated zstd data (the file ends inside a frame)")


def test_a_corrupt_zstd_segment_is_reported_as_damaged(tmp_path: Path) -> None:
    f = zst(tmp_path / SEG1, numbered(40_000))
    raw = bytearray(f.path.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 32] = bytes(32)
    f.path.write_bytes(bytes(raw))
    _, others = collect(Part(f))
    assert isinstance(others[-1], Damaged) and "corrupt zstd data" in others[-1].reason


def test_a_file_that_is_not_zstd_at_all_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / SEG1
    path.write_bytes(b"this is not zstd\n")
    (damage,) = collect(Part(DatasetFile(path, "n", True, 17)))[1]
    assert isinstance(damage, Damaged) and damage.reason.startswith("corrupt zstd data (")


def test_an_empty_file_holds_no_lines_and_no_damage(tmp_path: Path) -> None:
    assert collect(Part(plain_file(tmp_path / LIVE, b""))) == (b"", [])
    assert collect(Part(zst(tmp_path / SEG1, b""))) == (b"", [])


def frames() -> tuple[bytes, set[int]]:
    """Frames of every header shape the writer and zstd -dc meet, and the offsets between them."""
    pieces = [
        zstandard.ZstdCompressor(level=3, write_checksum=True).compress(numbered(3000)),
        zstandard.ZstdCompressor(write_content_size=False).compress(numbered(50)),
        b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!",  # a skippable frame
        zstandard.ZstdCompressor(write_checksum=True).compress(b""),
        zstandard.ZstdCompressor(level=1).compress(b"a" * 200_000),  # RLE and raw blocks
    ]
    ends, at = {0}, 0
    for piece in pieces:
        at += len(piece)
        ends.add(at)
    return b"".join(pieces), ends


FRAMES, FRAME_ENDS = frames()


@given(st.integers(0, len(FRAMES)))
def test_a_zstd_file_cut_anywhere_but_between_frames_is_truncated(cut: int) -> None:
    import io

    from croft.adapters.dataset.zstd_frames import ends_on_a_frame

    assert ends_on_a_frame(io.BytesIO(FRAMES[:cut])) == (cut in FRAME_ENDS)


def test_every_cut_of_a_segment_reads_a_prefix_of_its_lines_then_damage_unless_whole(tmp_path: Path) -> None:
    data, path = numbered(2000), tmp_path / SEG1
    whole = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    for cut in [*range(0, len(whole), max(1, len(whole) // 97)), len(whole)]:
        path.write_bytes(whole[:cut])
        got, others = collect(Part(DatasetFile(path, "n", True, cut)))
        assert data.startswith(got)
        if cut == len(whole):
            assert others == [] and got == data
        elif cut == 0:  # as `zstd -t` says of an empty file
            assert others == [Damaged("truncated zstd data (the file is empty)")] and got == b""
        else:
            assert others and isinstance(others[-1], Damaged), cut


def chunkwise(data: bytes, chunk: int = 1 << 14) -> tuple[bytes, bool]:
    """What a plain decompressobj fed `chunk` bytes at a time decodes before it fails (the
    reader's old way, kept as the oracle), and whether it failed."""
    decompressor, out = zstandard.ZstdDecompressor(), []
    frame = decompressor.decompressobj()
    try:
        for at in range(0, len(data), chunk):
            piece = data[at : at + chunk]
            while piece:
                out.append(frame.decompress(piece))
                piece = frame.unused_data if frame.eof else b""
                if frame.eof:
                    frame = decompressor.decompressobj()
    except zstandard.ZstdError:
        return b"".join(out), True
    return b"".join(out), False


SEGMENT = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(numbered(60_000))


@given(at=st.integers(0, len(SEGMENT) - 1), width=st.sampled_from([1, 8, 64]))
def test_a_corrupt_segment_yields_every_line_decoded_before_the_damage(at: int, width: int) -> None:
    raw = bytearray(SEGMENT)
    raw[at : at + width] = bytes(b ^ 0x5A for b in raw[at : at + width])
    decoded, failed = chunkwise(bytes(raw))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SEG1
        path.write_bytes(bytes(raw))
        got, others = collect(Part(DatasetFile(path, "n", True, len(raw))), zstd_bytes=1 << 20)
    kept, items = model_lines(decoded)
    assert got == kept
    assert [o for o in others if not isinstance(o, Damaged)] == items
    assert any(isinstance(o, Damaged) for o in others) == failed


def model_lines(data: bytes, max_line: int = MAX_LINE_BYTES) -> tuple[bytes, list[object]]:
    """What read_part gives of `data`, the obvious way: the lines of at most `max_line` bytes
    (joined), a `TooLong` for each longer one, then the tail after the last newline as `Torn`
    (or `TooLong`) unless it is blank."""
    *lines, tail = data.split(b"\n")
    kept = b"".join(line + b"\n" for line in lines if len(line) <= max_line)
    items: list[object] = [TooLong() for line in lines if len(line) > max_line]
    if len(tail) > max_line:
        items.append(TooLong())
    elif tail.strip(b" \t\r\n"):
        items.append(Torn(tail))
    return kept, items
