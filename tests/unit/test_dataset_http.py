"""The dataset endpoint's pure decisions: served names, Range, the index codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.dataset.http import (
    BadIndex,
    ByteRange,
    Index,
    IndexEntry,
    Unsatisfiable,
    decode_index,
    encode_index,
    is_safe_name,
    is_served,
    make_index,
    parse_range,
)
from croft.domain.dataset.rotation import Naming

NAMING = Naming.for_live("croft-dataset.jsonl")


@pytest.mark.parametrize(
    "name",
    ["croft-dataset.jsonl", "croft-dataset-20261020T130000Z.jsonl.zst",
     "croft-dataset-20261020T130000Z.jsonl", "croft-dataset-20261020T130000Z_001.jsonl.zst"],
)  # fmt: skip
def test_the_dataset_files_are_served(name: str) -> None:
    assert is_served(name, NAMING)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../croft-dataset.jsonl", "/etc/passwd", "croft-dataset.jsonl/", "a/croft-dataset.jsonl",
     ".croft-dataset-20261020T130000Z.jsonl.zst.tmp", "croft-dataset.jsonl\x00", "other.jsonl",
     "croft-dataset-20261020T130000Z.saved.jsonl", "croft-dataset-20261340T130000Z.jsonl.zst",
     "croft-dataset.jsonl.zst", "ｃroft-dataset.jsonl", "-rf", "pids.json"],
)  # fmt: skip
def test_nothing_else_is_served(name: str) -> None:
    assert not is_served(name, NAMING)


@given(st.text(max_size=40))
def test_a_safe_name_is_one_path_component(name: str) -> None:
    if is_safe_name(name):
        assert "/" not in name and "\x00" not in name and name not in (".", "..") and not name.startswith(".")
        assert name.isascii()


def _reference(header: str, size: int) -> tuple[int, int] | str | None:
    """RFC 9110's single byte range, spelled out."""
    spec = header.removeprefix("bytes=")
    first, _, last = spec.partition("-")
    if first == "":
        n = int(last)
        return "416" if n == 0 or size == 0 else (max(size - n, 0), size - 1)
    a = int(first)
    if last and int(last) < a:
        return None
    return "416" if a >= size else (a, min(int(last), size - 1) if last else size - 1)


@given(
    size=st.integers(0, 10_000),
    first=st.one_of(st.none(), st.integers(0, 12_000)),
    last=st.one_of(st.none(), st.integers(0, 12_000)),
)
def test_ranges_are_read_as_rfc_9110_says(size: int, first: int | None, last: int | None) -> None:
    header = f"bytes={'' if first is None else first}-{'' if last is None else last}"
    got = parse_range(header, size)
    if first is None and last is None:
        assert got is None
        return
    want = _reference(header, size)
    if want is None:
        assert got is None
    elif want == "416":
        assert isinstance(got, Unsatisfiable)
    else:
        assert got == ByteRange(*want)  # type: ignore[misc]
        assert isinstance(got, ByteRange) and 0 <= got.start <= got.end < size


@pytest.mark.parametrize("header", [None, "items=0-1", "bytes=0-1,5-6", "bytes=a-b", "bytes 0-1", "bytes=-"])
def test_ranges_a_server_may_ignore_mean_the_whole_file(header: str | None) -> None:
    assert parse_range(header, 100) is None


@pytest.mark.parametrize(
    ("header", "size"),
    [("bytes=" + "9" * 5000 + "-", 100), ("bytes=" + "1" * 4301 + "-" + "2" * 4301, 100),
     ("bytes=" + "0" * 5000 + "5-", 3)],
)  # fmt: skip
def test_offsets_of_thousands_of_digits_are_past_any_file(header: str, size: int) -> None:
    assert isinstance(parse_range(header, size), Unsatisfiable)


def test_huge_ends_and_suffixes_clip_to_the_file() -> None:
    assert parse_range("bytes=5-" + "9" * 5000, 100) == ByteRange(5, 99)
    assert parse_range("bytes=-" + "9" * 5000, 100) == ByteRange(0, 99)
    assert parse_range("bytes=" + "0" * 5000 + "7-8", 100) == ByteRange(7, 8)


entries = st.builds(
    IndexEntry,
    st.sampled_from(["croft-dataset.jsonl", "croft-dataset-20261020T130000Z.jsonl.zst", "x.txt", ".hidden"]),
    st.integers(0, 1 << 40),
    st.integers(0, 1 << 45),
)


@given(st.lists(entries, max_size=6, unique_by=lambda e: e.name))
def test_the_index_round_trips_and_lists_only_served_files(listing: list[IndexEntry]) -> None:
    index = make_index("croft-dataset.jsonl", listing)
    assert decode_index(encode_index(index)) == index
    assert all(is_served(e.name, NAMING) for e in index.files)
    assert [e.name for e in index.files] == sorted(e.name for e in listing if is_served(e.name, NAMING))


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b'{"version": 2, "live": "x.jsonl", "files": []}', b'{"version": 1, "files": []}',
     b'{"version": 1, "live": "x.jsonl", "files": [{"name": 1, "size_bytes": 1, "mtime_ms": 1}]}',
     b'{"version": 1, "live": "x.jsonl", "files": [{"name": "a", "size_bytes": -1, "mtime_ms": 1}]}',
     b'{"version": 1, "live": "x.jsonl", "files": [{"name": "a", "size_bytes": 1.5, "mtime_ms": 1}]}',
     b'{"version": 1, "live": "x.jsonl", "files": ["a"]}'],
)  # fmt: skip
def test_a_bad_index_is_refused(data: bytes) -> None:
    with pytest.raises(BadIndex):
        decode_index(data)


def test_an_index_keeps_hostile_names_for_the_planner_to_refuse() -> None:
    data = (
        b'{"version": 1, "live": "croft-dataset.jsonl", '
        b'"files": [{"name": "../x", "size_bytes": 1, "mtime_ms": 1}]}'
    )
    assert decode_index(data) == Index("croft-dataset.jsonl", (IndexEntry("../x", 1, 1),))
