"""croft export read by Spark in local mode (pyspark from PyPI, Java from Debian): the hive partitions
are discovered and Spark's answers equal croft stats --json and croft profile."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.cli import croft
from tests.helpers.parquet import (
    DATASETS,
    PROFILE_KEYS,
    STATS_KEYS,
    profile_answers,
    profile_sql,
    stats_sql,
)

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.skip("no Java runtime: scripts/system-deps.sh installs openjdk-17-jre-headless as root")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("croft-export-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_spark_reads_the_partitions_and_answers_as_croft_does(
    spark: Any, tmp_path: Path, dataset: str
) -> None:
    nodes = DATASETS[dataset](tmp_path)
    export = tmp_path / "export"
    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    view = f"croft_{abs(hash(dataset))}"
    spark.read.parquet(str(export)).createOrReplaceTempView(view)
    fields = {f.name: f.dataType.simpleString() for f in spark.table(view).schema.fields}
    assert fields["node"] == fields["hour"] == "string" and fields["time"] == "timestamp"
    assert fields["unix_ms"] == "bigint"
    assert fields["syscalls"] == "array<struct<name:string,rate_per_sec:double>>"

    stats = croft("stats", str(nodes), "--json")
    assert done.stderr.splitlines() == stats.stderr.splitlines()
    theirs = json.loads(stats.stdout)
    got = spark.sql(stats_sql(view, spark=True)).first().asDict()
    assert got == {key: theirs[key] for key in STATS_KEYS}
    nodes_seen = spark.sql(f"SELECT DISTINCT node FROM {view} ORDER BY node").collect()
    assert [r["node"] for r in nodes_seen] == theirs["nodes"]

    ids = [
        r["c"]
        for r in spark.sql(
            f"SELECT DISTINCT process.container_id AS c FROM {view} "
            "WHERE process.container_id IS NOT NULL ORDER BY c"
        ).collect()
    ]
    for cid in (ids[0], ids[-1]):
        profile = profile_answers(json.loads(croft("profile", cid, "--dataset", str(nodes)).stdout))
        row = spark.sql(profile_sql(view, cid, spark=True)).first()
        got = {key: float(row[key]) for key in PROFILE_KEYS}
        assert got == pytest.approx(profile, rel=1e-12), cid
