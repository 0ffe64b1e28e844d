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
from tests.helpers.parquet import PROFILE_FIGURES, write_fleet

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FIGURES = PROFILE_FIGURES


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


def test_spark_reads_the_partitions_and_answers_as_croft_does(spark: Any, tmp_path: Path) -> None:
    nodes = write_fleet(tmp_path / "nodes")
    export = tmp_path / "export"
    done = croft("export", str(nodes), "--to", str(export))
    assert done.returncode == 0, done.stderr
    spark.read.parquet(str(export)).createOrReplaceTempView("croft")
    assert {f.name for f in spark.table("croft").schema.fields} >= {"node", "hour", "process", "syscalls"}

    stats = json.loads(croft("stats", str(nodes), "--json").stdout)
    got = spark.sql(
        """SELECT count(*) AS rows, count(DISTINCT node, unix_ms) AS polls,
                  count(DISTINCT process.container_id) AS containers,
                  count(DISTINCT node, tgid) AS processes,
                  unix_millis(min(unix_ms)) AS first_ms, unix_millis(max(unix_ms)) AS last_ms,
                  count(DISTINCT node) AS nodes
           FROM croft"""
    ).first()
    for key in ("rows", "polls", "containers", "processes", "first_ms", "last_ms"):
        assert got[key] == stats[key], key
    assert got["nodes"] == len(stats["nodes"])

    cid = spark.sql("SELECT first(process.container_id, true) AS c FROM croft").first()["c"]
    profile = json.loads(croft("profile", cid, "--dataset", str(nodes)).stdout)
    figures = ", ".join(
        f"avg({f}) AS {f}_mean, percentile({f}, 0.95) AS {f}_p95, max({f}) AS {f}_max" for f in FIGURES
    )
    theirs = spark.sql(
        f"""WITH polls AS (
                SELECT node, unix_ms, max(cgroup_usage.cpu_cores) AS cpu_cores,
                       CAST(max(cgroup_usage.memory_bytes) AS DOUBLE) AS memory_bytes,
                       max(cgroup_usage.cpu_throttled_fraction) AS cpu_throttled_fraction,
                       max(cgroup_usage.cpu_pressure_avg10) AS cpu_pressure_avg10,
                       max(CASE WHEN workload IN ('gpu-onset', 'gpu-held') THEN 1.0 ELSE 0.0 END) AS gpu
                FROM croft WHERE process.container_id = '{cid}' GROUP BY node, unix_ms)
            SELECT count(*) AS polls, avg(gpu) AS gpu_poll_share, {figures} FROM polls"""
    ).first()
    assert theirs["polls"] == profile["polls"]
    assert float(theirs["gpu_poll_share"]) == pytest.approx(profile["gpu_poll_share"], rel=1e-12)
    for figure in FIGURES:
        for stat in ("mean", "p95", "max"):
            assert float(theirs[f"{figure}_{stat}"]) == pytest.approx(profile[figure][stat], rel=1e-9)
