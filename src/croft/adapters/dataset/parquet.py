"""Dataset rows as Parquet, with pyarrow: the schema (docs/parquet.md) and the writing of one part.

The row's nesting is kept: `process`, `usage` and `cgroup_usage` are structs, `syscalls` a list of
(name, rate_per_sec) structs. `unix_ms` is a timestamp in milliseconds, UTC (int64 on disk); ids,
names and paths are dictionary-encoded strings. The partition columns `node` and `hour` live in the
directory names (hive partitioning), not in the files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from croft.domain.dataset.row import Row

_DICT = pa.dictionary(pa.int32(), pa.string())

PROCESS = pa.struct(
    [
        pa.field("comm", _DICT, nullable=False),
        pa.field("exe", _DICT, nullable=False),
        pa.field("cgroup", _DICT, nullable=False),
        pa.field("container_id", _DICT),
        pa.field("cwd", _DICT, nullable=False),
        pa.field("framework", _DICT),
    ]
)
USAGE = pa.struct(
    [
        pa.field("cpu_cores", pa.float64(), nullable=False),
        pa.field("rss_bytes", pa.int64(), nullable=False),
        pa.field("threads", pa.int64(), nullable=False),
        pa.field("ctx_voluntary_s", pa.float64(), nullable=False),
        pa.field("ctx_involuntary_s", pa.float64(), nullable=False),
        pa.field("read_bytes_s", pa.float64(), nullable=False),
        pa.field("write_bytes_s", pa.float64(), nullable=False),
        pa.field("network_rx_bytes_s", pa.float64(), nullable=False),
        pa.field("network_tx_bytes_s", pa.float64(), nullable=False),
        pa.field("runqueue_s", pa.float64(), nullable=False),
    ]
)
CGROUP_USAGE = pa.struct(
    [
        pa.field("cpu_cores", pa.float64(), nullable=False),
        pa.field("cpu_throttled_fraction", pa.float64(), nullable=False),
        pa.field("memory_bytes", pa.int64(), nullable=False),
        pa.field("oom_kills", pa.int64(), nullable=False),
        pa.field("cpu_pressure_avg10", pa.float64(), nullable=False),
        pa.field("memory_pressure_avg10", pa.float64(), nullable=False),
        pa.field("io_pressure_avg10", pa.float64(), nullable=False),
    ]
)
SYSCALL = pa.struct([pa.field("name", _DICT, nullable=False), pa.field("rate_per_sec", pa.float64())])
SCHEMA = pa.schema(
    [
        pa.field("unix_ms", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("tgid", pa.int64(), nullable=False),
        pa.field("process", PROCESS, nullable=False),
        pa.field("workload", _DICT, nullable=False),
        pa.field("ioctl_count", pa.int64()),
        pa.field("since_last_gpu_ioctl_ms", pa.int64()),
        pa.field("usage", USAGE, nullable=False),
        pa.field("cgroup_usage", CGROUP_USAGE, nullable=False),
        pa.field("syscalls", pa.list_(pa.field("element", SYSCALL, nullable=False)), nullable=False),
        pa.field("label", _DICT),
    ]
)
COMPRESSIONS = ("zstd", "snappy", "gzip", "lz4", "brotli", "none")


def _strings(values: Sequence[str | None]) -> pa.DictionaryArray:
    return pa.array(values, pa.string()).dictionary_encode()


def _struct(struct_type: pa.StructType, columns: dict[str, pa.Array]) -> pa.StructArray:
    return pa.StructArray.from_arrays(
        [columns[struct_type.field(i).name] for i in range(struct_type.num_fields)],
        fields=[struct_type.field(i) for i in range(struct_type.num_fields)],
    )


def _floats(rows: Sequence[Any], attr: str) -> pa.Array:
    return pa.array([getattr(r, attr) for r in rows], pa.float64())


def _ints(rows: Sequence[Any], attr: str) -> pa.Array:
    return pa.array([getattr(r, attr) for r in rows], pa.int64())


def table_of(rows: Sequence[Row]) -> pa.Table:
    """The rows as one Arrow table of `SCHEMA`, in the order given."""
    procs = [r.process for r in rows]
    usages = [r.usage for r in rows]
    cgroups = [r.cgroup_usage for r in rows]
    process = _struct(
        PROCESS,
        {name: _strings([getattr(p, name) for p in procs]) for name in PROCESS.names},
    )
    usage = _struct(
        USAGE,
        {
            f.name: (_ints if pa.types.is_integer(f.type) else _floats)(usages, f.name)
            for f in (USAGE.field(i) for i in range(USAGE.num_fields))
        },
    )
    cgroup_usage = _struct(
        CGROUP_USAGE,
        {
            f.name: (_ints if pa.types.is_integer(f.type) else _floats)(cgroups, f.name)
            for f in (CGROUP_USAGE.field(i) for i in range(CGROUP_USAGE.num_fields))
        },
    )
    offsets = [0]
    names: list[str] = []
    rates: list[float] = []
    for row in rows:
        for call in row.syscalls:
            names.append(call.name)
            rates.append(call.rate_per_sec)
        offsets.append(len(names))
    calls = pa.StructArray.from_arrays(
        [_strings(names), pa.array(rates, pa.float64())],
        fields=[SYSCALL.field(0), SYSCALL.field(1)],
    )
    syscalls = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), calls).cast(
        SCHEMA.field("syscalls").type
    )
    columns = [
        pa.array([r.unix_ms for r in rows], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        pa.array([r.tgid for r in rows], pa.int64()),
        process,
        _strings([r.workload for r in rows]),
        pa.array([r.ioctl_count for r in rows], pa.int64()),
        pa.array([r.since_last_gpu_ioctl_ms for r in rows], pa.int64()),
        usage,
        cgroup_usage,
        syscalls,
        _strings([r.label for r in rows]),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


class PartWriter:
    """One Parquet part written atomically: rows come in batches (`add`), are kept as compact
    Arrow tables until about `row_group_mb` MB have gathered, then written as one row group;
    `close` fsyncs the hidden temporary and renames it to `path`. Nothing is ever visible under
    `path` but a whole file."""

    def __init__(self, path: Path, *, compression: str, row_group_mb: float) -> None:
        self.path = path
        self._temporary = path.with_name(f".{path.name}.tmp")
        self._compression = None if compression == "none" else compression
        self._group_bytes = int(row_group_mb * (1 << 20))
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._writer: pq.ParquetWriter | None = None
        self.rows = 0

    def add(self, rows: Sequence[Row]) -> None:
        if not rows:
            return
        table = table_of(rows)
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        self.rows += len(rows)
        if self._pending_bytes >= self._group_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(
                self._temporary, SCHEMA, compression=self._compression, use_dictionary=True
            )
        table = pa.concat_tables(self._pending)
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._pending, self._pending_bytes = [], 0

    def close(self) -> int:
        """Finish the part; returns its size in bytes."""
        self._flush()
        if self._writer is None:  # no rows: an empty part still says "this hour was exported"
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self._temporary, SCHEMA, compression=self._compression)
        self._writer.close()
        with open(self._temporary, "rb") as written:
            os.fsync(written.fileno())
        self._temporary.replace(self.path)
        return self.path.stat().st_size

    def abandon(self) -> None:
        """Drop the temporary after a failure."""
        if self._writer is not None:
            self._writer.close()
        self._temporary.unlink(missing_ok=True)
