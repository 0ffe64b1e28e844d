"""Reading a dataset directory back in tests, with zstandard and the codec only (the readers of
croft stats/profile are built elsewhere): segments in name order, then the live file."""

from __future__ import annotations

from pathlib import Path

import zstandard

from croft.domain.dataset import codec
from croft.domain.dataset.rotation import Naming
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage

LIVE = "croft-dataset.jsonl"


def dataset_files(directory: Path, live_name: str = LIVE) -> list[Path]:
    """What a reader reads: every plain and compressed segment in name order, then the live file.
    Temporaries (hidden names) are not part of the dataset."""
    naming = Naming.for_live(live_name)
    segments = sorted(
        (p for p in directory.iterdir() if (found := naming.parse(p.name)) and found[1] != "temporary"),
        key=lambda p: p.name,
    )
    live = directory / live_name
    return [*segments, live] if live.exists() else segments


def file_lines(path: Path) -> list[bytes]:
    """The whole lines of one file; a torn last line (no newline) is skipped, as readers do."""
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    lines = data.split(b"\n")
    return lines[:-1]  # the last piece is b"" after a final newline, or a torn line


def read_rows(directory: Path, live_name: str = LIVE) -> list[Row]:
    """Every row of the dataset in reading order; a line that is not a row fails the test."""
    return [
        codec.decode_row(line) for path in dataset_files(directory, live_name) for line in file_lines(path)
    ]


def make_row(seq: int, unix_ms: int, *, container: int = 0) -> Row:
    """A small, valid row whose `tgid` carries a sequence number for exactly-once checks."""
    return Row(
        unix_ms=unix_ms,
        tgid=seq,
        process=Process(
            comm="python",
            exe="/usr/bin/python3",
            cgroup=f"/kubepods/pod{container}",
            container_id=f"{container:064x}",
            cwd="/workspace",
            framework="pytorch",
        ),
        workload="no-gpu",
        usage=Usage(0.5, 1 << 30, 8, 1.0, 0.0, 0.0, 512.0, 10.0, 20.0, 0.001),
        cgroup_usage=CgroupUsage(0.5, 0.0, 1 << 30, 0, 0.0, 0.0, 0.0),
        syscalls=(SyscallRate("futex", 100.0), SyscallRate("read", 3.5)),
    )


def poll_lines(first_seq: int, count: int, unix_ms: int) -> bytes:
    """`count` encoded rows numbered from `first_seq`, as one poll hands them to the sink."""
    return b"".join(codec.encode_row(make_row(first_seq + i, unix_ms)) for i in range(count))
