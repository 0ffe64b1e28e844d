"""Every reader counts the same damaged dataset the same way: `croft stats`, `croft stats --json`,
`croft profile`, `croft top` and the library API (`croft.dataset`), each against the reference
model (tests/helpers/reader_model.py: every line judged by the codec). The dataset holds each
hostile input that once crashed a reader or was counted differently by two of them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import msgspec
import pytest
import zstandard
from tests.helpers.cli import croft
from tests.helpers.reader_model import FileModel, model_file, newest_poll, skip_report
from tests.helpers.rows import EXAMPLE_CONTAINER, T0_MS, make_row

from croft import dataset
from croft.adapters.dataset.scan import read_stats
from croft.adapters.dataset.tail import read_newest
from croft.domain.dataset import codec
from croft.domain.dataset.lines import MAX_LINE_BYTES
from croft.domain.top.table import HELD_POLLS

SEGMENT = "croft-dataset-20261020T141910Z.jsonl.zst"
SEGMENT_2 = "croft-dataset-20261020T142010Z.jsonl.zst"
LIVE = "croft-dataset.jsonl"
OTHER = "ab12cd34" + "0" * 56  # a second container


def row_line(tgid: int, unix_ms: int, container: str | None = EXAMPLE_CONTAINER, **changes: object) -> bytes:
    value = codec.row_to_dict(make_row(tgid, unix_ms, container_id=container))
    value.update(changes)
    return msgspec.json.encode(value)


def hostile_lines(unix_ms: int) -> list[bytes]:
    """One line of each kind that a reader once got wrong; each mentions the example container."""
    good = row_line(900, unix_ms)
    nested = b'{"unix_ms":%d,"x":' % unix_ms + b"[" * 1000 + b"]" * 1000 + b"}"
    return [
        good[:-1] + b',"extra":1}',  # an extra key
        good.replace(b'"comm":"python"', b'"comm":"py\xffthon"'),  # invalid UTF-8
        good + good,  # two objects on one line
        nested + EXAMPLE_CONTAINER.encode(),  # nesting 1000 deep
        good.replace(b'"unix_ms":%d' % unix_ms, b'"unix_ms":%d' % 2**64),  # unix_ms beyond 64 bits
        re.sub(rb'"memory_bytes":\d+', b'"memory_bytes":1' + b"0" * 30, good),  # memory beyond 64 bits
        row_line(902, 10**17),  # unix_ms beyond the calendar
        good.replace(b'"cpu_cores":0.5', b'"cpu_cores":1e400', 1),  # not a finite number
        b"   ",  # blank: nothing
        b"not json " + EXAMPLE_CONTAINER.encode(),
        b'{"unix_ms": 1, "container_id": "%s"}' % EXAMPLE_CONTAINER.encode(),  # JSON, not a row
        good.replace(b'"tgid":900', b'"tgid":true'),
    ]


def poll_bytes(unix_ms: int, tgids: range, container: str | None = EXAMPLE_CONTAINER) -> bytes:
    return b"".join(row_line(t, unix_ms, container) + b"\n" for t in tgids)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[FileModel]]:
    """Two nodes (one named with bytes that are not UTF-8); segments good, truncated and empty; a
    FIFO where a segment would be; hostile lines and a line over 1 MiB in the live files; a torn
    last line being written."""
    root = tmp_path_factory.mktemp("damaged")
    gpu = root / "gpu-a"
    odd = Path(os.fsdecode(bytes(root) + b"/node-\xff"))
    models: list[FileModel] = []
    for k, node_dir in enumerate([gpu, odd]):
        node_dir.mkdir()
        node = "gpu-a" if k == 0 else "node-\\xff"
        t = T0_MS + 100_000 * k
        first = poll_bytes(t, range(10, 14)) + poll_bytes(t + 2000, range(10, 12), OTHER)
        (node_dir / SEGMENT).write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(first))
        second = zstandard.ZstdCompressor(write_checksum=True).compress(
            poll_bytes(t + 4000, range(20, 25)) + b"\n".join(hostile_lines(t + 4000)) + b"\n"
        )
        (node_dir / SEGMENT_2).write_bytes(second[: len(second) * 2 // 3] if k == 0 else b"")
        live = (
            poll_bytes(t + 6000, range(30, 33))
            + b"\n".join(hostile_lines(t + 8000)) + b"\n"
            + b"x" * (MAX_LINE_BYTES + 10) + b"\n"
            + poll_bytes(t + 8000, range(40, 44))
            + b"\n".join(hostile_lines(t + 8000)[:3]) + b"\n"
            + poll_bytes(t + 10_000, range(50, 53))
            + row_line(60, t + 12_000)[:90]  # the next poll, being written
        )  # fmt: skip
        (node_dir / LIVE).write_bytes(live)
        models += [model_file(node_dir / SEGMENT, node), model_file(node_dir / SEGMENT_2, node)]
        models.append(model_file(node_dir / LIVE, node))
    fifo = gpu / "croft-dataset-20261020T141950Z.jsonl.zst"
    os.mkfifo(fifo)
    models.insert(1, model_file(fifo, "gpu-a", problem="it is a FIFO (named pipe), not a dataset file"))
    return root, models


def stderr_skips(stderr: str) -> tuple[str, ...]:
    return tuple(line.removeprefix("croft: ") for line in stderr.splitlines())


def test_the_model_sees_every_kind_of_damage(damaged: tuple[Path, list[FileModel]]) -> None:
    _, models = damaged
    kinds = sum((m.skipped() for m in models), start=__import__("collections").Counter())
    assert set(kinds) == {"too long", "not JSON", "not a row", "torn last line"}
    assert {m.damaged for m in models} >= {
        "truncated zstd data (the file ends inside a frame)",
        "truncated zstd data (the file is empty)",
        "it is a FIFO (named pipe), not a dataset file",
    }


def test_stats_json_and_the_summary_count_every_row_and_skip_as_the_model(
    damaged: tuple[Path, list[FileModel]],
) -> None:
    root, models = damaged
    rows = [(m.node, r) for m in models for r in m.rows]
    out = croft("stats", str(root), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["rows"] == len(rows)
    assert got["skipped_lines"] == sum(sum(m.skipped().values()) for m in models)
    assert got["nodes"] == ["gpu-a", "node-\\xff"]
    assert got["polls"] == len({(n, r.unix_ms) for n, r in rows})
    assert got["processes"] == len({(n, r.tgid) for n, r in rows})
    assert stderr_skips(out.stderr) == skip_report(models)
    human = croft("stats", str(root), env={"COLUMNS": "120"})
    assert human.returncode == 0, human.stderr
    assert re.search(rf"\nrows +{len(rows):,} *\n", human.stdout), human.stdout
    assert stderr_skips(human.stderr) == skip_report(models)
    # A pool of workers over small parts of the files counts the same.
    facts, pooled = read_stats(root, syscalls=True, workers=2, inline_bytes=0, part_bytes=50_000)
    assert pooled.summary(facts).to_json() == got
    assert pooled.skips.report() == skip_report(models)


def test_the_library_yields_the_models_rows_in_order_and_reports_its_skips(
    damaged: tuple[Path, list[FileModel]],
) -> None:
    root, models = damaged
    said: list[str] = []
    got = list(dataset.node_rows(root, on_skip=said.append))
    assert got == [(m.node, r) for m in models for r in m.rows]
    assert tuple(said) == skip_report(models)
    said.clear()
    mine = list(dataset.node_rows(root, container_id=EXAMPLE_CONTAINER[:8], on_skip=said.append))
    assert mine == [
        (m.node, r) for m in models for r in m.rows if r.process.container_id == EXAMPLE_CONTAINER
    ]
    assert tuple(said) == skip_report(models, EXAMPLE_CONTAINER[:8].encode())


def test_profile_counts_the_models_polls_and_the_skips_of_the_lines_it_judges(
    damaged: tuple[Path, list[FileModel]],
) -> None:
    root, models = damaged
    out = croft("profile", EXAMPLE_CONTAINER[:8], "--dataset", str(root))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    mine = [(m.node, r) for m in models for r in m.rows if r.process.container_id == EXAMPLE_CONTAINER]
    assert got["polls"] == len({(n, r.unix_ms) for n, r in mine})
    assert got["processes"] == len({(n, r.tgid) for n, r in mine})
    assert got["nodes"] == ["gpu-a", "node-\\xff"]
    assert stderr_skips(out.stderr) == skip_report(models, EXAMPLE_CONTAINER[:8].encode())


def test_top_shows_each_nodes_newest_poll_and_counts_the_lines_it_skipped(
    damaged: tuple[Path, list[FileModel]],
) -> None:
    root, models = damaged
    snapshot = read_newest(root, "here")
    live = [m for m in models if m.path.name == LIVE]
    expected = [newest_poll(m, HELD_POLLS) for m in live]
    assert [(p.node, list(p.rows)) for p in snapshot.polls] == [
        (m.node, rows) for m, (rows, _) in zip(live, expected, strict=True)
    ]
    torn = sum(1 for m in live if m.lines[-1][1] == "torn last line")
    assert snapshot.skipped_lines + torn == sum(skipped for _, skipped in expected)
    out = croft("top", "--once", "--dataset", str(root), env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "node-\\xff" in out.stdout
