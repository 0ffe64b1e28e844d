"""Hostile input to the readers, as a user meets it on the command line: each of these once gave a
traceback, a silent wrong count or a wrong name. Only the CLI and plain files are used, so the same
tests run against any version of croft."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zstandard
from tests.helpers.cli import CROFT, croft
from tests.helpers.rows import EXAMPLE_CONTAINER, T0_MS, make_row

from croft.domain.dataset import codec

LIVE = "croft-dataset.jsonl"


def good_lines(count: int = 3, unix_ms: int = T0_MS) -> bytes:
    return b"".join(codec.encode_row(make_row(10 + i, unix_ms)) for i in range(count))


def one_row() -> bytes:
    return codec.encode_row(make_row(99, T0_MS + 2000)).rstrip(b"\n")


def stats_json(path: Path) -> tuple[dict[str, object], str]:
    out = croft("stats", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout), out.stderr


MS = b'"unix_ms":%d' % (T0_MS + 2000)
HOSTILE = {
    "nested 1000 deep": b'{"unix_ms":1,"x":' + b"[" * 1000 + b"]" * 1000 + b"}",
    "unix_ms beyond 64 bits": one_row().replace(MS, b'"unix_ms":%d' % 2**64),
    "memory beyond 64 bits": re.sub(rb'"memory_bytes":\d+', b'"memory_bytes":1' + b"0" * 30, one_row()),
    "unix_ms outside the calendar": one_row().replace(MS, b'"unix_ms":%d' % 10**17),
    "an extra key": one_row()[:-1] + b',"extra":1}',
    "invalid UTF-8 in comm": one_row().replace(b'"comm":"python"', b'"comm":"py\xffthon"'),
    "two objects on one line": one_row() + one_row(),
    "a float beyond double": one_row().replace(b'"cpu_cores":0.5', b'"cpu_cores":1e400', 1),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_line_is_one_counted_skip_and_the_good_rows_are_all_counted(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / LIVE
    path.write_bytes(good_lines() + HOSTILE[name] + b"\n" + good_lines(2, T0_MS + 4000))
    got, stderr = stats_json(path)
    assert (got["rows"], got["skipped_lines"]) == (5, 1), stderr
    human = croft("stats", str(path))
    assert human.returncode == 0 and "Traceback" not in human.stderr, human.stderr
    profile = croft("profile", EXAMPLE_CONTAINER[:8], "--dataset", str(path))
    assert profile.returncode == 0 and "Traceback" not in profile.stderr, profile.stderr
    assert json.loads(profile.stdout)["polls"] == 2


def test_a_node_directory_whose_name_is_not_utf8_is_read_and_named_with_escapes(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/node-\xff"))
    odd.mkdir()
    (odd / LIVE).write_bytes(good_lines())
    (tmp_path / "gpu-a").mkdir()
    (tmp_path / "gpu-a" / LIVE).write_bytes(good_lines(2))
    got, _ = stats_json(tmp_path)
    assert (got["rows"], got["nodes"]) == (5, ["gpu-a", "node-\\xff"])
    for args in (["stats", str(tmp_path)], ["top", "--once", "--dataset", str(tmp_path)]):
        out = croft(*args)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert "node-\\xff" in out.stdout


@pytest.fixture
def readable_tmp() -> Iterator[Path]:
    """A directory that a user other than root can reach (pytest's tmp_path is root's alone)."""
    where = Path(tempfile.mkdtemp(prefix="croft-readers-"))
    where.chmod(0o755)
    yield where
    shutil.rmtree(where)


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """croft ARGS as the user nobody (root reads everything, so only another user meets EACCES)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run croft as another user")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CROFT, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    probe = run("--help")
    if probe.returncode != 0:
        pytest.skip(f"croft cannot run as nobody here (its files are not readable): {probe.stderr[:200]}")
    return run(*args)


def test_a_directory_the_user_cannot_read_is_one_line(readable_tmp: Path) -> None:
    shut = readable_tmp / "shut"
    shut.mkdir(mode=0o700)
    (shut / LIVE).write_bytes(good_lines())
    out = as_nobody("stats", str(shut), "--json")
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"croft: {shut}: cannot list its files (Permission denied); "), out.stderr


def test_a_node_directory_the_user_cannot_read_is_skipped_and_said(readable_tmp: Path) -> None:
    for node, mode in (("gpu-a", 0o755), ("gpu-b", 0o700)):
        (readable_tmp / node).mkdir(mode=mode)
        (readable_tmp / node / LIVE).write_bytes(good_lines())
        (readable_tmp / node / LIVE).chmod(0o644)
    out = as_nobody("stats", str(readable_tmp), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == 3
    assert (
        out.stderr == f"croft: skipped {readable_tmp / 'gpu-b'}: cannot list its files (Permission denied)\n"
    )


def test_a_line_over_a_mebibyte_is_skipped_as_too_long(tmp_path: Path) -> None:
    path = tmp_path / LIVE
    path.write_bytes(
        good_lines() + b'{"unix_ms":' + b"7" * (3 << 20) + b"}\n" + good_lines(2) + b"z" * (2 << 20)
    )
    got, stderr = stats_json(path)
    assert (got["rows"], got["skipped_lines"]) == (5, 2)
    assert stderr == f"croft: skipped 2 lines (2 too long) in {path} (2)\n"


def test_a_small_zstd_file_of_a_huge_line_of_nul_bytes_is_one_too_long_line(tmp_path: Path) -> None:
    bomb = zstandard.ZstdCompressor(level=19).compress(good_lines() + bytes(64 << 20) + b"\n" + good_lines(1))
    assert len(bomb) < 10_000
    segment = tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst"
    segment.write_bytes(bomb)
    got, stderr = stats_json(segment)
    assert (got["rows"], got["skipped_lines"]) == (4, 1)
    assert "1 too long" in stderr


def test_an_empty_zstd_segment_is_truncated_as_zstd_says(tmp_path: Path) -> None:
    (tmp_path / LIVE).write_bytes(good_lines())
    empty = tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst"
    empty.write_bytes(b"")
    got, stderr = stats_json(tmp_path)
    assert got["rows"] == 3
    assert stderr == f"croft: skipped the rest of {empty}: truncated zstd data (the file is empty)\n"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a dataset file"),
        (lambda p: p.symlink_to(p), "is a symlink loop"),
        (lambda p: p.symlink_to(p.parent / "gone.jsonl"), "is a dangling symlink"),
    ],
)
def test_a_path_that_is_no_dataset_file_is_named_for_what_it_is(
    tmp_path: Path, make: object, said: str
) -> None:
    path = tmp_path / LIVE
    make(path)  # type: ignore[operator]
    for args in (
        ["stats", str(path)],
        ["profile", "abcd", "--dataset", str(path)],
        ["top", "--once", "--dataset", str(path)],
    ):
        out = croft(*args)
        assert out.returncode == 1, out.stderr
        assert out.stderr.startswith(f"croft: {path} {said}"), out.stderr
        assert out.stderr.count("\n") == 1


def test_a_fifo_among_the_segments_is_skipped_and_said(tmp_path: Path) -> None:
    (tmp_path / LIVE).write_bytes(good_lines())
    fifo = tmp_path / "croft-dataset-20261020T141910Z.jsonl.zst"
    os.mkfifo(fifo)
    got, stderr = stats_json(tmp_path)
    assert got["rows"] == 3
    assert stderr == f"croft: skipped {fifo}: it is a FIFO (named pipe), not a dataset file\n"
    assert msgspec.json.decode(msgspec.json.encode(got))  # the JSON is valid JSON
