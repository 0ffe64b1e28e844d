"""A writing process for the kill -9 tests: the real DatasetWriter (compression thread and all) fed
polls of numbered rows as fast as it takes them, on a clock that runs 400x fast so that segments
close and compress every few hundred milliseconds.

    python -m tests.helpers.dataset_driver DIR FIRST_SEQ START_MS [POLLS]

After each append returns it prints the sequence number one past the poll's last row: everything
below the last number printed was written by a completed poll."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import Limits
from tests.helpers.dataset import LIVE, poll_lines

LIMITS = Limits(rotate_secs=60, rotate_bytes=24_000, retain_days=3650, retain_bytes=1 << 40)
ROWS_PER_POLL = 7
POLLS = 400


def main(directory: Path, first_seq: int, start_ms: int, polls: int = POLLS) -> int:
    writer = DatasetWriter(directory / LIVE, LIMITS)
    seq, now_ms = first_seq, start_ms
    for _ in range(polls):
        writer.append(poll_lines(seq, ROWS_PER_POLL, now_ms), now_ms)
        seq += ROWS_PER_POLL
        print(seq, flush=True)
        now_ms += 2000
        time.sleep(0.005)
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:5])))
