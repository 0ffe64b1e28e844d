"""croft export against real engines: DuckDB over the Parquet gives the answers of croft stats --json
and croft profile; re-runs export only what changed; damaged lines are skipped as stats skips them."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers.cli import croft
from tests.helpers.parquet import (
    DATASETS,
    FIXTURES,
    HOUR_MS,
    PROFILE_KEYS,
    START_MS,
    STATS_KEYS,
    fleet_rows,
    profile_answers,
    profile_sql,
    stats_sql,
    write_fleet,
    write_segment,
)
from tests.helpers.rows import make_row
from tests.helpers.strategies import rows, syscall_rates

from croft.domain.dataset import codec
from croft.domain.dataset.row import Row, ShortLived, SyscallRate

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")


def stats_of(path: Path) -> dict[str, object]:
    done = croft("stats", str(path), "--json")
    assert done.returncode == 0, done.stderr
    stats: dict[str, object] = json.loads(done.stdout)
    return stats


def table(export: Path) -> str:
    return f"read_parquet('{export / '**' / '*.parquet'}', hive_partitioning = true)"


def parquet_stats(con: Any, export: Path) -> dict[str, object]:
    return dict(zip(STATS_KEYS, con.execute(stats_sql(table(export))).fetchone(), strict=True))


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_duckdb_over_the_export_answers_as_croft_does(tmp_path: Path, dataset: str) -> None:
    nodes = DATASETS[dataset](tmp_path)
    export = tmp_path / "export"
    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    stats = croft("stats", str(nodes), "--json")
    assert stats.returncode == 0, stats.stderr
    # Skipped lines and files are reported as croft stats reports them, line for line.
    assert done.stderr.splitlines() == stats.stderr.splitlines()
    assert (dataset == "damaged fixtures") == bool(done.stderr)

    con = duckdb.connect()
    mine = parquet_stats(con, export)
    theirs = json.loads(stats.stdout)
    assert mine == {key: theirs[key] for key in STATS_KEYS}
    nodes_seen = con.execute(f"SELECT DISTINCT node FROM {table(export)} ORDER BY 1").fetchall()
    assert [node for (node,) in nodes_seen] == theirs["nodes"]
    assert done.stdout.startswith(
        f"exported {theirs['files'] - (2 if dataset == 'damaged fixtures' else 0)} files"
    )
    # Every row is in the part of its own UTC hour.
    wrong_hour = con.execute(
        f"SELECT count(*) FROM {table(export)} WHERE strftime(time, '%Y%m%dT%H') <> hour"
    ).fetchone()[0]
    assert wrong_hour == 0

    ids = [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT process.container_id FROM {table(export)} "
            "WHERE process.container_id IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    assert len(ids) == theirs["containers"]
    for cid in (ids[0], ids[-1]):
        done = croft("profile", cid, "--dataset", str(nodes))
        assert done.returncode == 0, done.stderr
        profile = profile_answers(json.loads(done.stdout))
        got = dict(zip(PROFILE_KEYS, con.execute(profile_sql(table(export), cid)).fetchone(), strict=True))
        assert got == pytest.approx(profile, rel=1e-12), cid


def test_types_and_nesting_are_kept(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    nodes = write_fleet(tmp_path / "nodes", nodes=1, hours=1)
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    part = next(export.rglob("part-*.parquet"))
    schema = pq.read_schema(part)
    assert str(schema.field("unix_ms").type) == "int64"  # an integer compares with an integer
    assert str(schema.field("time").type) == "timestamp[ms, tz=UTC]"  # a timestamp named as one
    assert str(schema.field("syscalls").type).startswith("list<element: struct<name: dictionary")
    assert str(schema.field("process").type).startswith("struct<comm: dictionary<values=string")
    # Every row comes back as it was written, key for key (the codec's JSON of both).
    con = duckdb.connect()
    rows = sorted(
        (json.loads(line) for line in (nodes / "node-0" / "croft-dataset.jsonl").read_bytes().splitlines()),
        key=lambda r: (r["unix_ms"], r["tgid"]),
    )
    # the query: `unix_ms` compares with a number, and `time` is the same instant
    live_hour = con.execute(
        f"SELECT epoch_ms(time), tgid, process.comm, syscalls FROM read_parquet('{part}') "
        f"WHERE unix_ms >= {rows[0]['unix_ms']} AND epoch_ms(time) = unix_ms ORDER BY 1, 2"
    ).fetchall()
    assert [(r[0], r[1], r[2]) for r in live_hour] == [
        (r["unix_ms"], r["tgid"], r["process"]["comm"]) for r in rows
    ]
    assert [list(map(dict, r[3])) for r in live_hour] == [r["syscalls"] for r in rows]


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
    carrier = msgspec.structs.replace(
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


def parts_of(export: Path) -> dict[str, tuple[int, int]]:
    """Each Parquet part, relative to the export, with its inode and mtime: a part rewritten, even
    with the same bytes, shows as changed."""
    return {
        str(p.relative_to(export)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in export.rglob("*.parquet")
    }


def export_agrees(nodes: Path, export: Path) -> None:
    assert parquet_stats(duckdb.connect(), export) == {k: stats_of(nodes)[k] for k in STATS_KEYS}


def test_a_second_export_with_nothing_new_writes_nothing(tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes", nodes=2, hours=2)
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    before, state = parts_of(export), (export / "_croft_export.json").read_bytes()

    again = croft("export", str(nodes), "--to", str(export))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("exported 0 files (0 rows, 0 parts") and "6 unchanged" in again.stdout
    assert parts_of(export) == before
    assert (export / "_croft_export.json").read_bytes() == state
    assert sorted(p.name for p in export.iterdir()) == ["_croft_export.json", "node=node-0", "node=node-1"]


def test_a_new_segment_writes_only_its_own_parts(tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes", nodes=2, hours=2)
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    before = parts_of(export)

    # A later collect brings node-1 a segment of a new hour (the live file unchanged).
    rows = fleet_rows(random.Random(3), 1, START_MS + 5 * HOUR_MS + 1000, 20)
    write_segment(nodes / "node-1" / "croft-dataset-20261020T190001Z.jsonl.zst", rows)
    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.startswith(f"exported 1 file ({len(rows)} rows, 1 parts") and "6 unchanged" in done.stdout
    )
    after = parts_of(export)
    assert {k: v for k, v in after.items() if k in before} == before
    assert set(after) - set(before) == {
        "node=node-1/hour=20261020T19/part-croft-dataset-20261020T190001Z.parquet"
    }
    export_agrees(nodes, export)


def test_a_changed_segment_is_exported_again_and_its_old_parts_go(tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes", nodes=2, hours=1)
    # A plain segment, so that one byte can change without changing the size.
    plain = write_segment(
        nodes / "node-0" / "croft-dataset-20261020T120001Z.jsonl",
        fleet_rows(random.Random(4), 0, START_MS - 2 * HOUR_MS + 1000, 10),
    )
    moved = nodes / "node-1" / "croft-dataset-20261020T140001Z.jsonl.zst"
    export = tmp_path / "export"
    assert croft("export", str(nodes), "--to", str(export)).returncode == 0
    before = parts_of(export)
    old_part = "node=node-1/hour=20261020T14/part-croft-dataset-20261020T140001Z.parquet"
    assert old_part in before

    # Same name and size, one different byte: a tgid 0..9 becomes another digit.
    data = plain.read_bytes()
    at = data.index(b'"tgid":') + len(b'"tgid":')
    changed = data[:at] + bytes([ord("0") + (data[at] - ord("0") + 1) % 10]) + data[at + 1 :]
    plain.write_bytes(changed)
    assert len(changed) == len(data) and changed != data
    # Same name, other size: node-1's segment now holds its rows an hour later.
    rows = [
        msgspec.structs.replace(r, unix_ms=r.unix_ms + HOUR_MS)
        for r in fleet_rows(random.Random(5), 1, START_MS + 1000, 30)
    ]
    write_segment(moved, rows)

    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exported 2 files") and "3 unchanged" in done.stdout
    after = parts_of(export)
    assert old_part not in after and (export / old_part).exists() is False
    assert "node=node-1/hour=20261020T15/part-croft-dataset-20261020T140001Z.parquet" in after
    rewritten = "node=node-0/hour=20261020T12/part-croft-dataset-20261020T120001Z.parquet"
    assert after[rewritten] != before[rewritten]
    untouched = {k: v for k, v in before.items() if k not in (old_part, rewritten)}
    assert {k: after[k] for k in untouched} == untouched
    export_agrees(nodes, export)


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("missing", "does not exist; give a dataset file or directory"),
        ("not a dataset", "holds no dataset files"),
        ("--to a file", "is not a directory; give a directory for the export"),
        ("--to inside a file", "a file; give a directory for the export"),
    ],
)
def test_bad_input_is_one_sentence_and_writes_nothing(tmp_path: Path, case: str, says: str) -> None:
    path, to = FIXTURES / "sample", tmp_path / "export"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("not a dataset\n")
    (tmp_path / "a-file").write_text("x")
    if case == "missing":
        path = tmp_path / "no-such-dataset"
    elif case == "not a dataset":
        path = tmp_path / "notes"
    elif case == "--to a file":
        to = tmp_path / "a-file"
    else:
        to = tmp_path / "a-file" / "export"
    done = croft("export", str(path), "--to", str(to))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("croft: ") and says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "export").exists() and (tmp_path / "a-file").read_text() == "x"


def test_compression_and_row_groups_are_as_asked(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    nodes = write_fleet(tmp_path / "nodes", nodes=1, hours=1)
    for codec_name, row_group_mb in (("zstd", 128.0), ("snappy", 0.05)):
        export = tmp_path / codec_name
        args = ["--compression", codec_name, "--row-group-mb", str(row_group_mb)]
        assert croft("export", str(nodes), "--to", str(export), *args).returncode == 0
        segment = pq.ParquetFile(next(export.rglob("part-croft-dataset-2*.parquet")))
        column = segment.metadata.row_group(0).column(0)
        assert column.compression == codec_name.upper()
        groups = segment.metadata.num_row_groups
        assert groups == 1 if row_group_mb == 128 else groups > 1
        export_agrees(nodes, export)


def test_a_pool_of_workers_writes_what_one_process_writes(tmp_path: Path) -> None:
    from croft.adapters.dataset.export import run_export

    nodes = write_fleet(tmp_path / "nodes")
    shutil.copytree(FIXTURES / "damaged", nodes / "node-9")
    one = run_export(nodes, tmp_path / "one", compression="zstd", row_group_mb=1, workers=1)
    # pyarrow is imported here, so this pool spawns its workers.
    pool = run_export(
        nodes, tmp_path / "spawned", compression="zstd", row_group_mb=1, workers=2, inline_bytes=0
    )
    assert (pool.exported, pool.rows, pool.parts_written) == (one.exported, one.rows, one.parts_written)
    assert pool.skips.report() == one.skips.report() and one.skips.report()
    # A process that has not imported pyarrow (as croft export runs) forks its workers.
    code = (
        "import sys; from pathlib import Path; from croft.adapters.dataset.export import run_export; "
        "run_export(Path(sys.argv[1]), Path(sys.argv[2]), compression='zstd', row_group_mb=1, workers=2, "
        "inline_bytes=0); assert 'pyarrow' not in sys.modules"
    )
    forked = subprocess.run(
        [sys.executable, "-c", code, str(nodes), str(tmp_path / "forked")], capture_output=True, text=True
    )
    assert forked.returncode == 0, forked.stderr

    def files(export: Path) -> dict[str, bytes]:
        return {str(p.relative_to(export)): p.read_bytes() for p in export.rglob("*") if p.is_file()}

    assert files(tmp_path / "spawned") == files(tmp_path / "one") == files(tmp_path / "forked")


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
short_lived = st.none() | st.builds(
    ShortLived, processes=st.integers(0, 2**40), syscalls=st.lists(syscall_rates, max_size=3).map(tuple)
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(rows(), short_lived), max_size=40), st.sampled_from([0.0005, 0.002, 128.0]))
def test_every_row_comes_back_from_parquet_as_it_was(
    drawn: list[tuple[Row, Any]], row_group_mb: float
) -> None:
    """The law of exact types: a part holds each row's every value (node apart: it is the
    partition), in order, whatever the row group size."""
    import tempfile

    import pyarrow.parquet as pq

    from croft.adapters.dataset.parquet import PartWriter

    written = [msgspec.structs.replace(row, node=None, short_lived=extra) for row, extra in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        writer = PartWriter(Path(tmp) / "part.parquet", compression="zstd", row_group_mb=row_group_mb)
        for at in range(0, len(written), 7):
            writer.add(written[at : at + 7])
        writer.close()
        back = pq.read_table(Path(tmp) / "part.parquet").to_pylist()
    for value in back:
        assert value.pop("time") == EPOCH + dt.timedelta(milliseconds=value["unix_ms"])
    assert [codec.row_from_dict(value) for value in back] == written


def test_the_dataset_path_defaults_as_croft_stats_does(tmp_path: Path) -> None:
    sample = FIXTURES / "sample"
    done = croft("export", "--to", str(tmp_path / "export"), env={"DATASET_PATH": str(sample)})
    assert done.returncode == 0, done.stderr
    assert parquet_stats(duckdb.connect(), tmp_path / "export") == {
        k: v for k, v in stats_of(sample).items() if k in STATS_KEYS
    }
