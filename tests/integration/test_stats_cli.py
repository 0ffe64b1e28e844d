"""`croft stats` as a user runs it: a real process on real fixture files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from tests.helpers.cli import croft
from tests.helpers.rows import seq_row
from tests.helpers.spec_keys import STATS_KEYS

from croft.domain.utc import iso_ms

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


@pytest.fixture(autouse=True)
def terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """croft stats lays out its summary for a 100-column terminal here."""
    monkeypatch.setenv("COLUMNS", "100")


def test_the_human_summary_shows_every_figure() -> None:
    out = croft("stats", str(FIXTURES / "sample"))
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    for label in ("files", "rows", "skipped", "first", "last", "polls", "nodes", "containers", "processes"):
        assert f"\n{label} " in text
    assert "3 files (2 zstd, 1 plain), 460.3 KiB on disk" in text and " UTC" in text
    for heading in ("workloads", "frameworks", "busiest syscalls", "gpu-held", "pytorch", "futex"):
        assert heading in text


def test_json_has_the_keys_of_the_issue_and_agrees_with_the_summary() -> None:
    out = croft("stats", str(FIXTURES / "nodes"), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert list(got) == STATS_KEYS
    assert got["nodes"] == ["cpu-c", "gpu-a", "gpu-b"]
    assert got["files"] == 6 and got["skipped_lines"] == 0
    assert sum(got["workloads"].values()) == got["rows"]
    assert (got["first_time"], got["last_time"]) == (iso_ms(got["first_ms"]), iso_ms(got["last_ms"]))


def test_the_dataset_path_comes_from_dataset_path() -> None:
    out = croft("stats", "--json", env={"DATASET_PATH": str(FIXTURES / "sample" / "croft-dataset.jsonl")})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["files"] == 3  # the live file's path means its whole dataset


def test_skips_are_reported_one_line_each_on_stderr() -> None:
    out = croft("stats", str(FIXTURES / "damaged"), "--json")
    assert out.returncode == 0
    lines = out.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("croft: skipped ") for line in lines)
    assert "corrupt.jsonl.zst" in lines[0] and "truncated.jsonl.zst" in lines[1]
    assert json.loads(out.stdout)["skipped_lines"] > 0


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode != 0
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("croft: ")
    for word in words:
        assert word in line


def test_a_missing_path_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    one_line_error(croft("stats", str(tmp_path / "missing.jsonl")), "does not exist", "DATASET_PATH")


def test_a_directory_without_dataset_files_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    one_line_error(croft("stats", str(tmp_path)), "holds no dataset files")


@pytest.mark.parametrize("content", [b"", b"\n\n"])
def test_an_empty_dataset_is_one_line(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "croft-dataset.jsonl").write_bytes(content)
    one_line_error(croft("stats", str(tmp_path)), "holds no rows")


def test_a_dataset_of_nothing_but_bad_lines_reports_them_then_fails(tmp_path: Path) -> None:
    (tmp_path / "croft-dataset.jsonl").write_bytes(b"garbage\n[1]\n")
    out = croft("stats", str(tmp_path))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"croft: skipped 2 lines (1 not JSON, 1 not a row) in {tmp_path / 'croft-dataset.jsonl'} (2)",
        f"croft: {tmp_path} holds no rows; give a dataset that the collector has written to",
    ]


def test_a_torn_live_file_still_counts_its_whole_rows(tmp_path: Path) -> None:
    from croft.domain.dataset import codec

    line = codec.encode_row(seq_row(1, 1_792_505_950_473))
    (tmp_path / "croft-dataset.jsonl").write_bytes(line + line[:40])
    out = croft("stats", str(tmp_path), "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["rows"] == 1
    assert "1 torn last line" in out.stderr


def test_json_carries_the_busiest_syscalls_the_summary_shows() -> None:
    human = croft("stats", str(FIXTURES / "sample")).stdout
    got = json.loads(croft("stats", str(FIXTURES / "sample"), "--json").stdout)
    busiest = got["busiest_syscalls"]
    assert [b["name"] for b in busiest][:3] == ["getdents64", "futex", "mmap"] and len(busiest) == 10
    for entry in busiest:
        assert re.search(rf"{entry['name']} +{entry['mean_per_s']:,.1f}", human), entry


def test_containers_lists_every_container_and_host_cgroup_with_full_ids() -> None:
    out = croft("stats", str(FIXTURES / "sample"), "--containers")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [
        "CONTAINER ID", "FRAMEWORK", "NODES", "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "ROWS", "CGROUP"
    ]  # fmt: skip
    assert lines[-1] == "8 containers, 5 host cgroups"
    cells = [re.split(r"\s{2,}", line) for line in lines[2:-1]]  # under the header's rule
    assert len(cells) == 13 and all(len(row) == 7 for row in cells) and lines == [x.rstrip() for x in lines]
    assert sum(re.fullmatch(r"[0-9a-f]{64}", row[0]) is not None for row in cells) == 8
    cid = "1e2feb89414c343c1027c4d1c386bbc4cd613e30d8f16adf91b7584a2265b1f5"
    ours = next(row for row in cells if row[0] == cid)
    assert (ours[1], ours[5], ours[6]) == ("pytorch", "291", f"/system.slice/docker-{cid}.scope")
    assert ["(host)", "/system.slice/kubelet.service"] in [[row[0], row[6]] for row in cells]
    listed = json.loads(croft("stats", str(FIXTURES / "nodes"), "--containers", "--json").stdout)[
        "containers"
    ]
    assert list(listed[0]) == [
        "container_id", "pod", "cgroup", "framework", "nodes", "first_ms", "first_time", "last_ms",
        "last_time", "rows",
    ]  # fmt: skip
    assert all(
        e["first_time"] == iso_ms(e["first_ms"]) and e["last_time"] == iso_ms(e["last_ms"]) for e in listed
    )
    got = json.loads(croft("stats", str(FIXTURES / "nodes"), "--json").stdout)
    assert sum(e["rows"] for e in listed) == got["rows"]
    assert sum(e["container_id"] is not None for e in listed) == got["containers"]


def test_a_closed_pipe_ends_quietly_with_0(tmp_path: Path) -> None:
    """`croft stats | head -1`: the reader goes away after one line."""
    script = (
        f"{sys.executable} -m croft stats {FIXTURES / 'sample'} | head -1; echo status=${{PIPESTATUS[0]}}"
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.splitlines()[-1] == "status=0"
    assert out.stderr == ""


def test_nodes_are_the_ones_rows_name_and_directory_names_only_for_older_rows(tmp_path: Path) -> None:
    """A dataset copied elsewhere still says where it was written: rows that name their node count
    on it; rows of collectors before the `node` key count on their per-node directory's name."""
    from tests.helpers.rows import EXAMPLE_CONTAINER, T0_MS, make_row

    from croft import dataset
    from croft.domain.dataset.codec import encode_row

    copied, old = tmp_path / "nodes" / "copied-to-laptop", tmp_path / "nodes" / "old-node"
    copied.mkdir(parents=True)
    old.mkdir()
    named = [
        msgspec.structs.replace(make_row(tgid=7, unix_ms=T0_MS + 2000 * i), node="gpu-a") for i in range(3)
    ]
    named.append(msgspec.structs.replace(make_row(tgid=8, unix_ms=T0_MS), node="gpu-b"))
    (copied / "croft-dataset.jsonl").write_bytes(b"".join(map(encode_row, named)))
    (old / "croft-dataset.jsonl").write_bytes(encode_row(make_row(tgid=9, unix_ms=T0_MS)))

    out = croft("stats", str(tmp_path / "nodes"), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["nodes"] == ["gpu-a", "gpu-b", "old-node"]
    assert (got["rows"], got["polls"], got["processes"]) == (5, 5, 3)
    single = croft("stats", str(copied / "croft-dataset.jsonl"), "--json")
    assert json.loads(single.stdout)["nodes"] == ["gpu-a", "gpu-b"]  # not this machine's name
    assert [n for n, _ in dataset.node_rows(tmp_path / "nodes")] == ["gpu-a"] * 3 + ["gpu-b", "old-node"]
    profile = croft("profile", EXAMPLE_CONTAINER[:8], "--dataset", str(tmp_path / "nodes"))
    assert profile.returncode == 0, profile.stderr
    assert json.loads(profile.stdout)["nodes"] == ["gpu-a", "gpu-b", "old-node"]


@pytest.mark.parametrize("columns", ["100", "70"])
def test_the_piped_summary_is_the_text_rich_lays_out(columns: str) -> None:
    import io

    from croft.adapters.dataset.scan import read_stats
    from croft.app.console import PipeConsole
    from croft.app.stats import render

    path = FIXTURES / "nodes"
    out = croft("stats", str(path), env={"COLUMNS": columns})
    assert out.returncode == 0, out.stderr
    facts, total = read_stats(path, syscalls=True)
    expected = io.StringIO()
    console = PipeConsole(highlight=False, file=expected, width=int(columns), color_system=None)
    render(path, total.summary(facts), console)
    assert out.stdout == expected.getvalue()
