"""Record and replay traces: the raw snapshots of every poll (`croft.domain.collector.snapshot.Poll`).

On disk (`--record DIR`): one file per run, `DIR/croft-trace-<unix_ms of its first poll>.jsonl.zst`.
It is zstd-compressed JSON lines in the format of `croft.domain.collector.trace` (a header line, then
one line per poll). Every poll is flushed as its own zstd frame, so a recorder killed mid-run leaves
a file that replays up to its last whole poll. `zstd -dc FILE | head` shows it.

Replay (`--replay DIR`) reads every `*.jsonl.zst` in DIR in name order (a single file may be given
too); each file starts a fresh run, so the first poll of each has no previous poll.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import zstandard

from croft.domain.collector.snapshot import Poll
from croft.domain.collector.trace import (
    TraceError,
    check_header,
    header,
    header_node,
    poll_from_json,
    poll_to_json,
)

SUFFIX = ".jsonl.zst"


class TraceRecorder:
    """Appends polls to a new trace file in `directory` (created if missing); `watch` is the
    `--watch` value, kept in the header so a replay selects the same processes; `node` the node
    recorded on, kept there so a replay's rows name it."""

    def __init__(self, directory: Path, watch: str = "", node: str | None = None) -> None:
        self._watch = watch
        self._node = node
        directory.mkdir(parents=True, exist_ok=True)
        self._directory = directory
        self._file: io.BufferedWriter | None = None
        self._writer: zstandard.ZstdCompressionWriter | None = None
        self.path: Path | None = None

    def record(self, poll: Poll) -> None:
        """Write `poll` as one frame, flushed to the file."""
        if self._writer is None:
            self.path = self._directory / f"croft-trace-{poll.at.unix_ms}{SUFFIX}"
            self._file = self.path.open("xb")
            self._writer = zstandard.ZstdCompressor(level=3).stream_writer(self._file, closefd=False)
            self._writer.write(header(self._watch, self._node))
        self._writer.write(poll_to_json(poll))
        self._writer.flush(zstandard.FLUSH_FRAME)
        assert self._file is not None
        self._file.flush()

    def close(self) -> None:
        """Close the file; every poll is already a complete, flushed frame."""
        self._writer = None
        if self._file is not None:
            self._file.close()


def trace_files(location: Path) -> list[Path]:
    """The trace files at `location` (a file, or the `*.jsonl.zst` of a directory), in name order."""
    if location.is_file():
        return [location]
    return sorted(location.glob(f"*{SUFFIX}"))


def recorded_watch(path: Path) -> str:
    """The `--watch` a trace file was recorded with."""
    with path.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        try:
            return check_header(io.BufferedReader(reader).readline())
        except zstandard.ZstdError as exc:
            raise TraceError(f"{path} is not zstd-compressed") from exc


def recorded_node(path: Path) -> str | None:
    """The node a trace file was recorded on; None when its header names none."""
    with path.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        try:
            return header_node(io.BufferedReader(reader).readline())
        except zstandard.ZstdError as exc:
            raise TraceError(f"{path} is not zstd-compressed") from exc


def read_trace(path: Path) -> Iterator[Poll]:
    """The polls of one trace file in order. A torn last line (a recorder killed mid-write) ends
    the file; any other bad line raises `TraceError` naming the file and line."""
    with path.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        lines = io.BufferedReader(reader)
        try:
            first = lines.readline()
            check_header(first)
            for number, line in enumerate(lines, start=2):
                if not line.endswith(b"\n"):
                    return
                try:
                    yield poll_from_json(line)
                except TraceError as exc:
                    raise TraceError(f"{path}:{number}: {exc}") from exc
        except zstandard.ZstdError:
            return
