"""Reading a croft dataset from Python: notebooks, simulations, one-off analyses.

A path is what `croft stats` takes: a `.jsonl` or `.jsonl.zst` file, a dataset directory
(segments in time order, then the live file), or a directory of per-node dataset directories.
Rows are `croft.domain.dataset.row.Row` values, checked strictly by croft's codec; rows come node by node
(nodes in name order), each node's in time order. Lines that are not rows, a torn last line and
damaged zstd segments are skipped; what was skipped is reported once the iteration ends, to
`on_skip` (one sentence each), or else as warnings on the `croft.dataset` logger.

Example:

    from croft import dataset

    for node, row in dataset.node_rows("research/data/nodes", container_id="33813f5d"):
        print(node, row.unix_ms, row.cgroup_usage.cpu_cores, row.workload)

    cpu = [r.usage.cpu_cores for r in dataset.rows("croft-dataset.jsonl", from_ms=1792505950473)]

A `container_id` keeps the rows of every container whose id starts with it (give the full id,
or enough digits, for one container); only lines that contain it are parsed, so filtering by
container is fast even on large datasets.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from croft.adapters.dataset.files import DatasetFile, Lines, Part, Torn, find_files, read_part
from croft.domain.dataset.codec import NotARow, row_from_dict
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TORN, SkipTally

__all__ = ["DatasetFile", "Row", "file_rows", "files", "node_rows", "rows"]

_log = logging.getLogger("croft.dataset")
_json = msgspec.json.Decoder()


def files(path: str | os.PathLike[str], host: str | None = None) -> tuple[DatasetFile, ...]:
    """The files of the dataset at `path` in reading order, each with its node (the per-node
    directory's name, or `host`, default this machine's name). Raises `croft.errors.UserError`
    when the path does not exist or holds no dataset files."""
    return find_files(Path(path), host)


def rows(
    path: str | os.PathLike[str],
    *,
    container_id: str | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    on_skip: Callable[[str], None] | None = None,
) -> Iterator[Row]:
    """The rows at `path` whose container id starts with `container_id` (when given) and whose
    `unix_ms` is within [from_ms, to_ms] (each end inclusive, open when None)."""
    for _, row in node_rows(path, container_id=container_id, from_ms=from_ms, to_ms=to_ms, on_skip=on_skip):
        yield row


def node_rows(
    path: str | os.PathLike[str],
    *,
    container_id: str | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    on_skip: Callable[[str], None] | None = None,
    host: str | None = None,
) -> Iterator[tuple[str, Row]]:
    """(node, row) for the rows that `rows` yields: the node is the name of the per-node
    directory a row was read from, or `host` (default this machine's name) for a single dataset."""
    skips = SkipTally()
    needle = container_id.encode() if container_id else None
    for dataset_file in find_files(Path(path), host):
        name = str(dataset_file.path)
        for item in read_part(Part(dataset_file)):
            if isinstance(item, Lines):
                for row in _rows_of(item, needle, skips, name):
                    if _within(row, container_id, from_ms, to_ms):
                        yield dataset_file.node, row
            elif isinstance(item, Torn):
                skips.line(name, TORN)
            else:
                skips.damaged(name, item.reason)
    for sentence in skips.report():
        (on_skip or _log.warning)(sentence)


def file_rows(dataset_file: DatasetFile, skips: SkipTally) -> Iterator[Row]:
    """The rows of one file of a dataset (one of `files()`), alone: a live file here is only
    itself. What is skipped is counted into `skips` as the other readers count it."""
    name = str(dataset_file.path)
    for item in read_part(Part(dataset_file)):
        if isinstance(item, Lines):
            yield from _rows_of(item, None, skips, name)
        elif isinstance(item, Torn):
            skips.line(name, TORN)
        else:
            skips.damaged(name, item.reason)


def _within(row: Row, container_id: str | None, from_ms: int | None, to_ms: int | None) -> bool:
    if container_id is not None and not (row.process.container_id or "").startswith(container_id):
        return False
    return (from_ms is None or row.unix_ms >= from_ms) and (to_ms is None or row.unix_ms <= to_ms)


def _rows_of(lines: Lines, needle: bytes | None, skips: SkipTally, name: str) -> Iterator[Row]:
    for line in _candidate_lines(lines, needle):
        if not line.strip():
            continue
        try:
            yield row_from_dict(_json.decode(line))
        except NotARow:
            skips.line(name, NOT_A_ROW)
        except msgspec.DecodeError:
            skips.line(name, NOT_JSON)


def _candidate_lines(lines: Lines, needle: bytes | None) -> Iterator[bytes]:
    """Every line of `lines`, or only those containing `needle`."""
    data, first, stop = lines.data, lines.start, lines.stop
    if needle is None:
        yield from data[first:stop].split(b"\n")
        return
    hit = data.find(needle, first, stop)
    while hit >= 0:
        start = max(data.rfind(b"\n", first, hit) + 1, first)
        end = data.find(b"\n", hit, stop)
        yield data[start:end]
        hit = data.find(needle, end, stop)
