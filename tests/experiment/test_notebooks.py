"""labs/research's notebooks: committed without outputs, and executed (nbclient, a real Python
kernel) as a fresh clone has them (no runs of the user's own), where each opens the small real run of
fixtures/research-run, says so first, and must draw its figures (SVG and PDF) and write its tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from croft.runs.rundir import read_records
from tests.helpers.notebooks import (
    FIXTURE,
    NOTEBOOKS,
    REPO,
    execute,
    first_output,
    fresh_research,
    outputs_of,
)

pytestmark = pytest.mark.slow


def committed_notebooks() -> list[Path]:
    return sorted(p for p in (REPO / "labs").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def test_the_two_notebooks_exist() -> None:
    assert {p.name for p in committed_notebooks()} >= set(NOTEBOOKS)


@pytest.mark.parametrize("notebook", committed_notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_carry_no_outputs(notebook: Path) -> None:
    cells = json.loads(notebook.read_text())["cells"]
    dirty = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{notebook.name}: cells {dirty} have outputs or execution counts; clear them"


def test_the_fixture_is_small() -> None:
    size = sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file())
    assert 0 < size < 1_000_000, size


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as src:
        return list(csv.DictReader(src))


def _assert_figure(stem: Path) -> None:
    svg = stem.with_suffix(".svg")
    assert svg.stat().st_size > 1000 and b"<svg" in svg.read_bytes()[:1000], svg
    assert stem.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-", stem


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Both notebooks run from a fresh clone's labs/research, no inputs named."""
    out = tmp_path_factory.mktemp("figures")
    research = fresh_research(tmp_path_factory.mktemp("clone"))
    return {name: (out, execute(research / name, None, None, out)) for name in NOTEBOOKS}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_fresh_clone_opens_the_committed_recording_and_says_so_first(
    executed: dict[str, tuple[Path, Any]], name: str
) -> None:
    _, nb = executed[name]
    first = first_output(nb)
    assert first.startswith("No runs of your own under experiment/data/web"), first
    assert f"opening the committed recording {FIXTURE}" in first, first


def test_burst_signals_draws_each_run_and_the_mean(executed: dict[str, tuple[Path, Any]]) -> None:
    out, nb = executed["burst_signals.ipynb"]
    runs = [r.run for r in read_records(FIXTURE / "web")]
    assert len(runs) >= 2
    for run in runs:
        _assert_figure(out / f"burst_signals-{run}")
    _assert_figure(out / "burst_signals-mean_sd")
    text = outputs_of(nb)
    # each run joined to croft's rows by container id
    for run in runs:
        joined = next(line for line in text.splitlines() if line.startswith(f"{run}:"))
        assert " 0 dataset rows" not in joined, joined
    # the fixture's collector wrote the ingress object: the notebook finds it as offered load
    assert "offered-load fields in the rows: ingress." in text, text
    rows = _rows(out / "burst_signals.csv")
    for run in runs:
        signals = {r["signal"] for r in rows if r["run"] == run}
        wanted = {"p95 latency", "spec.replicas", "sendto()", "cgroup cpu_cores", "PSI cpu_pressure_avg10"}
        assert wanted <= signals, signals
        assert any(s.startswith("prom ") for s in signals), signals


def test_lead_time_has_one_row_per_signal_per_run(executed: dict[str, tuple[Path, Any]]) -> None:
    out, nb = executed["lead_time.ipynb"]
    runs = {r.run for r in read_records(FIXTURE / "web")}
    rows = _rows(out / "lead_times.csv")
    signals = {r["signal"] for r in rows}
    pairs = [(r["signal"], r["run"]) for r in rows]
    assert sorted(pairs) == sorted((s, run) for s in signals for run in runs)
    assert {
        "sendto()",
        "cgroup cpu_cores",
        "ingress.tcp_data_segments_s",
        "ingress.listen_backlog",
    } <= signals
    # the fixture's burst saturates the pod: p95 crosses 500 ms in every run, and sendto is seen
    # p95 crossed 500 ms in some runs (the croft arm's here), and sendto gave those a lead time; a run
    # whose p95 stayed under it keeps its rows, saying so
    assert any(r["lead_s"] for r in rows if r["signal"] == "sendto()")
    for r in rows:
        assert r["objective_crossed_s"] or not r["lead_s"], r
        assert bool(r["lead_s"]) != bool(r["note"]), r  # no lead time: the note says why
    dists = _rows(out / "lead_time_distribution.csv")
    assert [d["signal"] for d in dists] == list(dict.fromkeys(r["signal"] for r in rows))
    assert all(int(d["runs"]) == len(runs) for d in dists)
    _assert_figure(out / "lead_time")
    assert "Lead time = objective crossed - detected" in outputs_of(nb)
    # per signal, arm and shape: the fixture's bursts ramp to their peak in 10 s
    shapes = _rows(out / "lead_time_per_shape.csv")
    assert {r["shape_s"] for r in shapes} == {"10"}
    assert {(r["signal"], r["arm"]) for r in shapes} == {
        (r["signal"], a) for r in rows for a in ("hpa", "croft")
    }
    assert all(int(r["runs"]) == 2 for r in shapes)
    assert "10 s ramp" in outputs_of(nb)
