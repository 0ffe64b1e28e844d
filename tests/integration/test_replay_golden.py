"""Replaying each recorded trace reproduces its checked-in dataset byte for byte, every time.

Regenerate after an intended change with `pytest --regen-golden` (or CROFT_REGEN_GOLDEN=1), then
read the diff of fixtures/golden/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.golden import assert_same_bytes

from croft.domain.dataset.codec import decode_row

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "fixtures" / "traces"
GOLDEN = REPO / "fixtures" / "golden"
PIDS = msgspec.json.decode((TRACES / "live" / "pids.json").read_bytes())
TRACE_NAMES = sorted(p.name for p in TRACES.iterdir() if p.is_dir())


def replay(trace: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CROFT, "run", "--replay", str(trace), "--dataset", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rows_of(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [msgspec.json.decode(line) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("name", TRACE_NAMES)
def test_replay_matches_golden(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    out = tmp_path / "croft-dataset.jsonl"
    done = replay(TRACES / name, out)
    assert done.returncode == 0, done.stderr
    golden = GOLDEN / f"{name}.jsonl"
    if request.config.getoption("--regen-golden") or os.environ.get("CROFT_REGEN_GOLDEN") == "1":
        golden.write_bytes(out.read_bytes())
    assert_same_bytes(
        out.read_bytes(), golden.read_bytes(), f"replay of {name}", "if intended, rerun with --regen-golden"
    )
    for line in out.read_bytes().splitlines():
        decode_row(line)  # every line is a valid row


def test_replaying_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "d.jsonl", tmp_path / "b" / "d.jsonl"
    assert replay(TRACES / "live", first).returncode == 0
    assert replay(TRACES / "live", second).returncode == 0
    assert first.read_bytes() == second.read_bytes() != b""


def test_live_trace_shows_the_workload() -> None:
    rows = rows_of(GOLDEN / "live.jsonl")
    by_pid: dict[int, list[dict]] = {}  # type: ignore[type-arg]
    for row in rows:
        by_pid.setdefault(row["tgid"], []).append(row)
    burn = by_pid[PIDS["burn"]]
    assert all(0.3 < r["usage"]["cpu_cores"] <= 0.55 for r in burn)  # one core under a 0.5-core quota
    assert any(r["cgroup_usage"]["cpu_throttled_fraction"] > 0.3 for r in burn)  # the quota bites
    assert all(r["usage"]["write_bytes_s"] > 500_000 for r in by_pid[PIDS["write"]])
    assert all(r["usage"]["rss_bytes"] > 48 << 20 for r in by_pid[PIDS["alloc"]])
    assert len(by_pid[PIDS["idle"]]) == 1  # idle: once every 15 polls
    assert {r["process"]["cgroup"] for r in rows} == {"/croft-fixture"}
    assert all(r["workload"] == "no-gpu" and "ioctl_count" not in r for r in rows)


def _polls_with(rows: list[dict], tgid: int) -> list[int]:  # type: ignore[type-arg]
    return sorted({r["unix_ms"] for r in rows if r["tgid"] == tgid})


def test_damaged_traces_skip_a_poll_instead_of_writing_nonsense() -> None:
    live = rows_of(GOLDEN / "live.jsonl")
    for name, key in (("counter-reset", "burn"), ("pid-reuse", "alloc"), ("vanished-pid", "write")):
        damaged = rows_of(GOLDEN / f"{name}.jsonl")
        assert len(_polls_with(damaged, PIDS[key])) < len(_polls_with(live, PIDS[key])), name
        for row in damaged:
            assert all(v >= 0 for v in row["usage"].values() if isinstance(v, float)), name
    reused = [r for r in rows_of(GOLDEN / "pid-reuse.jsonl") if r["tgid"] == PIDS["alloc"]]
    assert reused[-1]["process"]["comm"] == "reused"


def test_replay_of_a_missing_trace_is_one_sentence(tmp_path: Path) -> None:
    done = replay(tmp_path, tmp_path / "d.jsonl")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("croft: no trace files")
    assert "Traceback" not in done.stderr


def test_bad_framework_catalog_is_refused_before_anything_starts(tmp_path: Path) -> None:
    catalog = tmp_path / "frameworks.toml"
    catalog.write_text('[[framework]]\nname = "x"\nexe = ["x"]\n\n[[framework]]\nexe = ["y"]\n')
    out = tmp_path / "d" / "croft-dataset.jsonl"
    done = replay(TRACES / "live", out, "--frameworks", str(catalog))
    assert done.returncode == 1
    assert "line 5" in done.stderr and str(catalog) in done.stderr
    assert not out.exists()


def test_user_catalog_names_the_workload(tmp_path: Path) -> None:
    catalog = tmp_path / "frameworks.toml"
    catalog.write_text('[[framework]]\nname = "fixture-burner"\ncmdline = ["    pass"]\n')
    out = tmp_path / "croft-dataset.jsonl"
    assert replay(TRACES / "live", out, "--frameworks", str(catalog)).returncode == 0
    frameworks = {r["tgid"]: r["process"].get("framework") for r in rows_of(out)}
    assert frameworks[PIDS["burn"]] == "fixture-burner"
    assert frameworks[PIDS["write"]] is None


def test_rows_name_the_node_of_the_trace_or_of_node(tmp_path: Path) -> None:
    """A trace whose header names its node gives rows that name it; `--node` overrides it; a trace
    recorded before nodes were kept (the golden ones) gives rows without the key."""
    import zstandard

    (source,) = sorted((TRACES / "live").glob("*.jsonl.zst"))
    with source.open("rb") as raw:
        header, rest = (
            zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read().split(b"\n", 1)
        )
    named = msgspec.json.decode(header) | {"node": "gpu-a"}
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / source.name).write_bytes(
        zstandard.ZstdCompressor().compress(msgspec.json.encode(named) + b"\n" + rest)
    )
    golden = rows_of(GOLDEN / "live.jsonl")
    assert golden and all("node" not in row for row in golden)
    for extra, node in (((), "gpu-a"), (("--node", "lab-7"), "lab-7")):
        out = tmp_path / node / "croft-dataset.jsonl"
        done = replay(trace, out, *extra)
        assert done.returncode == 0, done.stderr
        got = rows_of(out)
        assert [row.pop("node") for row in got] == [node] * len(golden)
        assert got == golden
    done = replay(trace, tmp_path / "bad" / "d.jsonl", "--node", "../etc")
    assert done.returncode == 1 and "--node" in done.stderr and "Traceback" not in done.stderr


def test_a_collector_without_api_access_never_imports_the_kubernetes_client(tmp_path: Path) -> None:
    """The kubernetes client is heavy: `croft run` imports it only to load an API configuration,
    which a collector without API access (a bare host, a replay) never does."""
    code = (
        "import sys\nfrom croft.app.cli import main\n"
        "try:\n"
        f"    main(['run', '--replay', {str(TRACES / 'live')!r}, '--dataset', "
        f"{str(tmp_path / 'croft-dataset.jsonl')!r}])\n"
        "except SystemExit as exc:\n"
        "    print('code', exc.code, 'kubernetes' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert done.stdout.strip().splitlines()[-1] == "code 0 False", done.stderr


def test_api_access_is_a_kubeconfig_or_a_pods_service_account(tmp_path: Path) -> None:
    from croft.adapters.kube.pod_watch import api_access

    token = tmp_path / "token"
    pod_env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert api_access(None, pod_env, token) is None  # no token mounted
    token.write_text("t")
    assert api_access(None, pod_env, token) == "in-cluster"
    assert api_access(None, {}, token) is None  # a token file, but no API address: not a pod
    assert api_access(tmp_path / "kubeconfig", {}, token) == "kubeconfig"
