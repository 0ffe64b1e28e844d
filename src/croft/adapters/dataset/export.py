"""Carrying out `croft export`: each changed dataset file read by croft's own reader (so damaged
lines are skipped and counted as `croft stats` counts them) and written as Parquet parts, one per
UTC hour; the state file rewritten atomically after each file, so an interrupted export resumes."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import attrs
import orjson

from croft.adapters.dataset.files import DatasetFile, Lines, Part, find_files, lines_of, shown
from croft.adapters.dataset.parquet import PartWriter
from croft.domain.dataset.export import (
    STATE_NAME,
    BadState,
    Exported,
    Source,
    decode_state,
    encode_state,
    hour_of,
    part_path,
    plan_export,
)
from croft.domain.dataset.lines import decode_block, last_line, view
from croft.domain.dataset.skips import SkipTally
from croft.errors import UserError

BATCH_ROWS = 20_000  # rows turned into one Arrow table at a time
_HASH_READ_BYTES = 1 << 20


@attrs.define
class Outcome:
    exported: int = 0
    unchanged: int = 0
    rows: int = 0
    parts_written: int = 0
    bytes_written: int = 0
    skips: SkipTally = attrs.field(factory=SkipTally)


def checksum(path: Path) -> str:
    """BLAKE2b-128 of the file's bytes, hex."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def run_export(
    path: Path, to: Path, *, compression: str, row_group_mb: float, progress: TextIO | None = None
) -> Outcome:
    """Export the dataset at `path` into `to`; see `croft.domain.dataset.export`. A file that
    cannot be read at all is skipped and counted as `croft stats` counts it, and exported once it
    can be read."""
    state = _load_state(to)
    dataset_files = find_files(path, None)
    by_key: dict[tuple[str, str], DatasetFile] = {}
    sources: list[Source] = []
    outcome = Outcome()
    for dataset_file in dataset_files:
        try:
            if dataset_file.problem is not None:
                raise OSError(dataset_file.problem)
            source = Source(
                node=dataset_file.node,
                name=dataset_file.path.name,
                size_bytes=dataset_file.path.stat().st_size,
                checksum=checksum(dataset_file.path),
            )
        except OSError:
            # Read as croft stats reads it, for the same skip (a FIFO, a directory, no permission).
            for _ in fast_rows(dataset_file, outcome.skips):
                pass
            continue
        by_key[source.key] = dataset_file
        sources.append(source)
    plan = plan_export(sources, state)
    outcome.unchanged = len(plan.unchanged)
    for number, source in enumerate(plan.export, 1):
        if progress is not None and progress.isatty():
            progress.write(f"\rexporting {number}/{len(plan.export)}: {source.node}/{source.name}\x1b[K")
            progress.flush()
        dataset_file = by_key[source.key]
        parts = _export_one(
            fast_rows(dataset_file, outcome.skips), source, to, compression, row_group_mb, outcome
        )
        for stale in set(plan.stale[source.key]) - set(parts):
            (to / stale).unlink(missing_ok=True)
        state[source.key] = Exported(size_bytes=source.size_bytes, checksum=source.checksum, parts=parts)
        try:
            _save_state(to, state)
        except OSError as exc:
            raise UserError(
                f"cannot write {to / STATE_NAME}: {exc.strerror}; free space or fix its permissions "
                "and run croft export again"
            ) from None
        outcome.exported += 1
    if progress is not None and progress.isatty() and plan.export:
        progress.write("\r\x1b[K")
    return outcome


def fast_rows(dataset_file: DatasetFile, skips: SkipTally) -> Iterator[Any]:
    """The rows of one file as the fast readers' structs (`views.RowSchema`, the same fields as
    `Row`), judged and counted exactly as `croft stats` judges them (`lines.decode_block`)."""
    skipped = Counter[str]()
    for item in lines_of(Part(dataset_file), skips):
        if isinstance(item, Lines):
            yield from decode_block(item.data, item.start, item.stop, skipped)
            continue
        found = last_line(view(item.line))
        if isinstance(found, str):
            skipped[found] += 1
        else:
            yield found
    for kind, count in skipped.items():
        skips.line(shown(dataset_file.path), kind, count)


def _export_one(
    rows: Iterator[Any], source: Source, to: Path, compression: str, row_group_mb: float, outcome: Outcome
) -> tuple[str, ...]:
    writers: dict[tuple[str, str], PartWriter] = {}
    batches: dict[tuple[str, str], list[Any]] = {}
    try:
        for row in rows:
            # A row that names its node (croft run --node) is that node's, wherever it was copied.
            partition = (row.node or source.node, hour_of(row.unix_ms))
            batch = batches.setdefault(partition, [])
            batch.append(row)
            if len(batch) >= BATCH_ROWS:
                _writer(writers, partition, source, to, compression, row_group_mb).add(batch)
                batches[partition] = []
        for partition, batch in batches.items():
            _writer(writers, partition, source, to, compression, row_group_mb).add(batch)
        written = []
        for partition in sorted(writers):
            writer = writers[partition]
            outcome.bytes_written += writer.close()
            outcome.rows += writer.rows
            outcome.parts_written += 1
            written.append(part_path(*partition, source.name))
        return tuple(written)
    except OSError as exc:
        for writer in writers.values():
            writer.abandon()
        raise UserError(
            f"cannot write the export in {to}: {exc.strerror}; free space or fix its permissions "
            "and run croft export again (what was exported before is kept)"
        ) from None


def _writer(
    writers: dict[tuple[str, str], PartWriter],
    partition: tuple[str, str],
    source: Source,
    to: Path,
    compression: str,
    row_group_mb: float,
) -> PartWriter:
    if partition not in writers:
        writers[partition] = PartWriter(
            to / part_path(*partition, source.name), compression=compression, row_group_mb=row_group_mb
        )
    return writers[partition]


def _load_state(to: Path) -> dict[tuple[str, str], Exported]:
    state_path = to / STATE_NAME
    for above in (to, *to.parents):
        if above.exists() and not above.is_dir():
            where = "is not a directory" if above == to else f"is inside {shown(above)}, a file"
            raise UserError(f"--to {shown(to)} {where}; give a directory for the export")
    try:
        data = state_path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"cannot read {state_path}: {exc.strerror}") from None
    try:
        return decode_state(orjson.loads(data))
    except (orjson.JSONDecodeError, BadState) as exc:
        raise UserError(
            f"{state_path} is not croft export's state ({exc}); export into an empty directory, "
            "or delete that file to export everything again"
        ) from None


def _save_state(to: Path, state: dict[tuple[str, str], Exported]) -> None:
    to.mkdir(parents=True, exist_ok=True)
    temporary = to / f".{STATE_NAME}.tmp"
    with open(temporary, "wb") as f:
        f.write(orjson.dumps(encode_state(state), option=orjson.OPT_INDENT_2))
        f.flush()
        os.fsync(f.fileno())
    temporary.replace(to / STATE_NAME)
