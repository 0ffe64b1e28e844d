"""Dataset rows as Parquet, with pyarrow: the schema (docs/parquet.md) and the writing of one part.

The row's nesting is kept: `process`, `usage` and `cgroup_usage` are structs, `pod` a nullable
struct of the Kubernetes names, `syscalls` a list of (name, rate_per_sec) structs, `short_lived` a
nullable struct of `processes` and such a list, `ingress` a nullable struct of its numbers, `gpus` a
nullable list of GPU structs (each with a nullable list of (name, busy_percent) engine structs).
`unix_ms` stays the row's integer (so `WHERE unix_ms > 1792506000000` compares numbers) and `time`
is the same instant as a UTC millisecond timestamp; ids, names and paths are dictionary-encoded
strings. The partition columns `node` and `hour` live in the directory names (hive partitioning),
not in the files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from operator import attrgetter
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
        pa.field("cmdline", _DICT),
        pa.field("cgroup", _DICT, nullable=False),
        pa.field("container_id", _DICT),
        pa.field("cwd", _DICT, nullable=False),
        pa.field("framework", _DICT),
    ]
)
POD = pa.struct(
    [
        pa.field("namespace", _DICT, nullable=False),
        pa.field("name", _DICT, nullable=False),
        pa.field("container", _DICT),
    ]
)
_POD_PLAIN = pa.struct([("namespace", pa.string()), ("name", pa.string()), ("container", pa.string())])
USAGE = pa.struct(
    [
        pa.field("cpu_cores", pa.float64(), nullable=False),
        pa.field("rss_bytes", pa.int64(), nullable=False),
        pa.field("threads", pa.int64(), nullable=False),
        pa.field("ctx_voluntary_s", pa.float64(), nullable=False),
        pa.field("ctx_involuntary_s", pa.float64(), nullable=False),
        pa.field("read_bytes_s", pa.float64()),
        pa.field("write_bytes_s", pa.float64()),
        pa.field("network_rx_bytes_s", pa.float64()),
        pa.field("network_tx_bytes_s", pa.float64()),
        pa.field("runqueue_s", pa.float64()),
    ]
)
CGROUP_USAGE = pa.struct(
    [
        pa.field("cpu_cores", pa.float64()),
        pa.field("cpu_throttled_fraction", pa.float64()),
        pa.field("memory_bytes", pa.int64()),
        pa.field("oom_kills", pa.int64()),
        pa.field("cpu_pressure_avg10", pa.float64()),
        pa.field("memory_pressure_avg10", pa.float64()),
        pa.field("io_pressure_avg10", pa.float64()),
    ]
)
SYSCALL = pa.struct([pa.field("name", _DICT, nullable=False), pa.field("rate_per_sec", pa.float64())])
SYSCALLS = pa.list_(pa.field("element", SYSCALL, nullable=False))
SHORT_LIVED = pa.struct(
    [pa.field("processes", pa.int64(), nullable=False), pa.field("syscalls", SYSCALLS, nullable=False)]
)
# The same shape with plain strings: pyarrow builds it from Python values, then casts it.
_SHORT_LIVED_PLAIN = pa.struct(
    [
        ("processes", pa.int64()),
        ("syscalls", pa.list_(pa.struct([("name", pa.string()), ("rate_per_sec", pa.float64())]))),
    ]
)
INGRESS = pa.struct(
    [
        pa.field("tcp_passive_opens_s", pa.float64(), nullable=False),
        pa.field("tcp_in_segs_s", pa.float64(), nullable=False),
        pa.field("rx_packets_s", pa.float64(), nullable=False),
        pa.field("rx_bytes_s", pa.float64(), nullable=False),
        pa.field("listen_drops_s", pa.float64(), nullable=False),
        pa.field("listen_backlog", pa.int64(), nullable=False),
        pa.field("unread_bytes", pa.int64(), nullable=False),
        pa.field("tcp_data_segments_s", pa.float64()),
        pa.field("tcp_connections_s", pa.float64()),
    ]
)
GPU_ENGINE = pa.struct(
    [pa.field("name", _DICT, nullable=False), pa.field("busy_percent", pa.float64(), nullable=False)]
)
GPU = pa.struct(
    [
        pa.field("index", pa.int64(), nullable=False),
        pa.field("uuid", _DICT),
        pa.field("gpu_instance_id", pa.int64()),
        pa.field("compute_instance_id", pa.int64()),
        pa.field("driver", _DICT),
        pa.field("pci", _DICT),
        pa.field("memory_bytes", pa.int64()),
        pa.field("sm_percent", pa.float64()),
        pa.field("memory_bandwidth_percent", pa.float64()),
        pa.field("encoder_percent", pa.float64()),
        pa.field("decoder_percent", pa.float64()),
        pa.field("engines", pa.list_(pa.field("element", GPU_ENGINE, nullable=False))),
    ]
)
GPUS = pa.list_(pa.field("element", GPU, nullable=False))
# The same shape with plain strings: pyarrow builds it from Python values, then casts it.
_GPUS_PLAIN = pa.list_(
    pa.struct(
        [
            (f.name, pa.string())
            if pa.types.is_dictionary(f.type)
            else (f.name, pa.list_(pa.struct([("name", pa.string()), ("busy_percent", pa.float64())])))
            if f.name == "engines"
            else (f.name, f.type)
            for f in GPU
        ]
    )
)
SCHEMA = pa.schema(
    [
        pa.field("unix_ms", pa.int64(), nullable=False),
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("tgid", pa.int64(), nullable=False),
        pa.field("process", PROCESS, nullable=False),
        pa.field("pod", POD),
        pa.field("workload", _DICT, nullable=False),
        pa.field("ioctl_count", pa.int64()),
        pa.field("since_last_gpu_ioctl_ms", pa.int64()),
        pa.field("usage", USAGE, nullable=False),
        pa.field("cgroup_usage", CGROUP_USAGE, nullable=False),
        pa.field("syscalls", SYSCALLS, nullable=False),
        pa.field("short_lived", SHORT_LIVED),
        pa.field("ingress", INGRESS),
        pa.field("gpus", GPUS),
        pa.field("label", _DICT),
    ]
)
COMPRESSIONS = ("zstd", "snappy", "gzip", "lz4", "brotli", "none")


def _strings(values: Sequence[str | None]) -> pa.DictionaryArray:
    return pa.array(values, pa.string()).dictionary_encode()


def _columns(objects: Sequence[Any], struct_type: pa.StructType) -> list[pa.Array]:
    """The fields of `struct_type` read from each object's attributes of the same names, one Arrow
    array per field (map and attrgetter: no Python-level loop per value)."""
    fields = [struct_type.field(i) for i in range(struct_type.num_fields)]
    if not objects:
        return [pa.array([], f.type) for f in fields]
    columns = [list(map(attrgetter(f.name), objects)) for f in fields]
    return [
        _strings(values) if pa.types.is_dictionary(f.type) else pa.array(values, f.type)
        for f, values in zip(fields, columns, strict=True)
    ]


def _struct(objects: Sequence[Any], struct_type: pa.StructType) -> pa.StructArray:
    return pa.StructArray.from_arrays(
        _columns(objects, struct_type), fields=[struct_type.field(i) for i in range(struct_type.num_fields)]
    )


_TOP = pa.struct(
    [SCHEMA.field(name) for name in ("unix_ms", "tgid", "workload", "ioctl_count", "since_last_gpu_ioctl_ms")]
)


def table_of(rows: Sequence[Row] | Sequence[Any]) -> pa.Table:
    """The rows (`Row` values, or the fast readers' structs of the same fields) as one Arrow table
    of `SCHEMA`, in the order given."""
    unix_ms, tgid, workload, ioctl_count, since_last = _columns(rows, _TOP)
    names: list[str] = []
    rates: list[float] = []
    offsets = [0]
    for row in rows:
        for call in row.syscalls:
            names.append(call.name)
            rates.append(call.rate_per_sec)
        offsets.append(len(names))
    calls = pa.StructArray.from_arrays(
        [_strings(names), pa.array(rates, pa.float64())], fields=[SYSCALL.field(0), SYSCALL.field(1)]
    )
    syscalls = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), calls)
    columns = [
        unix_ms,
        unix_ms.cast(pa.timestamp("ms", tz="UTC")),
        tgid,
        _struct([r.process for r in rows], PROCESS),
        _pods(rows),
        workload,
        ioctl_count,
        since_last,
        _struct([r.usage for r in rows], USAGE),
        _struct([r.cgroup_usage for r in rows], CGROUP_USAGE),
        syscalls.cast(SCHEMA.field("syscalls").type),
        _short_lived(rows),
        _ingress(rows),
        _gpus(rows),
        _strings([r.label for r in rows]),
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _short_lived(rows: Sequence[Row]) -> pa.Array:
    values = [
        None
        if r.short_lived is None
        else {
            "processes": r.short_lived.processes,
            "syscalls": [{"name": c.name, "rate_per_sec": c.rate_per_sec} for c in r.short_lived.syscalls],
        }
        for r in rows
    ]
    return pa.array(values, type=_SHORT_LIVED_PLAIN).cast(SHORT_LIVED)


def _pods(rows: Sequence[Row]) -> pa.Array:
    """The `pod` column: each named row's struct, null for the others (most rows of most nodes)."""
    values = [
        None
        if r.pod is None
        else {"namespace": r.pod.namespace, "name": r.pod.name, "container": r.pod.container}
        for r in rows
    ]
    return pa.array(values, type=_POD_PLAIN).cast(POD)


def _ingress(rows: Sequence[Row]) -> pa.Array:
    fields = [INGRESS.field(i).name for i in range(INGRESS.num_fields)]
    values = [
        None if r.ingress is None else {name: getattr(r.ingress, name) for name in fields} for r in rows
    ]
    return pa.array(values, type=INGRESS)


def _gpus(rows: Sequence[Row]) -> pa.Array:
    fields = [GPU.field(i).name for i in range(GPU.num_fields)]
    values = [
        None
        if r.gpus is None
        else [
            {
                **{name: getattr(use, name) for name in fields if name != "engines"},
                "engines": None
                if use.engines is None
                else [{"name": e.name, "busy_percent": e.busy_percent} for e in use.engines],
            }
            for use in r.gpus
        ]
        for r in rows
    ]
    return pa.array(values, type=_GPUS_PLAIN).cast(GPUS)


class PartWriter:
    """One Parquet part written atomically: rows come in batches (`add`), are kept as compact
    Arrow tables until about `row_group_mb` MB have gathered, then written as row groups of about
    that many MB (a batch larger than that is split; the last group of a part may be smaller);
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

    def add(self, rows: Sequence[Row] | Sequence[Any]) -> None:
        if not rows:
            return
        table = table_of(rows)
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        self.rows += len(rows)
        if self._pending_bytes >= self._group_bytes:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        """Write the gathered rows as row groups of about `row_group_mb` each (by their mean Arrow
        size); unless `final`, the rows short of a whole group wait for the next batch."""
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        per_group = max(1, int(table.num_rows * self._group_bytes / max(1, self._pending_bytes)))
        whole = table.num_rows if final else table.num_rows - table.num_rows % per_group
        if whole:
            if self._writer is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._writer = pq.ParquetWriter(
                    self._temporary, SCHEMA, compression=self._compression, use_dictionary=True
                )
            self._writer.write_table(table.slice(0, whole), row_group_size=per_group)
        rest = table.slice(whole)
        self._pending = [rest] if rest.num_rows else []
        self._pending_bytes = self._pending_bytes * rest.num_rows // table.num_rows

    def close(self) -> int:
        """Finish the part; returns its size in bytes."""
        self._flush(final=True)
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
