"""croft collect's transfer side against real collector server processes serving real dataset
directories written by the real DatasetWriter: incremental copies, a restart with rotation in the
middle, a collector killed mid-copy, and hostile names."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from croft.adapters.dataset.fetch import CollectorGone
from tests.helpers.cli import CROFT
from tests.helpers.collect import HERE, REPO, collector, copy_node, local_lines, seqs, write_polls
from tests.helpers.dataset import LIVE

START_MS = 1_792_505_950_000


@pytest.fixture(params=["socket", "httpx"])
def client(request: pytest.FixtureRequest) -> str:
    """croft collect's two HTTP clients (direct collectors, the API server's proxy): one contract."""
    return str(request.param)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    directory = tmp_path / "node"
    directory.mkdir()
    return directory


def test_second_copy_of_an_unchanged_node_moves_almost_nothing(
    node: Path, tmp_path: Path, client: str
) -> None:
    write_polls(node, 0, 50, START_MS)
    write_polls(node, 1000, 50, START_MS + 200_000)  # a second run: the first live file is a segment
    out = tmp_path / "out" / "node-a"
    with collector(node) as server:
        first, moved_first = copy_node(server.url, out, client=client)
        second, moved_second = copy_node(server.url, out, client=client)
    assert first.files == 2 and second.files == 0 and second.unchanged == 2
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in node.iterdir())
    for path in node.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes()
    assert moved_second <= moved_first // 100


def test_a_growing_live_file_is_continued_not_copied_again(node: Path, tmp_path: Path, client: str) -> None:
    out = tmp_path / "out"
    with collector(node) as server:
        write_polls(node, 0, 30, START_MS)
        copy_node(server.url, out, client=client)
        size_before = (node / LIVE).stat().st_size
        with (node / LIVE).open("ab") as f:  # the collector's next polls, without a new run
            f.write((node / LIVE).read_bytes()[: size_before // 2].rsplit(b"\n", 1)[0] + b"\n")
        result, moved = copy_node(server.url, out, client=client)
    grown = (node / LIVE).stat().st_size - size_before
    assert result.bytes_written == grown
    assert moved < grown + 4096 + 1000  # the new bytes, the overlap, the index
    assert (out / LIVE).read_bytes() == (node / LIVE).read_bytes()


def test_restart_with_rotation_in_the_middle_keeps_every_row_once(
    node: Path, tmp_path: Path, client: str
) -> None:
    out = tmp_path / "out"
    with collector(node) as server:
        seq = write_polls(node, 0, 40, START_MS)
        copy_node(server.url, out, client=client)
        # The collector restarts: its live file becomes a segment, a new and smaller live file starts.
        write_polls(node, seq, 3, START_MS + 500_000)
        result, _ = copy_node(server.url, out, client=client)
    assert any("is in croft-dataset-" in note for note in result.notes)
    assert seqs(local_lines(out)) == list(range(seq + 3 * 20))
    assert not list(out.glob("*.saved*"))


def test_a_replaced_live_copy_in_no_segment_is_saved_aside(node: Path, tmp_path: Path, client: str) -> None:
    out = tmp_path / "out"
    with collector(node) as server:
        seq = write_polls(node, 0, 40, START_MS)
        copy_node(server.url, out, client=client)
        write_polls(node, seq, 3, START_MS + 500_000)
        for segment in node.glob("croft-dataset-*"):
            segment.unlink()  # retention took the rotated segment before this collect
        result, _ = copy_node(server.url, out, client=client)
    saved = list(out.glob("*.saved.jsonl"))
    assert len(saved) == 1, result.notes
    assert seqs(local_lines(out)) == list(range(seq + 3 * 20))


def test_a_collector_killed_mid_copy_is_resumed(node: Path, tmp_path: Path, client: str) -> None:
    segment = node / "croft-dataset-20261020T130000Z.jsonl.zst"
    segment.write_bytes(os.urandom(24 << 20))
    out = tmp_path / "out"
    with collector(node) as server:
        got: list[int] = []

        def kill_after_a_few_chunks(n: int) -> None:
            got.append(n)
            if len(got) == 3:
                server.kill()

        with pytest.raises(CollectorGone):
            copy_node(server.url, out, on_bytes=kill_after_a_few_chunks, client=client)
        port = server.port
    part = out / f".{segment.name}.part"
    assert 0 < part.stat().st_size < segment.stat().st_size
    assert not (out / segment.name).exists()
    landed = part.stat().st_size
    with collector(node, port) as server:
        result, moved = copy_node(server.url, out, client=client)
    assert (out / segment.name).read_bytes() == segment.read_bytes()
    assert not part.exists()
    assert result.bytes_written == segment.stat().st_size - landed
    assert moved < segment.stat().st_size - landed + 4096 + 1000


def test_an_interrupted_live_continuation_is_a_prefix_and_continues(
    node: Path, tmp_path: Path, client: str
) -> None:
    out = tmp_path / "out"
    seq = write_polls(node, 0, 10, START_MS)
    with collector(node) as server:
        copy_node(server.url, out, client=client)
        # A big next run of polls in the same live file; the copy is cut after the first chunk.
        with (node / LIVE).open("ab") as f:
            block = (node / LIVE).read_bytes()[:50_000].rsplit(b"\n", 1)[0] + b"\n"
            f.write(block * 600)  # 30 MB: more than loopback buffers hold
        calls: list[int] = []

        def kill_once(n: int) -> None:
            calls.append(n)
            if len(calls) == 1:
                server.kill()

        with pytest.raises(CollectorGone):
            copy_node(server.url, out, on_bytes=kill_once, client=client)
        port = server.port
    local = (out / LIVE).read_bytes()
    assert (node / LIVE).read_bytes().startswith(local) and local.endswith(b"\n")
    with collector(node, port) as server:
        copy_node(server.url, out, client=client)
    assert (out / LIVE).read_bytes() == (node / LIVE).read_bytes()
    assert seqs(local_lines(out))[-1] == seq - 1


@pytest.mark.parametrize(
    "name",
    ["../escape.jsonl", "/etc/passwd", "a/b.jsonl", ".hidden.jsonl", "x\n.jsonl", "%2e%2e.jsonl",
     "croft-dataset-20261020T130000Z.jsonl.zst.tmp", "other.jsonl", "..", "ä.jsonl"],
)  # fmt: skip
def test_hostile_file_names_are_refused(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out" / "node-a"
    index = {"version": 1, "live": "croft-dataset.jsonl", "files": [
        {"name": name, "size_bytes": 64, "mtime_ms": 1},
        {"name": "croft-dataset.jsonl", "size_bytes": 64, "mtime_ms": 1},
    ]}  # fmt: skip
    result = _hostile(tmp_path, index, out)
    assert result.returncode == 0, result.stderr
    assert f"refused {name!r}"[:40] in result.stdout
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["index.json", "out/node-a/croft-dataset.jsonl"]


@pytest.mark.parametrize("live", ["../croft-dataset.jsonl", "/tmp/x.jsonl", "croft-dataset.txt", ".jsonl"])
def test_a_hostile_live_name_refuses_the_node(tmp_path: Path, live: str) -> None:
    index = {"version": 1, "live": live, "files": [{"name": live, "size_bytes": 64, "mtime_ms": 1}]}
    result = _hostile(tmp_path, index, tmp_path / "out" / "node-a")
    assert result.returncode == 1
    assert "node-a: not collected: refused its dataset index" in result.stdout
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["index.json"]


@pytest.mark.parametrize("node_name", ["../up", "/abs", "a/b", ".hidden", "x y"])
def test_unsafe_node_names_are_refused(tmp_path: Path, node_name: str) -> None:
    out = subprocess.run(
        [CROFT, "collect", "--url", f"{node_name}=http://127.0.0.1:9", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.startswith("croft: --url node name") and out.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_collect_command_copies_from_direct_collectors(node: Path, tmp_path: Path) -> None:
    write_polls(node, 0, 20, START_MS)
    out = tmp_path / "nodes"
    with collector(node) as server:
        argv = [CROFT, "collect", "--url", f"gpu-a={server.url}", "--out", str(out)]
        first = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        server.kill()
        gone = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("gpu-a: 1 files, ")
    assert second.stdout.startswith("gpu-a: 0 files, 0 bytes copied, 1 unchanged")
    assert gone.returncode == 1 and "gpu-a: not collected: cannot reach" in gone.stdout
    assert (out / "gpu-a" / LIVE).read_bytes() == (node / LIVE).read_bytes()
    stats = subprocess.run([CROFT, "stats", str(out), "--json"], capture_output=True, text=True, timeout=60)
    assert stats.returncode == 0, stats.stderr


def test_files_larger_than_the_writeback_step_land_whole(node: Path, tmp_path: Path, client: str) -> None:
    """Part files are handed to the kernel's writeback every WRITEBACK_BYTES as they grow; what lands
    is still the node's bytes, first copy and continued copy alike."""
    from croft.adapters.dataset.node_copy import WRITEBACK_BYTES

    write_polls(node, 0, 20, START_MS)
    segment = node / "croft-dataset-20261020T100000Z.jsonl.zst"
    segment.write_bytes(os.urandom(2 * WRITEBACK_BYTES + 12345))
    out = tmp_path / "out"
    with collector(node) as server:
        part = out / f".{segment.name}.part"  # an interrupted copy left this much: continued
        out.mkdir()
        part.write_bytes(segment.read_bytes()[: WRITEBACK_BYTES // 2 + 7])
        result, moved = copy_node(server.url, out, client=client)
    assert result.files == 2
    assert moved < segment.stat().st_size + (node / LIVE).stat().st_size
    for path in node.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name


# What `croft collect --url` must not import: its start is most of a local copy's time
# (benchmarks/collect.py), and none of these serve the copy.
NOT_FOR_COLLECT = (
    "httpx", "kubernetes", "zstandard", "yaml", "bcc", "pynvml", "prometheus_client", "ssl",
    "croft.domain.deploy.manifests", "croft.domain.dataset.row", "croft.domain.dataset.rotation",
    "croft.adapters.dataset.files",
)  # fmt: skip


def test_collect_imports_only_what_the_copy_needs(node: Path, tmp_path: Path) -> None:
    """`croft collect --url` run in a process of its own, as `croft` runs it (its main()): a first
    copy and an unchanged second one, then the modules it imported."""
    write_polls(node, 0, 20, START_MS)
    code = (
        "import atexit, sys; from croft.app.cli import main\n"
        f"heavy = {NOT_FOR_COLLECT!r}\n"
        "atexit.register(lambda: print('heavy=' + ','.join(m for m in heavy if m in sys.modules)))\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    out = tmp_path / "nodes"
    with collector(node) as server:
        argv = [sys.executable, "-c", code, "collect", "--url", f"gpu-a={server.url}", "--out", str(out)]
        runs = [subprocess.run(argv, capture_output=True, text=True, timeout=60) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines()[-1] == "heavy="
    assert runs[0].stdout.startswith("gpu-a: 1 files, ")
    assert runs[1].stdout.startswith("gpu-a: 0 files, 0 bytes copied, 1 unchanged")
    assert (out / "gpu-a" / LIVE).read_bytes() == (node / LIVE).read_bytes()


def test_nodes_copied_at_once_report_in_node_order(tmp_path: Path) -> None:
    """Several nodes are copied at once; the lines still come in node order, a node that is gone
    fails alone, and every other node's copy is exact."""
    nodes = {name: tmp_path / name for name in ("a", "b", "c", "d", "e")}
    for i, directory in enumerate(nodes.values()):
        directory.mkdir()
        write_polls(directory, 0, 20 + 60 * (4 - i), START_MS)  # the first node is the largest
    out = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        urls = {name: stack.enter_context(collector(d)).url for name, d in nodes.items()}
        urls["c"] = "http://127.0.0.1:9"  # nothing listens there
        argv = [CROFT, "collect", "--out", str(out)]
        for name, url in reversed(urls.items()):
            argv += ["--url", f"{name}={url}"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == ["a", "b", "c", "d", "e"]
    assert lines[2].startswith("c: not collected: cannot reach the collector at http://127.0.0.1:9")
    assert lines[-1].startswith("4 of 5 nodes collected into")
    for name, directory in nodes.items():
        if name != "c":
            assert (out / name / LIVE).read_bytes() == (directory / LIVE).read_bytes()


def _hostile(tmp_path: Path, index: dict[str, object], out: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "index.json").write_text(json.dumps(index))
    server = subprocess.Popen(
        [sys.executable, str(HERE / "hostile_server.py"), str(tmp_path / "index.json")],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip().removeprefix("port="))
        return subprocess.run(
            [CROFT, "collect", "--url", f"{out.name}=http://127.0.0.1:{port}", "--out", str(out.parent)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        server.kill()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
