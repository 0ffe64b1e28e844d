"""The rows of croft's dataset that a set of runs reads, kept as a dataset of their own.

    python keeprows.py --runs OUT/web --dataset OUT/nodes --to results/real-<day>/nodes

real.py copies the node's whole dataset beside its runs (every process of the node, for hours);
the runs read only their own containers' rows within their windows (burst_series.load_runs). This
keeps those rows, in the order the collector wrote them, as one closed, compressed segment per node
(croft's own compressor, its summary appended), so that a committed set of runs carries the
kernel's signals for `run.py answer --real` (its lead times per signal) at a fraction of the size.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from burst_series import AFTER_MS, POLL_MARGIN_MS
from croft import dataset
from croft.adapters.dataset.compressor import compress_segment
from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.naming import Naming, SegmentName
from croft.errors import UserError
from croft.runs.rundir import BadRunDir, RunRecord, read_records

NAMING = Naming("croft-dataset")


@attrs.frozen
class Kept:
    """What `keep_rows` wrote: rows read and kept, and per node the segment and its size."""

    read: int
    kept: int
    segments: tuple[tuple[Path, int], ...]


def windows(records: Iterable[RunRecord]) -> dict[str, list[tuple[int, int]]]:
    """Per container id, the windows (unix ms, inclusive) in which a run reads its rows."""
    out: dict[str, list[tuple[int, int]]] = {}
    for record in records:
        span = (record.window_start_ms - POLL_MARGIN_MS, record.window_end_ms + AFTER_MS)
        for _, cid in record.containers:
            out.setdefault(cid, []).append(span)
    return out


def keep_rows(runs_dirs: Sequence[Path], source: Path, to: Path) -> Kept:
    """Write the rows of `source` (a croft dataset) that the runs of `runs_dirs` read into `to`,
    one compressed segment per node (`to/<node>/`). Raises UserError when `to` holds a dataset
    already or no run names a container."""
    wanted = windows(r for d in runs_dirs for r in read_records(d))
    if not wanted:
        raise UserError(f"no run under {', '.join(map(str, runs_dirs))} names a container: nothing to keep")
    if to.exists() and any(to.rglob("croft-dataset*")):
        raise UserError(f"{to} holds a dataset already: name an empty directory with --to")
    first = min(a for spans in wanted.values() for a, _ in spans)
    last = max(b for spans in wanted.values() for _, b in spans)
    read = 0
    lines: dict[str, list[bytes]] = {}
    starts: dict[str, int] = {}
    for node, row in dataset.node_rows(source, from_ms=first, to_ms=last):
        read += 1
        spans = wanted.get(row.process.container_id or "")
        if spans is None or not any(a <= row.unix_ms <= b for a, b in spans):
            continue
        lines.setdefault(node, []).append(encode_row(row))
        starts.setdefault(node, row.unix_ms)
    segments = []
    for node, mine in lines.items():
        directory = to / node
        directory.mkdir(parents=True, exist_ok=True)
        segment = SegmentName(starts[node])
        (directory / NAMING.plain(segment)).write_bytes(b"".join(mine))
        segments.append(
            (directory / NAMING.compressed(segment), compress_segment(directory, NAMING, segment))
        )
    return Kept(read, sum(map(len, lines.values())), tuple(segments))


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    top.add_argument("--runs", type=Path, nargs="+", required=True, help="data directories with runs.jsonl")
    top.add_argument("--dataset", type=Path, required=True, help="croft's dataset the runs were recorded in")
    top.add_argument("--to", type=Path, required=True, help="an empty directory for the kept rows")
    args = top.parse_args(argv)
    try:
        kept = keep_rows(args.runs, args.dataset, args.to)
    except (UserError, BadRunDir, OSError) as exc:
        print(f"keeprows.py: {exc}", file=sys.stderr)
        return 2
    print(f"kept {kept.kept} of {kept.read} rows read:")
    for path, size in kept.segments:
        print(f"  {path} ({size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
