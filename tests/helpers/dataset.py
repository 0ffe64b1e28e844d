"""Reading a dataset directory back in tests, with zstandard and the codec only (not with croft's
readers, which the tests check): segments in name order, then the live file; and numbered polls to
write."""

from __future__ import annotations

from pathlib import Path

import zstandard

from croft.domain.dataset import codec
from croft.domain.dataset.rotation import Naming
from croft.domain.dataset.row import Row
from tests.helpers.rows import seq_row

LIVE = "croft-dataset.jsonl"


def dataset_files(directory: Path, live_name: str = LIVE) -> list[Path]:
    """What a reader reads: every segment in name order, then the live file. Temporaries (hidden
    names) are not part of the dataset. A segment there both plain and compressed (a background
    compression was just renamed into place) is listed once, plain, as croft's readers take it."""
    naming = Naming.for_live(live_name)
    names = {p.name for p in directory.iterdir()}
    segments = sorted(
        (
            directory / name
            for name in names
            if (found := naming.parse(name))
            and found[1] != "temporary"
            and not (name.endswith(".zst") and name.removesuffix(".zst") in names)
        ),
        key=lambda p: p.name,
    )
    live = directory / live_name
    return [*segments, live] if live.exists() else segments


def file_bytes(path: Path) -> bytes:
    """A dataset file's rows as bytes, decompressed. A plain segment that a writer's background
    compression replaced since the listing is read from its compressed copy."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if path.name.endswith(".zst"):
            raise
        path = path.with_name(path.name + ".zst")
        data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def file_lines(path: Path) -> list[bytes]:
    """The whole lines of one file; a torn last line (no newline) is skipped, as readers do."""
    lines = file_bytes(path).split(b"\n")
    return lines[:-1]  # the last piece is b"" after a final newline, or a torn line


def read_rows(directory: Path, live_name: str = LIVE) -> list[Row]:
    """Every row of the dataset in reading order; a line that is not a row fails the test."""
    return [
        codec.decode_row(line) for path in dataset_files(directory, live_name) for line in file_lines(path)
    ]


def poll_lines(first_seq: int, count: int, unix_ms: int) -> bytes:
    """`count` encoded rows numbered from `first_seq`, as one poll hands them to the sink."""
    return b"".join(codec.encode_row(seq_row(first_seq + i, unix_ms)) for i in range(count))
