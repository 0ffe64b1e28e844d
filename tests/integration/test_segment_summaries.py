"""Segment summaries: the compressor appends one to each segment in a zstd skippable
frame, after a frame of per-poll figures; `croft stats` and `croft profile` answer from trusted
ones; every other reader still reads every row. The trust rule is the file's structure (the
summary ends the file, matches its own CRC-32, and names where the data ends); damage inside the
data is what `croft index --verify` finds. The law: for any dataset, with or without summaries, of
this version or the last, damaged or not, the answers read with summaries equal a full scan's once
`croft index --verify` has run, and without it wherever the damage changed the file's structure."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.rows import T0_MS, make_row

from croft.adapters.dataset.compressor import compress_segment
from croft.adapters.dataset.files import find_files
from croft.adapters.dataset.scan import read_containers, read_profile, read_stats
from croft.adapters.dataset.summaries import index, load
from croft.domain.dataset import codec
from croft.domain.dataset.profile import Subject
from croft.domain.dataset.rotation import Naming, SegmentName
from croft.domain.dataset.row import CgroupUsage, Pod, SyscallRate
from croft.domain.dataset.segments import FOOTER_BYTES, FOOTER_MAGIC, SKIPPABLE_MAGIC, decode, frame_start

ROOT = Path(__file__).resolve().parents[2]
NAMING = Naming.for_live("croft-dataset.jsonl")
IDS = ("abcd" + "1" * 60, "abcd" + "2" * 60, "ef01" + "3" * 60, None)
OTHER_CGROUP = "/kubepods/shared.slice"  # rows of several containers, and of each one's own cgroup too
HOUR = 3_600_000


# each container's pod, as a collector with API access names it (the last one's rows never do)
PODS = {
    IDS[0]: Pod(namespace="shop", name="web-0", container="web"),
    IDS[2]: Pod(namespace="shop", name="web-0"),
}


def line(draw: st.DrawFn, hour: int, pods: bool = True) -> bytes:
    container = draw(st.sampled_from(IDS))
    row = make_row(
        draw(st.integers(1, 6)),
        T0_MS + hour * HOUR + draw(st.integers(0, 5)) * 2000,
        container_id=container,
        cpu_cores=draw(st.sampled_from([0.0, 0.25, 1.5])),
        rss_bytes=draw(st.sampled_from([1 << 30, 3 << 29, 2**53 + 2])),
        cgroup=draw(st.sampled_from([None, None, OTHER_CGROUP])),
        workload=draw(st.sampled_from(["no-gpu", "no-gpu", "gpu-held"])),
        framework=draw(st.sampled_from([None, "pytorch", "vllm"])),
        syscalls=(SyscallRate(name=draw(st.sampled_from(["futex", "read"])), rate_per_sec=0.1),),
    )
    if pods and container in PODS and draw(st.booleans()):
        row = msgspec.structs.replace(row, pod=PODS[container])
    value = codec.row_to_dict(row)
    node = draw(st.sampled_from([None, "", "named"]))
    if node is not None:
        value["node"] = node
    gpus = draw(st.sampled_from(GPUS)) if value["workload"] == "gpu-held" else None
    if gpus is not None:  # percentages whose float sums would depend on the order they are added in
        value["gpus"] = gpus
    return msgspec.json.encode(value)


GPUS = (
    None,
    [{"index": 0, "uuid": "GPU-0", "memory_bytes": 3 << 29, "sm_percent": 33.33, "decoder_percent": 0.0}],
    [{"index": 1, "uuid": "GPU-1", "sm_percent": 0.1}, {"index": 0, "uuid": "GPU-0", "memory_bytes": 2**52}],
    [{"index": 0, "driver": "amdgpu", "engines": [{"name": "gfx", "busy_percent": 0.7}]}],
)


@st.composite
def segment(draw: st.DrawFn, hour: int, pods: bool = True) -> bytes:
    lines = [line(draw, hour, pods) for _ in range(draw(st.integers(1, 8)))]
    if draw(st.integers(0, 3)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), b"not json " + IDS[0][:8].encode())
    data = b"\n".join(lines) + b"\n"
    if draw(st.integers(0, 5)) == 0:
        data += lines[0][:20]  # a torn last line
    return data


DAMAGE = (
    "none",
    "none",
    "none",
    "no summary",
    "cut data",
    "flip data",
    "flip summary",
    "other summary",
    "version 2",
    "flip index",
    "flip figures",
)


@st.composite
def datasets(draw: st.DrawFn) -> dict[str, list[tuple[int, bytes, str]]]:
    nodes = {}
    for node in draw(st.lists(st.sampled_from(["n1", "n2"]), min_size=1, max_size=2, unique=True)):
        hours = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True))
        damages = [draw(st.sampled_from(DAMAGE)) for _ in hours]
        # a version 2 summary was written by a collector that named no pods
        nodes[node] = [
            (hour, draw(segment(hour, damage != "version 2")), damage)
            for hour, damage in zip(sorted(hours), damages, strict=True)
        ]
    return nodes


IN_PLACE = ("flip data", "other summary")  # damage that leaves the file's structure as it was


def changed_data(path: Path) -> bool:
    """Whether the data before `path`'s summary is not the data it was written for."""
    from croft.adapters.dataset.summaries import data_crc

    (f,) = find_files(path)
    summary = load(f)
    return summary is not None and data_crc(path, summary.data_bytes) != summary.crc32


def write(root: Path, spec: dict[str, list[tuple[int, bytes, str]]]) -> None:
    frames: list[bytes] = []
    for node, segments in spec.items():
        directory = root / node
        directory.mkdir()
        for hour, data, _ in segments:
            name = SegmentName(T0_MS // 1000 * 1000 + hour * HOUR)
            (directory / NAMING.plain(name)).write_bytes(data)
            compress_segment(directory, NAMING, name)
            path = directory / NAMING.compressed(name)
            whole = path.read_bytes()
            start = frame_start(whole[-FOOTER_BYTES:])
            frames.append(whole[start:] if start is not None else b"")
        for hour, _, damage in segments:
            path = directory / NAMING.compressed(SegmentName(T0_MS // 1000 * 1000 + hour * HOUR))
            whole = path.read_bytes()
            start = frame_start(whole[-FOOTER_BYTES:])
            assert start is not None, "every segment croft writes has a summary"
            data = whole[:start]
            if damage == "no summary":
                whole = data
            elif damage == "cut data":
                whole = data[: len(data) // 2] + whole[start:]
            elif damage == "flip data":
                at = len(data) // 2
                whole = data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1 :] + whole[start:]
            elif damage == "flip summary":
                at = start + 20
                whole = whole[:at] + bytes([whole[at] ^ 0x01]) + whole[at + 1 :]
            elif damage == "other summary":  # the frame of another segment (the last one written)
                whole = data + (frames[-2] if whole[start:] == frames[-1] and len(frames) > 1 else frames[-1])
            elif damage == "version 2":  # as croft wrote it before the per-poll figures
                whole = as_version_2(whole)
            elif damage in ("flip index", "flip figures"):  # in the per-poll figures' frame
                summary = decode(whole[start:], start)
                assert summary is not None and summary.profile is not None
                at = summary.data_bytes + 9 if damage == "flip index" else start - 1
                whole = whole[:at] + bytes([whole[at] ^ 0x01]) + whole[at + 1 :]
            path.write_bytes(whole)


def as_version_2(whole: bytes) -> bytes:
    """The segment `whole` as a version 2 summary framed it: the data, then the summary frame
    without the per-poll figures."""
    start = frame_start(whole[-FOOTER_BYTES:])
    assert start is not None
    body = msgspec.json.decode(whole[start + 8 : -FOOTER_BYTES])
    data_bytes = body["data_bytes"]
    body["version"] = 2
    del body["profile"]
    body["containers"] = [entry[:8] for entry in body["containers"]]  # no pods named before 4
    raw = msgspec.json.encode(body)
    payload = raw + data_bytes.to_bytes(8, "little") + zlib.crc32(raw).to_bytes(4, "little") + FOOTER_MAGIC
    return (
        whole[:data_bytes]
        + SKIPPABLE_MAGIC.to_bytes(4, "little")
        + len(payload).to_bytes(4, "little")
        + payload
    )


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def stats_answer(root: Path, summaries: bool) -> tuple[Any, ...]:
    facts, acc = read_stats(root, syscalls=True, workers=1, summaries=summaries)
    body = acc.summary(facts).to_json()
    busiest = body.pop("busiest_syscalls")
    shown = [(b["name"], pytest.approx(b["mean_per_s"], rel=1e-9)) for b in busiest]
    _, listing = read_containers(root, workers=1, summaries=summaries)
    return body, shown, acc.skips.report(), listing.listing(), listing.skips.report()


def profile_answer(
    root: Path, subject: Subject, window: tuple[int | None, int | None], summaries: bool
) -> Any:
    prefix = subject.value if subject.kind == "container" else ""
    acc = read_profile(root, prefix, *window, workers=1, subject=subject, summaries=summaries)
    tracks = {
        key: (t.first_ms, t.last_ms, t.polls, t.processes, t.container_ids) for key, t in acc.tracks.items()
    }
    ids = {cid for t in acc.tracks.values() for cid in t.container_ids}
    return tracks, acc.skips.report(), {cid: pod for cid, pod in acc.pods.items() if cid in ids}


SUBJECTS = (
    Subject("container", "abcd"),
    Subject("container", IDS[2]),
    Subject("cgroup", "/user.slice"),
    Subject("cgroup", OTHER_CGROUP),
    Subject("pid", "3"),
    Subject("pod", "shop/web-0"),
)
WINDOWS = ((None, None), (T0_MS + HOUR, T0_MS + 2 * HOUR - 1), (T0_MS + 3 * HOUR + 4000, None))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=datasets(), reindex=st.booleans())
def test_answers_with_summaries_equal_a_full_scan(
    scratch: Path, spec: dict[str, list[tuple[int, bytes, str]]], reindex: bool
) -> None:
    root = scratch / "dataset"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    write(root, spec)
    in_place = {
        f"{node}/{NAMING.compressed(SegmentName(T0_MS // 1000 * 1000 + hour * HOUR))}"
        for node, segments in spec.items()
        for hour, _, damage in segments
        if damage in IN_PLACE
    }
    if reindex or in_place:
        # summaries for the segments without a trusted one (damaged ones stay without); with
        # --verify, those whose data was changed in place are found and summarized anew
        done = index(root, verify=bool(in_place))
        found = {str(Path(name).relative_to(root)) for name in done.mismatched}
        assert found <= in_place
        assert all(name in found for name in in_place if changed_data(root / name))
    assert stats_answer(root, True) == stats_answer(root, False)
    for subject in SUBJECTS:
        for window in WINDOWS:
            assert profile_answer(root, subject, window, True) == profile_answer(root, subject, window, False)


def test_a_summary_is_trusted_while_the_file_ends_with_it_and_verify_finds_changed_data(
    tmp_path: Path,
) -> None:
    name = SegmentName(T0_MS // 1000 * 1000)
    rows = b"".join(msgspec.json.encode(codec.row_to_dict(make_row(t))) + b"\n" for t in range(1, 5))
    (tmp_path / NAMING.plain(name)).write_bytes(rows)
    compress_segment(tmp_path, NAMING, name)
    (f,) = find_files(tmp_path)
    summary = load(f)
    assert summary is not None and summary.state["stats"]["rows"] == 4
    whole = f.path.read_bytes()
    f.path.write_bytes(whole + b"\n")  # appended to: the summary no longer ends the file
    assert load(find_files(tmp_path)[0]) is None
    f.path.write_bytes(whole[:-1])  # cut
    assert load(find_files(tmp_path)[0]) is None
    f.path.write_bytes(whole[:10] + bytes([whole[10] ^ 1]) + whole[11:])  # same size, other data
    assert load(find_files(tmp_path)[0]) == summary  # the structure says nothing of the data
    done = index(tmp_path)
    assert (done.written, done.present, done.mismatched) == (0, 1, ())
    done = index(tmp_path, verify=True)
    assert [Path(m).name for m in done.mismatched] == [NAMING.compressed(name)]
    assert done.written + len(done.failed) == 1
    assert stats_answer(tmp_path, True) == stats_answer(tmp_path, False)  # the damage is now reported
    assert index(tmp_path, verify=True).mismatched == ()


@pytest.mark.parametrize("at", [1, 7])  # in the per-poll figures' frame's magic, in its size
def test_a_summary_whose_figures_frame_header_is_damaged_is_not_trusted(tmp_path: Path, at: int) -> None:
    """The data's CRC-32 does not cover the header of the per-poll figures' frame after it, yet a
    zstd reader stops there when it is damaged (an unknown frame, or one that runs past the end): such
    a segment is scanned, so the answers still equal a full scan's. (The property test's "flip data"
    of a small segment, whose figures' frame is larger than its data, once landed there.)"""
    write(tmp_path, {"n1": [(0, window_segment(0), "none")]})
    summary = load(find_files(tmp_path)[0])
    assert summary is not None and summary.profile is not None
    path = find_files(tmp_path)[0].path
    whole = path.read_bytes()
    flip = summary.data_bytes + at
    path.write_bytes(whole[:flip] + bytes([whole[flip] ^ 0x40]) + whole[flip + 1 :])
    assert load(find_files(tmp_path)[0]) is None
    assert stats_answer(tmp_path, True) == stats_answer(tmp_path, False)


def segment_rows(directory: Path) -> tuple[Path, list[bytes]]:
    name = SegmentName(T0_MS // 1000 * 1000)
    rows = [msgspec.json.encode(codec.row_to_dict(make_row(t, T0_MS + t))) for t in range(1, 200)]
    (directory / NAMING.plain(name)).write_bytes(b"".join(r + b"\n" for r in rows))
    compress_segment(directory, NAMING, name)
    path = directory / NAMING.compressed(name)
    assert load(find_files(path)[0]) is not None
    return path, rows


def test_the_dataset_doc_python_snippet_reads_every_row_of_a_summarized_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, rows = segment_rows(tmp_path)
    doc = (ROOT / "docs/dataset.md").read_text()
    (snippet,) = (s for s in re.findall(r"```python\n(.*?)```", doc, re.S) if "stream_reader(f)" in s)
    name = re.search(r'open\("([^"]+)"', snippet)
    assert name is not None
    path.rename(tmp_path / name[1])
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(snippet, scope)  # the snippet, verbatim
    assert scope["rows"] == [msgspec.json.decode(r) for r in rows]


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command is not installed")
def test_zstd_dc_and_t_read_every_row_of_a_summarized_segment(tmp_path: Path) -> None:
    path, rows = segment_rows(tmp_path)
    out = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True).stdout
    assert out.splitlines() == rows
    subprocess.run(["zstd", "-tq", str(path)], check=True)


def test_croft_index_writes_summaries_for_old_segments_and_keeps_their_rows_and_mtime(tmp_path: Path) -> None:
    path, rows = segment_rows(tmp_path)
    whole = path.read_bytes()
    start = frame_start(whole[-FOOTER_BYTES:])
    path.write_bytes(whole[:start])  # as segments were before summaries
    os.utime(path, ns=(1_000_000_000, 2_000_000_000))
    assert load(find_files(path)[0]) is None
    done = index(tmp_path)
    assert (done.written, done.present, done.failed) == (1, 0, ())
    assert load(find_files(path)[0]) is not None
    assert path.stat().st_mtime_ns == 2_000_000_000
    assert index(tmp_path).present == 1
    _, acc = read_stats(tmp_path, workers=1)
    assert acc.rows == len(rows)
    assert [f.name for f in tmp_path.iterdir()] == [path.name]


def window_rows(tmp_path: Path, **changes: Any) -> tuple[Path, list[bytes]]:
    """A plain segment of two containers (one with rows in two cgroups), a host cgroup and rows
    naming a node, over 30 polls; its path and lines."""
    rows = []
    for poll in range(30):
        unix_ms = T0_MS + poll * 2000
        for tgid, container, cgroup in (
            (1, IDS[0], None),
            (2, IDS[0], OTHER_CGROUP),
            (3, IDS[2], None),
            (4, None, None),
        ):
            cpu = 0.25 * ((poll + tgid) % 5)
            value = codec.row_to_dict(
                make_row(tgid, unix_ms, container_id=container, cgroup=cgroup, cpu_cores=cpu, **changes)
            )
            if tgid == 3 and poll % 3 == 0:
                value["node"] = "named"
            rows.append(msgspec.json.encode(value))
    name = SegmentName(T0_MS // 1000 * 1000)
    plain = tmp_path / NAMING.plain(name)
    plain.write_bytes(b"".join(r + b"\n" for r in rows))
    return plain, rows


def test_a_window_is_answered_from_the_figures_without_reading_the_rows(tmp_path: Path) -> None:
    """The figures alone answer: a segment whose data is junk (with a summary naming that junk's
    size and CRC-32, so trusted) profiles as its rows do."""
    from croft.adapters.dataset.summaries import summarize
    from croft.domain.dataset.segments import SegmentSummary, encode

    plain, _ = window_rows(tmp_path)
    state = summarize(plain, compressed=False)
    assert state is not None
    scanned = tmp_path / "scanned"
    scanned.mkdir()
    plain.rename(scanned / plain.name)
    compress_segment(scanned, NAMING, SegmentName(T0_MS // 1000 * 1000))
    junk = tmp_path / "junk"
    junk.mkdir()
    data = b"not zstd at all " * 100
    (junk / NAMING.compressed(SegmentName(T0_MS // 1000 * 1000))).write_bytes(
        data + encode(SegmentSummary(len(data), zlib.crc32(data), state))
    )
    windows = ((T0_MS + 10_000, T0_MS + 30_000), (None, None), (T0_MS + 58_000, None))
    for subject in (
        Subject("container", "abcd"),
        Subject("cgroup", OTHER_CGROUP),
        Subject("cgroup", "/user.slice"),
    ):
        for window in windows:
            answer = profile_answer(junk, subject, window, True)
            assert answer == profile_answer(scanned, subject, window, False)
            assert answer[0], "the subject has rows"
    # a --pid profile reads the rows: here, junk
    assert profile_answer(junk, Subject("pid", "1"), (None, None), True)[1]


def test_a_negative_zero_figure_writes_no_figures_and_profile_reads_the_rows(tmp_path: Path) -> None:
    window_rows(
        tmp_path,
        cgroup_usage=CgroupUsage(
            cpu_cores=-0.0,
            cpu_throttled_fraction=0.0,
            memory_bytes=1,
            cpu_pressure_avg10=0.0,
            oom_kills=0,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.0,
        ),
    )
    compress_segment(tmp_path, NAMING, SegmentName(T0_MS // 1000 * 1000))
    (f,) = find_files(tmp_path)
    summary = load(f)
    assert summary is not None and summary.profile is None
    window = (T0_MS + 10_000, T0_MS + 30_000)
    subject = Subject("container", "abcd")
    assert profile_answer(tmp_path, subject, window, True) == profile_answer(tmp_path, subject, window, False)


def test_croft_index_rewrites_a_version_2_summary_as_this_version(tmp_path: Path) -> None:
    window_rows(tmp_path)
    compress_segment(tmp_path, NAMING, SegmentName(T0_MS // 1000 * 1000))
    (f,) = find_files(tmp_path)
    v3 = f.path.read_bytes()
    f.path.write_bytes(as_version_2(v3))
    os.utime(f.path, ns=(1_000_000_000, 2_000_000_000))
    old = load(find_files(tmp_path)[0])
    assert old is not None and old.profile is None and old.state["version"] == 2
    done = index(tmp_path)
    assert (done.written, done.present, done.failed) == (1, 0, ())
    assert f.path.read_bytes() == v3  # the data kept, the old summary replaced, not stacked
    assert f.path.stat().st_mtime_ns == 2_000_000_000
    assert index(tmp_path).present == 1


def window_segment(hour: int) -> bytes:
    return b"".join(
        msgspec.json.encode(codec.row_to_dict(make_row(1 + n % 4, T0_MS + hour * HOUR + n * 2000))) + b"\n"
        for n in range(20)
    )
