"""croft export against real engines: DuckDB over the Parquet gives the answers of croft stats --json
and croft profile; re-runs export only what changed; damaged lines are skipped as stats skips them."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import attrs
import pytest
import zstandard
from tests.helpers.cli import croft
from tests.helpers.parquet import HOUR_MS, PROFILE_FIGURES, START_MS, fleet_rows, write_fleet
from tests.helpers.rows import make_row

from croft.domain.dataset import codec
from croft.domain.dataset.row import ShortLived, SyscallRate

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


def stats_of(path: Path) -> dict[str, object]:
    done = croft("stats", str(path), "--json")
    assert done.returncode == 0, done.stderr
    stats: dict[str, object] = json.loads(done.stdout)
    return stats


def parquet_stats(con: object, export: Path) -> dict[str, object]:
    glob = str(export / "**" / "*.parquet")
    query = f"""
        SELECT count(*) AS rows,
               count(DISTINCT (node, unix_ms)) AS polls,
               count(DISTINCT process.container_id) AS containers,
               count(DISTINCT (node, tgid)) AS processes,
               epoch_ms(min(unix_ms)) AS first_ms,
               epoch_ms(max(unix_ms)) AS last_ms
        FROM read_parquet('{glob}', hive_partitioning = true)
    """
    names = ["rows", "polls", "containers", "processes", "first_ms", "last_ms"]
    return dict(zip(names, con.execute(query).fetchone(), strict=True))  # type: ignore[attr-defined]


PROFILE_SQL = """
    WITH polls AS (
        SELECT node, unix_ms,
               max(cgroup_usage.cpu_cores) AS cpu_cores,
               max(cgroup_usage.memory_bytes)::DOUBLE AS memory_bytes,
               max(cgroup_usage.cpu_throttled_fraction) AS cpu_throttled_fraction,
               max(cgroup_usage.cpu_pressure_avg10) AS cpu_pressure_avg10,
               max(CASE WHEN workload IN ('gpu-onset', 'gpu-held') THEN 1.0 ELSE 0.0 END) AS gpu
        FROM read_parquet('{glob}', hive_partitioning = true)
        WHERE process.container_id = '{cid}'
        GROUP BY node, unix_ms
    )
    SELECT count(*) AS polls, avg(gpu) AS gpu_poll_share,
           {figures}
    FROM polls
"""
FIGURES = PROFILE_FIGURES


def parquet_profile(con: object, export: Path, cid: str) -> dict[str, object]:
    figures = ", ".join(
        f"avg({f}) AS {f}_mean, quantile_cont({f}, 0.95) AS {f}_p95, max({f}) AS {f}_max" for f in FIGURES
    )
    query = PROFILE_SQL.format(glob=str(export / "**" / "*.parquet"), cid=cid, figures=figures)
    row = con.execute(query).fetchone()  # type: ignore[attr-defined]
    names = ["polls", "gpu_poll_share"] + [f"{f}_{s}" for f in FIGURES for s in ("mean", "p95", "max")]
    return dict(zip(names, row, strict=True))


def test_duckdb_over_the_export_answers_as_croft_does(tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes")
    export = tmp_path / "export"
    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    assert "exported 12 files" in done.stdout
    hours = sorted(p.name for p in (export / "node=node-0").iterdir())
    assert hours == ["hour=20261020T14", "hour=20261020T15", "hour=20261020T16", "hour=20261020T17"]

    stats = stats_of(nodes)
    con = duckdb.connect()
    mine = parquet_stats(con, export)
    for key in ("rows", "polls", "containers", "processes", "first_ms", "last_ms"):
        assert mine[key] == stats[key], key

    cid = con.execute(
        f"SELECT any_value(process.container_id) FROM read_parquet('{export}/**/*.parquet') "
        "WHERE process.container_id IS NOT NULL"
    ).fetchone()[0]
    done = croft("profile", cid, "--dataset", str(nodes))
    assert done.returncode == 0, done.stderr
    profile = json.loads(done.stdout)
    theirs = parquet_profile(con, export, cid)
    assert theirs["polls"] == profile["polls"]
    assert theirs["gpu_poll_share"] == pytest.approx(profile["gpu_poll_share"], rel=1e-12)
    for figure in FIGURES:
        for stat in ("mean", "p95", "max"):
            assert theirs[f"{figure}_{stat}"] == pytest.approx(profile[figure][stat], rel=1e-9), (
                figure,
                stat,
            )


def test_types_and_nesting_are_kept(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    nodes = write_fleet(tmp_path / "nodes", nodes=1, hours=1)
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    part = next(export.rglob("part-*.parquet"))
    schema = pq.read_schema(part)
    assert str(schema.field("unix_ms").type) == "timestamp[ms, tz=UTC]"
    assert str(schema.field("syscalls").type).startswith("list<element: struct<name: dictionary")
    assert str(schema.field("process").type).startswith("struct<comm: dictionary<values=string")
    # Every row comes back as it was written, key for key (the codec's JSON of both).
    con = duckdb.connect()
    back = con.execute(
        f"SELECT epoch_ms(unix_ms), tgid, process.comm, syscalls FROM read_parquet('{part}') ORDER BY 1, 2"
    ).fetchall()
    rows = sorted(
        (json.loads(line) for line in (nodes / "node-0" / "croft-dataset.jsonl").read_bytes().splitlines()),
        key=lambda r: (r["unix_ms"], r["tgid"]),
    )
    live_hour = [r for r in back if r[0] >= rows[0]["unix_ms"]]
    assert [(r[0], r[1], r[2]) for r in live_hour] == [
        (r["unix_ms"], r["tgid"], r["process"]["comm"]) for r in rows
    ]
    assert [list(map(dict, r[3])) for r in live_hour] == [r["syscalls"] for r in rows]


def test_a_rerun_exports_only_what_changed_and_never_twice(tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes", nodes=2, hours=2)
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in export.rglob("*.parquet")}

    again = croft("export", str(nodes), "--to", str(export))
    assert again.returncode == 0, again.stderr
    assert "exported 0 files" in again.stdout and "6 unchanged" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in export.rglob("*.parquet")} == before

    # The collector rotates node-0's live file into a segment and begins a new one.
    live = nodes / "node-0" / "croft-dataset.jsonl"
    segment = nodes / "node-0" / "croft-dataset-20261020T160001Z.jsonl.zst"
    segment.write_bytes(zstandard.ZstdCompressor(level=3).compress(live.read_bytes()))
    rng = random.Random(9)
    live.write_bytes(b"".join(codec.encode_row(r) for r in fleet_rows(rng, 0, START_MS + 3 * HOUR_MS, 4)))
    third = croft("export", str(nodes), "--to", str(export))
    assert third.returncode == 0, third.stderr
    assert "exported 2 files" in third.stdout
    con = duckdb.connect()
    assert parquet_stats(con, export)["rows"] == stats_of(nodes)["rows"]


def test_damaged_lines_are_skipped_as_stats_skips_them(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(FIXTURES / "damaged", damaged)
    export = tmp_path / "export"
    done = croft("export", str(damaged), "--to", str(export))
    assert done.returncode == 0, done.stderr
    stats = croft("stats", str(damaged), "--json")
    assert json.loads(stats.stdout)["skipped_lines"] > 0
    assert sorted(done.stderr.splitlines()) == sorted(stats.stderr.splitlines())
    con = duckdb.connect()
    assert parquet_stats(con, export)["rows"] == json.loads(stats.stdout)["rows"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--row-group-mb", "nan"], "--row-group-mb"),
        (["--row-group-mb", "0"], "--row-group-mb"),
        (["--compression", "zip"], "compression"),
    ],
)
def test_bad_options_are_one_sentence(tmp_path: Path, args: list[str], says: str) -> None:
    done = croft("export", str(FIXTURES / "sample"), "--to", str(tmp_path / "x"), *args)
    assert done.returncode != 0
    assert says in done.stderr and "Traceback" not in done.stderr


def test_a_foreign_state_file_is_refused(tmp_path: Path) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "_croft_export.json").write_text('{"version": 1, "sources": [{"node": 1}]}')
    done = croft("export", str(FIXTURES / "sample"), "--to", str(export))
    assert done.returncode == 1
    assert "is not croft export's state" in done.stderr and "Traceback" not in done.stderr


def test_short_lived_summaries_are_exported_and_null_elsewhere(tmp_path: Path) -> None:
    carrier = attrs.evolve(
        make_row(100, START_MS),
        short_lived=ShortLived(processes=3, syscalls=(SyscallRate(name="execve", rate_per_sec=1.5),)),
    )
    node = tmp_path / "nodes" / "node-0"
    node.mkdir(parents=True)
    (node / "croft-dataset.jsonl").write_bytes(
        codec.encode_row(carrier) + codec.encode_row(make_row(101, START_MS))
    )
    export = tmp_path / "export"
    assert croft("export", str(tmp_path / "nodes"), "--to", str(export)).returncode == 0
    part = next(export.rglob("part-*.parquet"))
    back = (
        duckdb.connect()
        .execute(f"SELECT tgid, short_lived FROM read_parquet('{part}') ORDER BY 1")
        .fetchall()
    )
    assert back == [
        (100, {"processes": 3, "syscalls": [{"name": "execve", "rate_per_sec": 1.5}]}),
        (101, None),
    ]
