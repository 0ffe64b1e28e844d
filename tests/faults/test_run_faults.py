"""croft run's exit summary on a disk that fills up mid-run: rows count as written only once they
are in the file, and the final line gives the dropped total."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import CROFT
from tests.helpers.dataset import LIVE, file_lines
from tests.helpers.filesystems import fill, small_filesystem

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "fixtures" / "traces" / "live"


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_the_exit_summary_counts_rows_on_disk_and_the_dropped_total(tmp_path: Path) -> None:
    whole = subprocess.run(
        [CROFT, "run", "--replay", str(TRACE), "--dataset", str(tmp_path / "whole" / LIVE)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    made = len(file_lines(tmp_path / "whole" / LIVE))
    assert f"in all: {made} rows written, 0 rows dropped" in whole.stderr
    with small_filesystem(tmp_path / "small", "1m") as disk:
        fill(disk / "filler")
        os.truncate(disk / "filler", (disk / "filler").stat().st_size - 8192)  # room for a few polls
        out = subprocess.run(
            [CROFT, "run", "--replay", str(TRACE), "--dataset", str(disk / LIVE)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        on_disk = len(file_lines(disk / LIVE))
    assert out.returncode == 0, out.stderr
    found = re.search(r"in all: (\d+) rows written, (\d+) rows dropped", out.stderr)
    assert found is not None, out.stderr
    written, dropped = int(found[1]), int(found[2])
    assert (written, dropped) == (on_disk, made - on_disk)
    assert 0 < on_disk < made
