"""The readers on the checked-in fixture datasets, against a naive reading (json.loads per line,
the codec per row), in one process and on a pool of workers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import zstandard
from tests.helpers.golden import assert_same_bytes

from croft.adapters.dataset.scan import read_profile, read_stats
from croft.domain.dataset import codec
from croft.domain.dataset.profile import profile_of
from croft.domain.dataset.row import Row
from croft.domain.utc import iso_ms

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
HOST = "fixture-host"


def naive_rows(path: Path) -> list[tuple[str, Row]]:
    """(node, row) of every whole line of an undamaged dataset, read the slow obvious way."""
    out = []
    directories = [path] if any(path.glob("*.jsonl*")) else sorted(p for p in path.iterdir() if p.is_dir())
    for directory in directories:
        node = HOST if directory == path else directory.name
        for f in sorted(directory.glob("*.jsonl*")):
            data = f.read_bytes()
            if f.name.endswith(".zst"):
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            for line in data.split(b"\n")[:-1]:
                out.append((node, codec.row_from_dict(json.loads(line))))
    return out


def expected_stats(rows: list[tuple[str, Row]]) -> dict[str, object]:
    containers = {r.process.container_id for _, r in rows} - {None}
    frameworks: dict[str, set[str]] = {}
    workloads: dict[str, int] = {}
    for _, r in rows:
        workloads[r.workload] = workloads.get(r.workload, 0) + 1
        if r.process.framework and r.process.container_id:
            frameworks.setdefault(r.process.framework, set()).add(r.process.container_id)
    return {
        "rows": len(rows),
        "skipped_lines": 0,
        "first_ms": min(r.unix_ms for _, r in rows),
        "first_time": iso_ms(min(r.unix_ms for _, r in rows)),
        "last_ms": max(r.unix_ms for _, r in rows),
        "last_time": iso_ms(max(r.unix_ms for _, r in rows)),
        "polls": len({(n, r.unix_ms) for n, r in rows}),
        "nodes": sorted({n for n, _ in rows}),
        "containers": len(containers),
        "processes": len({(n, r.tgid) for n, r in rows}),
        "workloads": dict(sorted(workloads.items())),
        "frameworks": {fw: len(ids) for fw, ids in sorted(frameworks.items())},
    }


def stats_json(path: Path, **kwargs: object) -> tuple[dict[str, object], tuple[str, ...]]:
    facts, acc = read_stats(path, host=HOST, **kwargs)  # type: ignore[arg-type]
    return acc.summary(facts).to_json(), acc.skips.report()


@pytest.mark.parametrize("name", ["sample", "nodes"])
def test_stats_of_a_fixture_equal_a_naive_reading(name: str) -> None:
    got, skipped = stats_json(FIXTURES / name, syscalls=True)
    files = sorted(FIXTURES.joinpath(name).rglob("*.jsonl*"))
    assert skipped == ()
    assert got["files"] == len(files)
    assert got["bytes"] == sum(f.stat().st_size for f in files)
    assert {
        k: v for k, v in got.items() if k not in ("files", "bytes", "busiest_syscalls")
    } == expected_stats(naive_rows(FIXTURES / name))


def test_the_sample_is_a_dataset_directory_with_closed_segments_and_a_live_file() -> None:
    names = sorted(p.name for p in (FIXTURES / "sample").iterdir())
    assert names[-1] == "croft-dataset.jsonl"
    assert [n for n in names if n.endswith(".jsonl.zst")] == names[:-1] and len(names) >= 2
    rows = naive_rows(FIXTURES / "sample")
    assert {r.workload for _, r in rows} == {"gpu-onset", "gpu-held", "no-gpu"}
    assert any(r.process.container_id is None for _, r in rows)
    assert len({r.process.framework for _, r in rows}) >= 4
    assert all(r.syscalls for _, r in rows)


def test_a_pool_of_workers_over_parts_reads_the_same_as_one_process() -> None:
    one, _ = stats_json(FIXTURES / "nodes", workers=1)
    pool, _ = stats_json(FIXTURES / "nodes", workers=2, inline_bytes=0, part_bytes=40_000)
    assert pool == one


def test_damaged_files_are_read_up_to_the_damage_and_every_skip_is_reported() -> None:
    got, skipped = stats_json(FIXTURES / "damaged", syscalls=True)
    damaged = FIXTURES / "damaged"
    assert skipped[0] == (
        f"skipped the rest of {damaged / 'corrupt.jsonl.zst'}: corrupt zstd data (Data corruption detected)"
    )
    assert skipped[1] == (
        f"skipped the rest of {damaged / 'truncated.jsonl.zst'}: "
        "truncated zstd data (the file ends inside a frame)"
    )
    lines = skipped[2]
    assert lines.startswith(f"skipped {got['skipped_lines']} lines (")
    for name, count in [("garbage.jsonl", 1), ("not-a-row.jsonl", 3), ("torn.jsonl", 1)]:
        assert f"{damaged / name} ({count})" in lines
    assert "1 not JSON" in lines and "3 not rows" in lines
    plain = naive_plain_rows(damaged)
    assert isinstance(got["rows"], int) and got["rows"] > len(plain)  # the zstd files gave rows too


def naive_plain_rows(directory: Path) -> list[Row]:
    rows = []
    for f in sorted(directory.glob("*.jsonl")):
        for line in f.read_bytes().split(b"\n")[:-1]:
            try:
                rows.append(codec.decode_row(line))
            except ValueError:
                continue
    return rows


@pytest.mark.parametrize("workers", [1, 2])
def test_profile_of_a_fixture_container_equals_a_naive_reading(workers: int) -> None:
    rows = naive_rows(FIXTURES / "nodes")
    cid = next(r.process.container_id for _, r in rows if r.process.container_id)
    assert cid is not None
    acc = read_profile(FIXTURES / "nodes", cid[:6], None, None, workers=workers, inline_bytes=0, host=HOST)
    assert acc.matching_ids() == (cid,)
    got = profile_of(cid, acc.tracks[cid], None, None)
    mine = [(n, r) for n, r in rows if r.process.container_id == cid]
    polls: dict[tuple[str, int], float] = {}
    for n, r in mine:
        polls[(n, r.unix_ms)] = max(polls.get((n, r.unix_ms), 0.0), r.cgroup_usage.cpu_cores)
    assert got is not None
    assert got.polls == len(polls)
    assert got.processes == len({(n, r.tgid) for n, r in mine})
    assert got.spreads[0].max == max(polls.values())
    assert got.spreads[0].mean == pytest.approx(sum(polls.values()) / len(polls))


def test_regenerating_the_fixtures_gives_the_same_bytes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(FIXTURES) for p in FIXTURES.rglob("*.jsonl*"))
    assert made == kept
    for rel in made:
        mine, kept_bytes = (tmp_path / rel).read_bytes(), (FIXTURES / rel).read_bytes()
        if rel.parent.name == "damaged" and rel.suffix == ".zst":
            continue  # damaged on purpose; their bytes depend on the zstd library's exact output
        if rel.suffix == ".zst":  # another zstd version may compress the same rows differently
            mine, kept_bytes = (zstandard.ZstdDecompressor().decompress(b) for b in (mine, kept_bytes))
        assert_same_bytes(mine, kept_bytes, str(rel), "if intended, rerun fixtures/datasets/make_fixtures.py")
