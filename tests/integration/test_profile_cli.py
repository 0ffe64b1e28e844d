"""`croft profile` as a user runs it: prefixes, windows and every error path, in a real process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import attrs
import pytest
from tests.helpers.cli import croft
from tests.helpers.rows import seq_row
from tests.helpers.spec_keys import PROFILE_KEYS

from croft.domain.dataset import codec
from croft.domain.dataset.row import Row

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
KEYS = PROFILE_KEYS


def fixture_rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> str:
    assert out.returncode != 0
    assert out.stdout == "" and "Traceback" not in out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("croft: ")
    for word in words:
        assert word in line
    return line


def test_a_prefix_profiles_the_container_with_the_keys_of_the_issue() -> None:
    live = FIXTURES / "nodes" / "gpu-a" / "croft-dataset.jsonl"
    rows = fixture_rows(live)
    process = rows[0]["process"]
    assert isinstance(process, dict)
    cid = process["container_id"]
    out = croft("profile", cid[:5].upper(), "--dataset", str(FIXTURES / "nodes"))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert list(got) == KEYS
    assert got["container_id"] == cid and got["nodes"] == ["gpu-a"]
    assert 0 <= got["gpu_poll_share"] <= 1
    for key in KEYS[7:]:
        spread = got[key]
        assert list(spread) == ["mean", "p95", "max"] and spread["p95"] <= spread["max"]


def test_a_window_limits_the_polls_and_is_echoed() -> None:
    live = FIXTURES / "sample" / "croft-dataset.jsonl"
    rows = fixture_rows(live)
    process = rows[0]["process"]
    assert isinstance(process, dict)
    cid = process["container_id"]
    times = sorted(
        {r["unix_ms"] for r in rows if isinstance(r["process"], dict) and r["process"]["container_id"] == cid}
    )
    assert all(isinstance(t, int) for t in times)
    low, high = int(str(times[2])), int(str(times[5]))
    out = croft(
        "profile", cid, "--dataset", str(FIXTURES / "sample"), "--from-ms", str(low), "--to-ms", str(high)
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["from_ms"], got["to_ms"], got["polls"]) == (low, high, 4)


def write(directory: Path, rows: list[Row]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "croft-dataset.jsonl").write_bytes(b"".join(codec.encode_row(r) for r in rows))
    return directory


def with_id(row: Row, container_id: str) -> Row:
    return attrs.evolve(row, process=attrs.evolve(row.process, container_id=container_id))


def test_an_ambiguous_prefix_lists_the_matching_ids(tmp_path: Path) -> None:
    one, two = "abcd1" + "0" * 59, "abcd2" + "0" * 59
    dataset = write(tmp_path, [with_id(seq_row(1, 10), one), with_id(seq_row(2, 10), two)])
    line = one_line_error(
        croft("profile", "abcd", "--dataset", str(dataset)), "matches 2 containers", one, two
    )
    assert "give more digits" in line
    assert json.loads(croft("profile", "abcd2", "--dataset", str(dataset)).stdout)["container_id"] == two


def test_an_unknown_id_is_a_clear_error(tmp_path: Path) -> None:
    dataset = write(tmp_path, [seq_row(1, 10)])
    one_line_error(
        croft("profile", "deadbeef", "--dataset", str(dataset)), "no container id starting with deadbeef"
    )


@pytest.mark.parametrize(("prefix", "words"), [("abc", ["too short", "4"]), ("xyz12", ["not hexadecimal"])])
def test_a_bad_prefix_is_a_clear_error(prefix: str, words: list[str]) -> None:
    one_line_error(croft("profile", prefix, "--dataset", str(FIXTURES / "sample")), *words)


def test_a_window_without_rows_of_the_container_says_where_its_rows_are(tmp_path: Path) -> None:
    cid = f"{0:064x}"
    dataset = write(tmp_path, [seq_row(1, 100), seq_row(1, 200)])
    one_line_error(
        croft("profile", cid, "--dataset", str(dataset), "--from-ms", "300", "--to-ms", "400"),
        "has no rows from 300 to 400",
        "span 100 to 200",
    )


def test_a_window_that_ends_before_it_starts_is_an_error() -> None:
    one_line_error(
        croft("profile", "abcd", "--dataset", str(FIXTURES / "sample"), "--from-ms", "5", "--to-ms", "4"),
        "--from-ms",
    )


def test_a_missing_dataset_is_one_line(tmp_path: Path) -> None:
    one_line_error(croft("profile", "abcd", "--dataset", str(tmp_path / "nope")), "does not exist")
