"""Segment summaries travel with their segments: a segment the real DatasetWriter closed carries
its summary, croft collect's copy from a real collector server process keeps it trusted, and the
copy's answers with summaries equal a full scan's."""

from __future__ import annotations

from pathlib import Path

from croft.adapters.dataset.files import find_files
from croft.adapters.dataset.scan import read_containers, read_stats
from croft.adapters.dataset.summaries import load
from tests.helpers.collect import collector, copy_node, write_polls

START_MS = 1_792_505_950_000


def test_a_collected_segment_keeps_its_trusted_summary(tmp_path: Path) -> None:
    node = tmp_path / "node"
    node.mkdir()
    write_polls(node, 0, 40, START_MS)
    write_polls(node, 1000, 40, START_MS + 200_000)  # a second run: the first live file is a segment
    (segment,) = (f for f in find_files(node) if f.compressed)
    assert load(segment) is not None, "the writer's compression appended a summary"
    out = tmp_path / "out" / "node-a"
    with collector(node) as server:
        copy_node(server.url, out)
    (copied,) = (f for f in find_files(out) if f.compressed)
    assert copied.path.read_bytes() == segment.path.read_bytes()
    assert load(copied) is not None
    with_summaries = read_stats(out.parent, syscalls=True, workers=1)
    scanned = read_stats(out.parent, syscalls=True, workers=1, summaries=False)
    mine, theirs = with_summaries[1].summary(with_summaries[0]), scanned[1].summary(scanned[0])
    assert (mine.rows, mine.polls, mine.processes, mine.nodes) == (
        theirs.rows,
        theirs.polls,
        theirs.processes,
        theirs.nodes,
    )
    assert mine.to_json().keys() == theirs.to_json().keys() and mine.rows == 80 * 20
    assert (
        read_containers(out.parent, workers=1)[1].listing()
        == read_containers(out.parent, workers=1, summaries=False)[1].listing()
    )
