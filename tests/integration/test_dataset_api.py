"""croft.dataset, the library API: rows in reading order, filters, nodes, and skip reports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.helpers.dataset import read_rows

from croft import dataset
from croft.domain.dataset import codec
from croft.errors import UserError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"


def test_rows_of_a_dataset_directory_are_every_row_in_time_order() -> None:
    got = list(dataset.rows(FIXTURES / "sample"))
    assert got == read_rows(FIXTURES / "sample")
    times = [r.unix_ms for r in got]
    assert times == sorted(times)


def test_node_rows_name_each_rows_node() -> None:
    got = list(dataset.node_rows(FIXTURES / "nodes"))
    assert [node for node, _ in got] == sorted(node for node, _ in got)
    for node in ("cpu-c", "gpu-a", "gpu-b"):
        assert [r for n, r in got if n == node] == read_rows(FIXTURES / "nodes" / node)
    assert {n for n, _ in dataset.node_rows(FIXTURES / "sample", host="lab-1")} == {"lab-1"}


def test_a_container_prefix_keeps_that_containers_rows_only() -> None:
    every = read_rows(FIXTURES / "sample")
    cid = next(r.process.container_id for r in every if r.process.container_id)
    assert cid is not None
    got = list(dataset.rows(FIXTURES / "sample", container_id=cid[:8]))
    assert got == [r for r in every if r.process.container_id == cid] and got


def test_the_time_window_is_inclusive_at_both_ends() -> None:
    every = read_rows(FIXTURES / "sample")
    low, high = every[100].unix_ms, every[400].unix_ms
    got = list(dataset.rows(FIXTURES / "sample", from_ms=low, to_ms=high))
    assert got == [r for r in every if low <= r.unix_ms <= high]
    assert got[0].unix_ms == low and got[-1].unix_ms == high


def test_files_lists_the_files_in_reading_order() -> None:
    names = [f.path.name for f in dataset.files(FIXTURES / "sample")]
    assert names[-1] == "croft-dataset.jsonl" and names[:-1] == sorted(names[:-1])


def test_skips_go_to_on_skip_once_the_iteration_ends() -> None:
    sentences: list[str] = []
    got = list(dataset.rows(FIXTURES / "damaged", on_skip=sentences.append))
    assert got and all(codec.decode_row(codec.encode_row(r)) == r for r in got)
    assert len(sentences) == 3
    assert sentences[0].startswith("skipped the rest of") and "corrupt.jsonl.zst" in sentences[0]
    assert "3 not rows" in sentences[2]


def test_without_on_skip_the_skips_are_logged_as_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="croft.dataset"):
        list(dataset.rows(FIXTURES / "damaged" / "garbage.jsonl"))
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped 1 line (1 not JSON) in {FIXTURES / 'damaged' / 'garbage.jsonl'} (1)"
    ]


def test_a_missing_path_raises_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        list(dataset.rows(tmp_path / "missing"))
