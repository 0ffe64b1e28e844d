"""What keeping `process.cmdline` costs a dataset: bytes per row, raw and zstd-compressed.

    .venv/bin/python benchmarks/cmdline_cost.py [--mib 16]

The rows are benchmarks/rotation.py's realistic mix (pods, GPU holders, host daemons, idle
processes written every 15th poll); each process of it takes the command line of a real process
of this host (every readable /proc/<pid>/cmdline, in pid order, reused round-robin), cut as the
collector cuts it (`croft.domain.collector.rows.command_line`). The same rows are written without
it, and both are compressed as rotation compresses a segment (zstd level 3).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import msgspec
import zstandard

from croft.adapters.dataset.compressor import ZSTD_LEVEL
from croft.domain.collector.procparse import parse_cmdline
from croft.domain.collector.rows import command_line
from croft.domain.dataset import codec
from rotation import realistic_polls  # benchmarks/ is the script's directory


def host_command_lines() -> list[str]:
    """The command lines of this host's processes, cut as rows keep them (kernel threads have none)."""
    found = []
    pids = sorted(int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    for pid in pids:
        try:
            data = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        text = command_line(parse_cmdline(data))
        if text is not None:
            found.append(text)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=16, help="MiB of rows without command lines")
    args = parser.parse_args()
    lines = host_command_lines()
    rows = [codec.decode_row(line) for poll in realistic_polls(args.mib << 20) for line in poll.splitlines()]
    by_tgid: dict[int, str] = {}
    with_cmdline = []
    for row in rows:
        text = by_tgid.setdefault(row.tgid, lines[len(by_tgid) % len(lines)])
        process = msgspec.structs.replace(row.process, cmdline=text)
        with_cmdline.append(msgspec.structs.replace(row, process=process))
    without = [
        msgspec.structs.replace(r, process=msgspec.structs.replace(r.process, cmdline=None)) for r in rows
    ]
    plain = codec.encode_rows(without)
    kept = codec.encode_rows(with_cmdline)
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    plain_z, kept_z = len(compressor.compress(plain)), len(compressor.compress(kept))
    per_row = sorted(
        len(codec.encode_row(a)) - len(codec.encode_row(b))
        for a, b in zip(with_cmdline, without, strict=True)
    )
    print(f"host command lines: {len(lines)} processes, {len(by_tgid)} processes in {len(rows)} rows")
    print(
        f"cmdline bytes per row: median {statistics.median(per_row):.0f}, "
        f"mean {statistics.fmean(per_row):.0f}, p95 {per_row[int(0.95 * (len(per_row) - 1))]}, "
        f"max {per_row[-1]}"
    )
    print(
        f"raw: {len(plain) / len(rows):.0f} -> {len(kept) / len(rows):.0f} B a row "
        f"(+{100 * (len(kept) / len(plain) - 1):.1f} %)"
    )
    print(
        f"zstd {ZSTD_LEVEL}: {plain_z / len(rows):.1f} -> {kept_z / len(rows):.1f} B a row "
        f"(+{100 * (kept_z / plain_z - 1):.1f} %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
