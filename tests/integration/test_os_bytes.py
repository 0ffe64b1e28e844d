"""Names the kernel gives as bytes, whatever bytes: a process's comm, exe,
cwd, arguments and mapped libraries and its cgroup's path go from procfs and cgroupfs (the real
adapters, on trees written as files) through the collector (core, dataset writer, trace recorder,
/metrics) to the written line, and back through every reader (croft.dataset, stats, stats
--containers, profile, top, export): each byte that is not part of valid UTF-8 is written as
`\\xNN` (docs/dataset.md), nothing crashes, and the cgroup's figures are read by its real bytes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.fake_kernel import FakeKernel
from tests.helpers.proc_tree import FakeProcess, memory_bytes, write_cgroups, write_proc

from croft import dataset
from croft.adapters.dataset.export import run_export
from croft.adapters.dataset.scan import read_containers, read_profile, read_stats
from croft.adapters.dataset.tail import read_newest
from croft.adapters.dataset.writer import DatasetWriter
from croft.adapters.host.cgroupfs import CgroupFS
from croft.adapters.host.poller import LiveSource, UnavailableGpu
from croft.adapters.host.procfs import ProcFS
from croft.adapters.host.trace import TraceRecorder, read_trace
from croft.adapters.http.metrics import SnapshotCollector, exposition_body, metrics_page
from croft.app.bootstrap import load_catalog
from croft.app.collector import Pipeline
from croft.app.metrics_publisher import MetricsPublisher
from croft.domain.collector.frameworks import Matcher
from croft.domain.collector.rows import CollectorConfig
from croft.domain.dataset.profile import Subject
from croft.domain.dataset.rotation import Limits
from croft.domain.instant import Instant

T0_MS = 1_792_505_950_000
CONTAINER = "ab" * 32
LIVE = "croft-dataset.jsonl"


def written(name: bytes) -> str:
    """What docs/dataset.md says a name is written as: UTF-8, each other byte as `\\xNN`."""
    return name.decode("utf-8", "backslashreplace")


# Bytes that are not UTF-8 more often than arbitrary bytes would be, and valid multi-byte ones.
_ODD = st.sampled_from([b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", b"\\xff", b"\x1c"])
_BYTES = st.lists(st.one_of(st.binary(min_size=1, max_size=3), _ODD), max_size=6).map(b"".join)


def _no(*forbidden: bytes) -> st.SearchStrategy[bytes]:
    return _BYTES.map(lambda raw: raw.translate(None, b"".join(forbidden)))


def _path_names() -> st.SearchStrategy[bytes]:
    """A name within a path: no '/', no NUL, not '.' or '..', not empty (the kernel's rules for a
    cgroup's name, which also refuses a newline)."""
    return _no(b"/", b"\0", b"\n").filter(lambda name: name not in (b"", b".", b".."))


@st.composite
def processes(draw: st.DrawFn) -> list[FakeProcess]:
    """A host process in a watched cgroup of odd bytes, and a container's process below one."""
    out = []
    for pid, inside in ((4242, False), (4243, True)):
        cgroup = b"/w" + b"".join(b"/" + draw(_path_names()) for _ in range(draw(st.integers(1, 2))))
        if inside:
            cgroup += b"/docker-" + CONTAINER.encode() + b".scope"
        out.append(
            FakeProcess(
                pid=pid,
                comm=draw(_no(b"\0"))[:15] or b"x",
                exe=b"/" + draw(_no(b"\0")),
                cwd=b"/" + draw(_no(b"\0")),
                cmdline=tuple(draw(st.lists(_no(b"\0").filter(bool), min_size=1, max_size=3))),
                cgroup=cgroup,
                library=draw(_no(b"\0", b"/", b"\n")) + b".so",
            )
        )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(processes())
def test_every_name_of_bytes_reaches_every_reader_escaped_and_its_cgroup_is_read(
    given_processes: list[FakeProcess],
) -> None:
    with tempfile.TemporaryDirectory() as where:
        root = Path(where)
        rows = collect(root, given_processes)
        assert {row.tgid for row in rows} == {p.pid for p in given_processes}
        for row in rows:
            process = next(p for p in given_processes if p.pid == row.tgid)
            assert (row.process.comm, row.process.exe, row.process.cwd, row.process.cgroup) == (
                written(process.comm),
                written(process.exe),
                written(process.cwd),
                written(process.cgroup),
            )
            # The cgroup's own files, found by its real bytes.
            assert row.cgroup_usage.memory_bytes == memory_bytes(process)
            assert row.cgroup_usage.cpu_cores > 0 and row.cgroup_usage.cpu_pressure_avg10 == 1.5
        assert_every_reader_reads(root, rows)


def collect(root: Path, given_processes: list[FakeProcess]) -> list[dataset.Row]:
    """Two polls of the real adapters over the trees, through croft run's pipeline (dataset writer,
    trace recorder, /metrics); the rows of the second poll as read back from the live file. The
    recorded trace, replayed, writes the same lines."""
    proc, cgroups = root / "proc", root / "cgroup"
    cgroups.mkdir()
    (cgroups / "cgroup.controllers").write_bytes(b"cpu memory io\n")  # a v2 tree, found at start
    source = LiveSource(ProcFS(proc), CgroupFS(cgroups), FakeKernel(), UnavailableGpu(), ("w",))
    config = CollectorConfig(watch=("w",), matcher=Matcher(load_catalog(None)), node="n")
    writer = DatasetWriter(root / "data" / LIVE, Limits(), background=False)
    metrics = SnapshotCollector()
    publisher = MetricsPublisher(metrics, writer.counters, lambda: 0, live=False)
    pipeline = Pipeline(config, writer, TraceRecorder(root / "trace", "w", "n"), publisher)
    for poll in range(2):
        write_proc(proc, given_processes, cpu_ticks=100 + 50 * poll)
        write_cgroups(cgroups, given_processes, usage_usec=1_000_000 + 700_000 * poll)
        pipeline.feed(source.poll(Instant(T0_MS + 2000 * poll, (10 + 2 * poll) * 10**9)))
    pipeline.close()
    page = exposition_body(metrics_page(metrics)).decode("utf-8")
    host = next(p for p in given_processes if p.pid == 4242)
    escaped = written(host.cgroup).replace("\\", "\\\\").replace('"', '\\"')
    assert f'cgroup="{escaped}"' in page
    lines = (root / "data" / LIVE).read_bytes()
    (trace,) = (root / "trace").iterdir()
    replayed = DatasetWriter(root / "replay" / LIVE, Limits(), background=False)
    again = Pipeline(config, replayed)
    for poll in read_trace(trace):
        again.feed(poll)
    again.close()
    assert (root / "replay" / LIVE).read_bytes() == lines
    return list(dataset.rows(root / "data" / LIVE))


def assert_every_reader_reads(root: Path, rows: list[dataset.Row]) -> None:
    data = root / "data"
    said: list[str] = []
    assert list(dataset.rows(data, on_skip=said.append)) == rows and not said
    facts, stats = read_stats(data, syscalls=True)
    summary = stats.summary(facts).to_json()
    assert (summary["rows"], summary["skipped_lines"]) == (len(rows), 0)
    _, containers = read_containers(data)
    assert {entry.cgroup for entry in containers.listing()} == {row.process.cgroup for row in rows}
    for row in rows:
        subject = Subject("cgroup", row.process.cgroup)
        found = read_profile(data, "", None, None, subject=subject)
        assert found.matching_ids() == (row.process.cgroup,)
    found = read_profile(data, CONTAINER[:8], None, None)
    assert found.matching_ids() == (CONTAINER,)
    (newest,) = read_newest(data, "here").polls
    assert list(newest.rows) == rows
    export = root / "export"
    done = run_export(data, export, compression="zstd", row_group_mb=1, workers=1)
    assert done.rows == len(rows)
    table = pq.read_table(next(export.rglob("part-*.parquet")))
    processes_back = sorted(table.column("process").to_pylist(), key=lambda p: p["comm"] + p["cwd"])
    assert [(p["comm"], p["exe"], p["cwd"], p["cgroup"]) for p in processes_back] == sorted(
        ((r.process.comm, r.process.exe, r.process.cwd, r.process.cgroup) for r in rows),
        key=lambda p: p[0] + p[2],
    )


def test_a_cgroup_of_bytes_that_are_not_utf8_is_read_by_them(tmp_path: Path) -> None:
    """A cgroup alone: `bad\\xff\\xfe`'s figures come from its own files, not from nowhere."""
    process = FakeProcess(4242, b"x", b"/x", b"/", (b"x",), b"/w/bad\xff\xfe")
    rows = collect(tmp_path, [process])
    (row,) = rows
    assert row.process.cgroup == "/w/bad\\xff\\xfe"
    assert row.cgroup_usage.memory_bytes == memory_bytes(process)
    assert row.cgroup_usage.cpu_cores == 0.35  # 700 ms of CPU over 2 s


def test_the_written_form_is_the_one_files_names_use() -> None:
    from croft.adapters.dataset.files import shown

    assert shown(Path(os.fsdecode(b"/d/node-\xff"))) == written(b"/d/node-\xff") == "/d/node-\\xff"
