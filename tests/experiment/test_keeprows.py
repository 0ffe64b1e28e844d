"""keeprows.py and the real runs' lead times of `run.py answer --real`: the rows the runs read, kept
from a node's dataset as a compressed segment of croft's own, give the same signals as the whole
dataset; a run set with its dataset beside it has every signal's lead time, one without has only
Prometheus's and croft scale's. Driven by the committed real runs of 2026-12-06 (results/)."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import zstandard

import boundary_answer
import burst_series
import keeprows
from croft import dataset
from croft.domain.dataset.codec import encode_row
from croft.runs.rundir import append_record, read_records

REAL = Path(keeprows.__file__).parent / "results" / "real-20261206"
KEEPROWS_PY = Path(keeprows.__file__)


def _lines(directory: Path) -> list[bytes]:
    out = []
    for path in sorted(directory.rglob("croft-dataset*")):
        data = path.read_bytes()
        if path.suffix == ".zst":
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        out += data.splitlines(keepends=True)
    return out


def test_keeping_a_kept_dataset_for_all_its_runs_keeps_every_line(tmp_path: Path) -> None:
    kept = keeprows.keep_rows([REAL / "web"], REAL / "nodes", tmp_path / "kept")
    assert kept.kept == kept.read == len(_lines(REAL / "nodes")) > 1000
    assert _lines(tmp_path / "kept") == _lines(REAL / "nodes")
    [(segment, size)] = kept.segments
    assert segment == tmp_path / "kept" / "croft-node" / "croft-dataset-20261206T064047Z.jsonl.zst"
    assert size == segment.stat().st_size
    assert not list(segment.parent.glob("*.jsonl"))  # the plain segment is gone once compressed


def test_only_the_runs_containers_within_their_windows_are_kept(tmp_path: Path) -> None:
    one = read_records(REAL / "web")[0]
    runs = tmp_path / "web"
    runs.mkdir()
    append_record(runs, one)
    # a live file beside the committed segment: one row of another container, one of the run's
    # container long after its window; both are left out
    source = tmp_path / "nodes" / "croft-node"
    shutil.copytree(REAL / "nodes" / "croft-node", source)
    row = next(dataset.rows(REAL / "nodes", container_id=one.containers[0][1]))
    stranger = row.__class__(
        **{f: getattr(row, f) for f in row.__struct_fields__ if f != "process"},
        process=row.process.__class__(
            **{f: getattr(row.process, f) for f in row.process.__struct_fields__ if f != "container_id"},
            container_id="f" * 64,
        ),
    )
    late = row.__class__(
        **{f: getattr(row, f) for f in row.__struct_fields__ if f != "unix_ms"},
        unix_ms=one.window_end_ms + 3_600_000,
    )
    (source / "croft-dataset.jsonl").write_bytes(encode_row(stranger) + encode_row(late))
    kept = keeprows.keep_rows([runs], tmp_path / "nodes", tmp_path / "kept")
    rows = list(dataset.rows(tmp_path / "kept"))
    ids = {cid for _, cid in one.containers}
    low = one.window_start_ms - burst_series.POLL_MARGIN_MS
    high = one.window_end_ms + burst_series.AFTER_MS
    assert rows and all(r.process.container_id in ids and low <= r.unix_ms <= high for r in rows)
    expected = burst_series.dataset_rows(tmp_path / "nodes", ids, low, high)
    assert len(rows) == kept.kept == len(expected)
    assert kept.read > kept.kept


def test_keeprows_mistakes_are_one_sentence(tmp_path: Path) -> None:
    def run(to: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(KEEPROWS_PY), "--runs", str(REAL / "web"), "--dataset", str(REAL / "nodes"),
             "--to", str(to)],
            capture_output=True, text=True, timeout=120, cwd=KEEPROWS_PY.parent,
        )  # fmt: skip

    out = run(REAL / "nodes")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    said = f"keeprows.py: {REAL / 'nodes'} holds a dataset already: name an empty directory with --to\n"
    assert out.stderr == said
    empty = tmp_path / "web"
    empty.mkdir()
    (empty / "runs.jsonl").write_text("")
    out = subprocess.run(
        [sys.executable, str(KEEPROWS_PY), "--runs", str(empty), "--dataset", str(REAL / "nodes"),
         "--to", str(tmp_path / "kept")],
        capture_output=True, text=True, timeout=120, cwd=KEEPROWS_PY.parent,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.startswith("keeprows.py: no run under ")


def test_real_lead_times_read_the_dataset_beside_the_runs(tmp_path: Path) -> None:
    lines = boundary_answer.real_lead_times(*boundary_answer.real_with_rows([REAL / "web"]), tmp_path)
    text = "\n".join(lines)
    assert f"{REAL / 'web'}: 15 runs, croft's dataset {REAL / 'nodes'}" in text
    with (tmp_path / "lead-time-real.csv").open() as src:
        rows = list(csv.DictReader(src))
    columns = ["signal", "arm", "bound_s", "shape_s", "runs", "detected", "mean_s", "sd_s"]
    assert list(rows[0]) == [*columns, "min_s", "max_s"]
    by = {(r["signal"], r["arm"]): r for r in rows}
    # the kernel's, the cgroup's and Prometheus's signals, every arm: 5 runs each at the 120 s ramp
    for signal in ("sendto()", "ingress.tcp_data_segments_s", "cgroup cpu_cores", "prom cpu_cores"):
        for arm in ("hpa", "croft-sendto", "croft-offered"):
            assert (by[signal, arm]["runs"], by[signal, arm]["shape_s"]) == ("5", "120")
    assert by["croft scale estimate", "croft-offered"]["runs"] == "5"
    # p95 crossed the objective in every HPA run: each lead time is detected, and its spread stated
    assert by["sendto()", "hpa"]["detected"] == "5" and by["sendto()", "hpa"]["sd_s"]
    mean, low, high = (float(by["sendto()", "hpa"][k]) for k in ("mean_s", "min_s", "max_s"))
    assert low <= mean <= high
    ahead = [
        r["signal"] for r in rows if r["arm"] == "hpa" and r["detected"] == "5" and float(r["min_s"]) > 0
    ]
    said = next(line for line in lines if line.startswith("120 s ramp, bound 10 s, hpa: "))
    assert said.startswith(f"120 s ramp, bound 10 s, hpa: {len(ahead)} of ") and "; earliest: " in said
    assert all(name in ahead for name in ("sendto()", "cgroup cpu_cores"))


def test_without_a_dataset_beside_the_runs_only_prometheus_and_the_scaler_s_signals(tmp_path: Path) -> None:
    shutil.copytree(REAL / "web", tmp_path / "web")
    text = "\n".join(
        boundary_answer.real_lead_times(*boundary_answer.real_with_rows([tmp_path / "web"]), None)
    )
    said = "15 runs, no croft dataset beside them (nodes/): Prometheus's and croft scale's signals only"
    assert said in text
    assert "prom cpu_cores" in text and "croft scale estimate" in text
    assert "sendto()" not in text and "cgroup cpu_cores" not in text
    assert not (tmp_path / "lead-time-real.csv").exists()
