"""croft export: a dataset as hive-partitioned Parquet, for DuckDB, Spark, Trino or BigQuery."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError

Compression = Literal["zstd", "snappy", "gzip", "lz4", "brotli", "none"]


def export(
    path: DatasetOpt = DEFAULT_DATASET,
    *,
    to: Annotated[Path, Parameter(help="the export directory (created; re-runs add only what changed)")],
    compression: Annotated[Compression, Parameter(help="Parquet compression codec")] = "zstd",
    row_group_mb: Annotated[float, Parameter(help="uncompressed MB of rows per Parquet row group")] = 128.0,
) -> int:
    """Write the rows of a dataset as Parquet under `--to`: node=<node>/hour=<YYYYMMDDTHH>/part-*.parquet.
    Incremental: a file already exported with the same size and checksum is not read again. Lines
    that are not rows are skipped and counted as croft stats counts them."""
    if not (0.01 <= row_group_mb <= 4096):  # also refuses nan and inf
        raise UserError(f"--row-group-mb {row_group_mb} is out of range; give MB between 0.01 and 4096")
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:  # not imported here: the workers import it
        raise UserError("croft export needs pyarrow, which is not installed; pip install 'croft[export]'")
    from croft.adapters.dataset.export import run_export
    from croft.app.console import report_skips
    from croft.app.progress import Progress

    with Progress(transfer=False) as shown:
        line = shown.add("croft export")

        def told(exported: int, to_export: int, name: str) -> None:
            shown.update(line, description=f"exported {exported}/{to_export}: {name}")

        outcome = run_export(path, to, compression=compression, row_group_mb=row_group_mb, progress=told)
    report_skips(outcome.skips.report())
    noun = "file" if outcome.exported == 1 else "files"
    sys.stdout.write(
        f"exported {outcome.exported} {noun} ({outcome.rows} rows, {outcome.parts_written} parts, "
        f"{outcome.bytes_written / 1e6:.1f} MB) to {to}; {outcome.unchanged} unchanged\n"
    )
    return 0
