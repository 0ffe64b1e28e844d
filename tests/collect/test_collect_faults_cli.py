"""croft collect as a user runs it, against collectors that misbehave (compressing proxies, endless
indexes, trickles) and local directories that cannot take the copy: each ends in one sentence and an
exit code that tells the truth, with what landed kept whole."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import CROFT
from tests.helpers.collect import HERE, REPO, collector, write_polls
from tests.helpers.dataset import LIVE
from tests.helpers.filesystems import fill, small_filesystem

START_MS = 1_792_505_950_000


@contextlib.contextmanager
def odd_server(mode: str) -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "odd_server.py"), mode], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert server.stdout is not None
        yield f"http://127.0.0.1:{int(server.stdout.readline().strip().removeprefix('port='))}"
    finally:
        server.kill()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CROFT, "collect", *args], capture_output=True, text=True, timeout=120, check=False)


def test_collect_asks_for_identity_so_a_compressing_server_sends_plain_bytes(tmp_path: Path) -> None:
    with odd_server("gzip") as url:
        done = collect("--url", f"a={url}", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "a" / LIVE).read_bytes().startswith(b'{"unix_ms":')


def test_a_content_encoding_not_asked_for_is_refused_and_nothing_lands(tmp_path: Path) -> None:
    with odd_server("always-gzip") as url:
        done = collect("--url", f"a={url}", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "a: not collected:" in done.stdout and "Content-Encoding 'gzip'" in done.stdout
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


def test_an_index_without_end_is_cut_at_the_cap(tmp_path: Path) -> None:
    with odd_server("huge-index") as url:
        done = collect("--url", f"a={url}", "--out", str(tmp_path))
    assert done.returncode == 1
    assert "dataset index is larger than 16777216 bytes" in done.stdout


def test_a_trickling_collector_is_stopped_by_the_deadline(tmp_path: Path) -> None:
    with odd_server("trickle") as url:
        done = collect("--url", f"a={url}", "--out", str(tmp_path), "--deadline", "1.5", "--timeout", "5")
    assert done.returncode == 1
    assert "ran past its --deadline of 1.5 s" in done.stdout
    assert not (tmp_path / "a" / LIVE).exists()  # only a hidden part file, continued next time


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e300"])
@pytest.mark.parametrize("option", ["--timeout", "--deadline"])
def test_float_options_are_finite_and_in_range(tmp_path: Path, option: str, value: str) -> None:
    done = collect("--url", "a=http://127.0.0.1:9", "--out", str(tmp_path), option, value)
    assert done.returncode == 1
    assert done.stderr.startswith(f"croft: {option} must be a number of seconds in (0, ")
    assert done.stderr.count("\n") == 1


def test_two_urls_with_one_node_name_are_refused(tmp_path: Path) -> None:
    done = collect("--url", "a=http://127.0.0.1:9", "--url", "a=http://127.0.0.1:10", "--out", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == (
        "croft: --url names node a twice (http://127.0.0.1:9 and http://127.0.0.1:10); "
        "give each node one name\n"
    )


@pytest.mark.parametrize("item", ["a\nb=http://127.0.0.1:9", "a=http://127.0.0.1:9\nx", "a\n=http://x:9"])
def test_a_newline_in_a_node_name_or_url_is_refused(tmp_path: Path, item: str) -> None:
    done = collect("--url", item, "--out", str(tmp_path))
    assert done.returncode == 1 and done.stderr.startswith("croft: --url ")
    assert done.stderr.count("\n") == 1


@pytest.fixture
def node(tmp_path: Path) -> Path:
    directory = tmp_path / "node"
    directory.mkdir()
    seq = write_polls(directory, 0, 30, START_MS)
    write_polls(directory, seq, 30, START_MS + 1_000_000)
    return directory


def test_a_directory_in_the_way_is_one_line(node: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "a" / LIVE).mkdir(parents=True)
    with collector(node) as server:
        done = collect("--url", f"a={server.url}", "--out", str(out))
    assert done.returncode == 1, done.stdout
    assert f"a: not collected: cannot write {out / 'a' / LIVE}: a directory is in the way" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    segments = [p for p in (out / "a").iterdir() if p.name != LIVE and not p.name.startswith(".")]
    assert [p.read_bytes() for p in segments] == [(node / p.name).read_bytes() for p in segments] != []


def test_a_symlink_loop_in_the_way_is_one_line(node: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    part = out / "a" / f".{LIVE}.part"
    part.symlink_to(part.name)
    with collector(node) as server:
        done = collect("--url", f"a={server.url}", "--out", str(out))
    assert done.returncode == 1, done.stdout
    assert "a symlink is in the way" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_an_out_that_cannot_be_made_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    done = collect("--url", "a=http://127.0.0.1:9", "--out", str(tmp_path / "file" / "out"))
    assert done.returncode == 1
    assert done.stderr.startswith("croft: cannot write ") and done.stderr.count("\n") == 1


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_ends_in_one_sentence_and_keeps_whole_files(node: Path, tmp_path: Path) -> None:
    with (node / LIVE).open("ab") as f:  # a live file larger than the disk left
        f.write((node / LIVE).read_bytes() * 3)
    with small_filesystem(tmp_path / "small", "16m") as disk, collector(node) as server:
        fill(disk / "filler")
        os.truncate(disk / "filler", (disk / "filler").stat().st_size - 200_000)  # room for a little
        done = collect("--url", f"a={server.url}", "--out", str(disk / "out"))
        assert done.returncode == 1, done.stdout
        assert "the disk is full" in done.stdout and "Traceback" not in done.stdout + done.stderr
        assert done.stdout.count("not collected") == 1
        for path in (disk / "out" / "a").iterdir():
            if not path.name.startswith("."):
                assert (node / path.name).read_bytes() == path.read_bytes(), path.name
        (disk / "filler").unlink()
        again = collect("--url", f"a={server.url}", "--out", str(disk / "out"))
        assert again.returncode == 0, again.stdout
        assert (disk / "out" / "a" / LIVE).read_bytes() == (node / LIVE).read_bytes()
