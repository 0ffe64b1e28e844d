"""Carrying out `croft export`: each changed dataset file read by croft's own reader (so damaged
lines are skipped and counted as `croft stats` counts them) and written as Parquet parts, one per
UTC hour; the state file rewritten atomically after each file, so an interrupted export resumes."""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from croft.adapters.dataset.files import (
    DatasetFile,
    Part,
    find_files,
    row_batches,
    shown,
    work_bytes,
)
from croft.adapters.dataset.scan import INLINE_BYTES, default_workers
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
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import SkipTally
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.adapters.dataset.parquet import PartWriter

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
    path: Path,
    to: Path,
    *,
    compression: str,
    row_group_mb: float,
    progress: Callable[[int, int, str], None] | None = None,
    workers: int | None = None,
    inline_bytes: int = INLINE_BYTES,
) -> Outcome:
    """Export the dataset at `path` into `to`; see `croft.domain.dataset.export`. A file that
    cannot be read at all is skipped and counted as `croft stats` counts it, and exported once it
    can be read. The files to export are shared by a pool of `workers` processes (default: one per
    CPU) unless they hold fewer than `inline_bytes` bytes of lines, or one worker is asked for.
    `progress(exported, to_export, name)` is told after each file."""
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
            for _ in file_rows(dataset_file, outcome.skips):
                pass
            continue
        by_key[source.key] = dataset_file
        sources.append(source)
    plan = plan_export(sources, state)
    outcome.unchanged = len(plan.unchanged)
    # Largest first, so that a pool's workers finish together.
    jobs = sorted(plan.export, key=lambda s: -work_bytes(Part(by_key[s.key])))
    task = functools.partial(export_source, to=to, compression=compression, row_group_mb=row_group_mb)
    failure: BaseException | None = None
    for source, done in _carry_out(task, [(by_key[s.key], s) for s in jobs], workers, inline_bytes):
        if isinstance(done, BaseException):
            failure = failure or done
            continue
        for stale in set(plan.stale[source.key]) - set(done.parts):
            (to / stale).unlink(missing_ok=True)
        state[source.key] = Exported(size_bytes=source.size_bytes, checksum=source.checksum, parts=done.parts)
        try:
            _save_state(to, state)
        except OSError as exc:
            raise UserError(
                f"cannot write {to / STATE_NAME}: {exc.strerror}; free space or fix its permissions "
                "and run croft export again"
            ) from None
        outcome.exported += 1
        outcome.rows += done.rows
        outcome.parts_written += len(done.parts)
        outcome.bytes_written += done.bytes_written
        outcome.skips.merge(done.skips)
        if progress is not None:
            progress(outcome.exported, len(jobs), f"{source.node}/{source.name}")
    if isinstance(failure, BrokenProcessPool):
        raise UserError(
            "a croft export worker process died (out of memory?); run croft export again, what was "
            "exported is kept"
        ) from None
    if failure is not None:
        raise failure
    return outcome


@attrs.frozen
class SourceDone:
    """What exporting one source file wrote: its parts (relative to the export), rows and bytes,
    and the lines and damage skipped."""

    parts: tuple[str, ...]
    rows: int
    bytes_written: int
    skips: SkipTally


def export_source(
    job: tuple[DatasetFile, Source], *, to: Path, compression: str, row_group_mb: float
) -> SourceDone:
    """Read one source file with croft's reader and write its parts (the task of a pool worker)."""
    dataset_file, source = job
    skips = SkipTally()
    counts = Outcome()
    parts = _export_one(file_rows(dataset_file, skips), source, to, compression, row_group_mb, counts)
    return SourceDone(parts=parts, rows=counts.rows, bytes_written=counts.bytes_written, skips=skips)


def _carry_out(
    task: Callable[[tuple[DatasetFile, Source]], SourceDone],
    jobs: list[tuple[DatasetFile, Source]],
    workers: int | None,
    inline_bytes: int,
) -> Iterator[tuple[Source, SourceDone | BaseException]]:
    """Each job's source with what `task` made of it, in this process or on a pool, in the order
    they finish. A job that failed comes with its exception; on a pool, the jobs not yet started
    are then dropped and those running are waited for, so every part written is reported."""
    workers = min(workers or default_workers(), len(jobs))
    if workers <= 1 or sum(work_bytes(Part(f)) for f, _ in jobs) < inline_bytes:
        for job in jobs:
            yield job[1], task(job)  # an error is raised at once: nothing else is running
        return
    # fork: workers start at once and share what is imported (the parts are written by pyarrow,
    # imported by the workers only). Once pyarrow is imported it runs threads, which a forked child
    # would not have: spawn then (a program that embeds croft export).
    start = "spawn" if "pyarrow" in sys.modules else "fork"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(start)) as pool:
        futures = {pool.submit(task, job): job[1] for job in jobs}
        for future in as_completed(futures):
            if future.cancelled():
                continue
            error = future.exception()
            if error is not None:
                for other in futures:
                    other.cancel()
                yield futures[future], error
            else:
                yield futures[future], future.result()


def file_rows(dataset_file: DatasetFile, skips: SkipTally) -> Iterator[Row]:
    """The rows of one file, judged and counted exactly as `croft stats` judges them."""
    for rows in row_batches(Part(dataset_file), skips):
        yield from rows


def _export_one(
    rows: Iterator[Any], source: Source, to: Path, compression: str, row_group_mb: float, outcome: Outcome
) -> tuple[str, ...]:
    writers: dict[tuple[str, str], PartWriter] = {}  # pyarrow imported only when rows are written
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
        from croft.adapters.dataset.parquet import PartWriter

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
        return decode_state(msgspec.json.decode(data))
    except (msgspec.DecodeError, BadState) as exc:
        raise UserError(
            f"{state_path} is not croft export's state ({exc}); export into an empty directory, "
            "or delete that file to export everything again"
        ) from None


def _save_state(to: Path, state: dict[tuple[str, str], Exported]) -> None:
    to.mkdir(parents=True, exist_ok=True)
    temporary = to / f".{STATE_NAME}.tmp"
    with open(temporary, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(encode_state(state)), indent=2))
        f.flush()
        os.fsync(f.fileno())
    temporary.replace(to / STATE_NAME)
