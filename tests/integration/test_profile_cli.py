"""`croft profile` as a user runs it: prefixes, windows and every error path, in a real process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
import pytest
from tests.helpers.cli import croft
from tests.helpers.rows import seq_row
from tests.helpers.spec_keys import PROFILE_KEYS

from croft.domain.dataset import codec
from croft.domain.dataset.row import Row
from croft.domain.utc import iso_ms

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
    assert (got["from_time"], got["to_time"]) == (iso_ms(got["from_ms"]), iso_ms(got["to_ms"]))
    for key in KEYS[KEYS.index("cpu_cores") :]:
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
    return msgspec.structs.replace(
        row, process=msgspec.structs.replace(row.process, container_id=container_id)
    )


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


SAMPLE = FIXTURES / "sample"
DOCKER_ID = "1e2feb89414c343c1027c4d1c386bbc4cd613e30d8f16adf91b7584a2265b1f5"


def naive(select: object) -> list[dict[str, object]]:
    """The sample's rows that `select` keeps, read with the plain json module."""
    import zstandard

    out = []
    for path in sorted(SAMPLE.iterdir()):
        data = path.read_bytes()
        if path.name.endswith(".zst"):
            data = zstandard.ZstdDecompressor().stream_reader(data).read()
        out += [row for row in map(json.loads, data.splitlines()) if select(row)]  # type: ignore[operator]
    return out


def test_a_host_cgroup_is_profiled_by_its_path() -> None:
    path = "/system.slice/kubelet.service"
    out = croft("profile", "--dataset", str(SAMPLE), "--cgroup", path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert list(got) == [*KEYS, "cgroup"]
    rows = naive(lambda r: r["process"]["cgroup"] == path)
    assert got["container_id"] is None and got["cgroup"] == path
    assert got["polls"] == len({r["unix_ms"] for r in rows}) == 45
    assert got["cpu_cores"]["max"] == max(r["cgroup_usage"]["cpu_cores"] for r in rows)
    same = croft("profile", "--dataset", str(SAMPLE), "--cgroup", "system.slice/kubelet.service/")
    assert json.loads(same.stdout) == got


def test_a_process_is_profiled_by_its_pid_with_its_own_cpu_and_rss() -> None:
    out = croft("profile", "--dataset", str(SAMPLE), "--pid", "2259")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert list(got) == [*KEYS, "pid"] and got["pid"] == 2259
    rows = naive(lambda r: r["tgid"] == 2259)
    assert got["polls"] == len(rows) and got["processes"] == 1
    assert got["memory_bytes"]["max"] == max(r["usage"]["rss_bytes"] for r in rows)
    assert got["cpu_cores"]["max"] == max(r["usage"]["cpu_cores"] for r in rows)
    assert got["container_id"] == rows[0]["process"]["container_id"]


def test_rfc_3339_and_relative_times_pick_the_same_window_as_milliseconds() -> None:
    by_ms = croft("profile", DOCKER_ID[:8], "--dataset", str(SAMPLE), "--from-ms", "1792506000000")
    by_rfc = croft("profile", DOCKER_ID[:8], "--dataset", str(SAMPLE), "--from", "2026-10-20T14:20:00Z")
    by_offset = croft(
        "profile", DOCKER_ID[:8], "--dataset", str(SAMPLE), "--from", "2026-10-20T16:20:00+02:00"
    )
    assert by_ms.returncode == 0, by_ms.stderr
    assert json.loads(by_rfc.stdout) == json.loads(by_ms.stdout) == json.loads(by_offset.stdout)
    # the sample is from October 2026: "10m ago" from now holds none of it, the error says where it is
    recent = croft("profile", DOCKER_ID[:8], "--dataset", str(SAMPLE), "--from", "10m ago")
    one_line_error(recent, "has no rows from", "its rows span 1792505950473 to 1792506248486")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--from", "yesterday"], ["--from 'yesterday' is not a time", "10m"]),
        (["--from", "10m", "--from-ms", "5"], ["give --from or --from-ms, not both"]),
        (["--from", "1m ago", "--to", "10m ago"], ["is after --to 10m ago", "starts before it ends"]),
    ],
)
def test_bad_times_are_one_sentence(args: list[str], words: list[str]) -> None:
    one_line_error(croft("profile", DOCKER_ID[:8], "--dataset", str(SAMPLE), *args), *words)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], ["give one of a container id, --cgroup PATH or --pid PID"]),
        (["abcd", "--pid", "1"], ["not a container id and --pid"]),
        (["ux-test"], ["not hexadecimal", "--cgroup PATH or --pid PID"]),
        (["--cgroup", "/nope"], ["no rows of cgroup /nope", "croft stats --containers"]),
        (["--pid", "0"], ["--pid takes a process id above 0"]),
    ],
)
def test_choosing_what_to_profile_is_checked(args: list[str], words: list[str]) -> None:
    one_line_error(croft("profile", "--dataset", str(SAMPLE), *args), *words)
