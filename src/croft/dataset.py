"""Reading a croft dataset from Python: notebooks, simulations, one-off analyses.

A path is what `croft stats` takes: a `.jsonl` or `.jsonl.zst` file, a dataset directory
(segments in time order, then the live file), or a directory of per-node dataset directories.
Rows are `croft.domain.dataset.row.Row` values, checked strictly by croft's codec, exactly as
`croft stats` counts them (`croft.domain.dataset.lines`); rows come node by node (nodes in name
order), each node's in time order. Lines that are not rows, a torn last line, files that cannot be
read and damaged zstd segments are skipped; what was skipped is reported once the iteration ends,
to `on_skip` (one sentence each), or else as warnings on the `croft.dataset` logger.

Example:

    from croft import dataset

    for node, row in dataset.node_rows("fixtures/datasets/nodes", container_id="2c006497"):
        print(node, row.unix_ms, row.cgroup_usage.cpu_cores, row.workload)

    cpu = [r.usage.cpu_cores for r in dataset.rows("croft-dataset.jsonl", from_ms=1792505950473)]

A `container_id` keeps the rows of every container whose id starts with it (give the full id,
or enough digits, for one container); only lines that contain it are parsed, so filtering by
container is fast even on large datasets (and only those lines are counted when skipped, as by
`croft profile`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from croft.adapters.dataset.files import DatasetFile, Lines, Part, find_files, lines_of, shown
from croft.domain.dataset.lines import last_line, lines_with, verdict
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import SkipTally

__all__ = ["DatasetFile", "Row", "file_rows", "files", "node_rows", "rows"]

_log = logging.getLogger("croft.dataset")


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
    """(node, row) for the rows that `rows` yields: the node is the one the row names (its `node`
    key, written by collectors that record it); for an older row, the name of the per-node
    directory it was read from, or `host` (default this machine's name) for a single dataset."""
    skips = SkipTally()
    needle = container_id.encode() if container_id else None
    for dataset_file in find_files(Path(path), host):
        for row in _rows_of(dataset_file, skips, needle):
            if _within(row, container_id, from_ms, to_ms):
                yield row.node or dataset_file.node, row
    for sentence in skips.report():
        (on_skip or _log.warning)(sentence)


def file_rows(dataset_file: DatasetFile, skips: SkipTally) -> Iterator[Row]:
    """The rows of one file of a dataset (one of `files()`), alone: a live file here is only
    itself. What is skipped is counted into `skips` as the other readers count it."""
    return _rows_of(dataset_file, skips, None)


def _rows_of(dataset_file: DatasetFile, skips: SkipTally, needle: bytes | None) -> Iterator[Row]:
    """The rows of one file, or only of its lines that contain `needle` (only those are judged);
    what is skipped is counted into `skips`."""
    skipped = Counter[str]()
    for item in lines_of(Part(dataset_file), skips):
        judged: Iterator[Row | str | None]
        if isinstance(item, Lines):
            judged = map(verdict, _lines(item, needle))
        elif needle is None or needle in item.line:
            judged = iter([last_line(verdict(item.line))])
        else:
            continue
        for found in judged:
            if isinstance(found, str):
                skipped[found] += 1
            elif found is not None:
                yield found
    for kind, count in skipped.items():
        skips.line(shown(dataset_file.path), kind, count)


def _within(row: Row, container_id: str | None, from_ms: int | None, to_ms: int | None) -> bool:
    if container_id is not None and not (row.process.container_id or "").startswith(container_id):
        return False
    return (from_ms is None or row.unix_ms >= from_ms) and (to_ms is None or row.unix_ms <= to_ms)


def _lines(lines: Lines, needle: bytes | None) -> Iterator[bytes]:
    """Every line of `lines`, or only those containing `needle`."""
    if needle is None:
        return iter(lines.data[lines.start : lines.stop - 1].split(b"\n"))
    return lines_with(lines.data, lines.start, lines.stop, needle)
