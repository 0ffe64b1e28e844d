"""`croft profile` as a user runs it: prefixes, windows and every error path, in a real process."""

from __future__ import annotations

import json
import re
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
    for key in KEYS[KEYS.index("cpu_cores") : KEYS.index("not_measured")]:
        spread = got[key]
        assert list(spread) == ["mean", "p95", "max"] and spread["p95"] <= spread["max"]
    assert got["not_measured"] == []


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
        ([], ["give one of a container id, --cgroup PATH, --pid PID or --pod NAMESPACE/NAME"]),
        (
            ["abcd", "--pid", "1"],
            ["a container id and --cgroup, --pid or --pod cannot both name the subject"],
        ),
        (["--pod", "web-7d9f"], ["--pod takes NAMESPACE/NAME", "e.g. default/web-7d9f"]),
        (["--pod", "shop/web", "--pid", "1"], ["not --pid and --pod"]),
        (["--pod", "shop/web"], ["no rows of pod shop/web", "croft stats --containers"]),
        (["ux-test"], ["not hexadecimal", "--cgroup PATH or --pid PID"]),
        (["--cgroup", "/nope"], ["no rows of cgroup /nope", "croft stats --containers"]),
        (["--pid", "0"], ["--pid takes a process id above 0"]),
    ],
)
def test_choosing_what_to_profile_is_checked(args: list[str], words: list[str]) -> None:
    one_line_error(croft("profile", "--dataset", str(SAMPLE), *args), *words)


WEB, PROXY, SANDBOX = "ab" * 32, "cd" * 32, "ef" * 32


def pod_dataset(root: Path) -> Path:
    """A pod of two containers and its sandbox over 4 polls, rows named as a collector with API
    access names them, beside a container of no pod."""
    from msgspec.structs import replace
    from tests.helpers.rows import make_row

    from croft.domain.dataset.row import CgroupUsage, Pod

    def usage(cpu: float, memory: int, throttled: float, pressure: float) -> CgroupUsage:
        return CgroupUsage(
            cpu_cores=cpu,
            cpu_throttled_fraction=throttled,
            memory_bytes=memory,
            oom_kills=0,
            cpu_pressure_avg10=pressure,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.0,
        )

    rows = []
    uid = "0d8e0a3c-1b2c-4d5e-8f90-123456789abc"
    for poll in range(4):
        at = 1_792_505_950_473 + 2000 * poll
        for tgid, cid, name, figures in (
            (11, WEB, "web", usage(0.5 + poll, 100 << 20, 0.25 * poll, 10.0)),
            (12, PROXY, "proxy", usage(0.25, 20 << 20, 0.0, 30.0 + poll)),
            (13, SANDBOX, None, usage(0.0, 1 << 20, 0.0, 0.0)),
        ):
            row = make_row(
                tgid, at, container_id=cid, cgroup=f"/kubepods/pod{uid}/{cid}", cgroup_usage=figures
            )
            rows.append(replace(row, pod=Pod(namespace="shop", name="web-7d9f", container=name)))
        rows.append(make_row(20, at, comm="loner"))  # docker run on the node: no pod
    (root / "croft-dataset.jsonl").write_bytes(b"".join(codec.encode_row(r) for r in rows))
    return root


def test_profile_by_pod_sums_its_containers_and_a_containers_profile_names_its_pod(tmp_path: Path) -> None:
    dataset = str(pod_dataset(tmp_path))
    done = croft("profile", "--pod", "shop/web-7d9f", dataset)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert list(got) == [*KEYS, "pod"] and got["container_id"] is None  # three containers
    assert got["pod"] == {"namespace": "shop", "name": "web-7d9f", "containers": ["proxy", "web"]}
    assert (got["polls"], got["processes"]) == (4, 3)
    # per poll: CPU and memory summed over the containers, the highest throttling and pressure
    assert got["cpu_cores"]["max"] == pytest.approx(3.5 + 0.25) and got["cpu_cores"]["mean"] == pytest.approx(
        2.25
    )
    assert got["memory_bytes"]["max"] == (100 << 20) + (20 << 20) + (1 << 20)
    assert got["cpu_throttled_fraction"]["max"] == 0.75 and got["cpu_pressure_avg10"]["max"] == 33.0
    web = json.loads(croft("profile", WEB[:8], dataset).stdout)
    assert web["pod"] == {"namespace": "shop", "name": "web-7d9f", "container": "web"}
    assert web["cpu_cores"]["max"] == 3.5
    loner = json.loads(croft("profile", "33813f5d", dataset).stdout)
    assert list(loner) == KEYS  # no pod: no key
    listed = json.loads(croft("stats", dataset, "--containers", "--json").stdout)["containers"]
    assert {e["container_id"][:4]: e["pod"] for e in listed} == {
        "3381": None,
        "abab": {"namespace": "shop", "name": "web-7d9f", "container": "web"},
        "cdcd": {"namespace": "shop", "name": "web-7d9f", "container": "proxy"},
        "efef": {"namespace": "shop", "name": "web-7d9f", "container": None},
    }
    table = croft("stats", dataset, "--containers").stdout.splitlines()
    assert re.split(r"\s{2,}", table[0])[:3] == ["CONTAINER ID", "POD", "CONTAINER"]
    assert any(re.match(rf"{WEB} +shop/web-7d9f +web ", line) for line in table), table
    assert any(re.match(rf"{SANDBOX} +shop/web-7d9f +- ", line) for line in table), table
