"""`croft run` checks its --rotate-*/--retain-* limits and the dataset directory before it starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import CROFT, croft


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rotate-secs", "0"], "--rotate-secs must be a whole number of seconds from 1 to 3155760000"),
        (["--rotate-bytes", "-5"], "--rotate-bytes must be a whole number of bytes from 1 to "),
        (["--retain-days", "0"], "--retain-days must be a whole number of days from 1 to 36525"),
        (
            ["--retain-bytes", "1000", "--rotate-bytes", "2000"],
            "--retain-bytes 1000 is smaller than one rotation",
        ),
        (["--retain-days", "1", "--rotate-secs", "90000"], "--retain-days 1 is shorter than one rotation"),
    ],
)
def test_bad_limits_are_one_sentence_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = croft("run", "--replay", str(tmp_path / "no-trace"), "--dataset", str(tmp_path / "d.jsonl"), *args)
    assert out.returncode == 1
    assert out.stderr.startswith(f"croft: {message}")
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "d.jsonl").exists()


def test_the_limits_come_from_the_environment_too(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            CROFT,
            "run",
            "--replay",
            str(tmp_path),
            "--dataset",
            str(tmp_path / "d.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"CROFT_RETAIN_BYTES": "0", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1
    assert "CROFT_RETAIN_BYTES must be a whole number of bytes from 1 to " in out.stderr
    assert out.stderr.endswith("got '0'\n")


def test_an_unwritable_dataset_directory_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = croft("run", "--replay", str(tmp_path), "--dataset", str(tmp_path / "file" / "croft-dataset.jsonl"))
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    # The trace directory is empty: whichever is checked first, the answer is one croft: line.
    assert out.stderr.startswith("croft: ")
    assert len(out.stderr.strip().splitlines()) == 1
