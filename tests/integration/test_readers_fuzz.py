"""Reader fuzzing: hypothesis writes damaged datasets (torn, nested, oversized, wrong-typed and
non-UTF-8 lines; truncated, corrupt and empty zstd segments; FIFOs; odd and hidden node names;
files without read permission) and every reader (croft stats', stats --containers' and croft
profile's scans, in one part or many; croft top's tail; the library API) must agree with the
reference model (tests/helpers/reader_model.py) on rows and skips, and none may raise.

The budget is the `readers-fuzz` settings profile: CROFT_FUZZ_EXAMPLES datasets (default 100; the
suite prints how many it ran).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zstandard
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from tests.helpers.reader_model import FileModel, model_file, newest_poll, skip_report
from tests.helpers.rows import EXAMPLE_CONTAINER, T0_MS, make_row

from croft import dataset
from croft.adapters.dataset.scan import read_containers, read_profile, read_stats
from croft.adapters.dataset.tail import read_newest
from croft.domain.dataset import codec
from croft.domain.dataset.lines import MAX_LINE_BYTES
from croft.domain.dataset.summary import StatsAccumulator
from croft.domain.top.table import HELD_POLLS

settings.register_profile(
    "readers-fuzz",
    max_examples=int(os.environ.get("CROFT_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("readers-fuzz")
HOST = "fuzz-host"
OTHER = "ab12cd34" + "0" * 56
NEEDLE = EXAMPLE_CONTAINER[:8]
# A damaged segment found by this suite (no checksum): it decodes to a row whose container id is
# NEEDLE followed by junk, which a prefix search must report as a second container.
DAMAGED_WITH_A_PREFIX_TWIN = (
    b"(\xb5/\xfd`\xbd\x15\xe5\x10\x00V\xa1b,\x90%i\x0e\xff\xff\xff\xff\xff\xff\x97\x16|\xd4\xac\xfd"
    b"\xee-QK\xd2,o\xd6\x9a\xec\xb5\x1bi\xf7\xa5\xc4\xda\xf6[7\x11\xd2\x1a\xd9z\xfex\x02V\x00R\x00V"
    b"\x00\x10\xc3y(%\x89\x90-\xc3\x1b\xf4* Gda\xe3\xcc\xe3Y:\xa3\x89\xbc\x1d\xaa\xdc\x08\xf8t\xb6\x8e"
    b"\x04\x91\x8d\x01q\x1ed\x07\xe9Y\x91\xb7/c\x9f.9A#\xe8\xed\xcf\xc3\xf0\x05\xeds.\xe4\x86\x9eT{l"
    b"\x10\xf4)a\x14\xb5\x14\x16\xb5\xb0\x02\xb3\xda\xe7\xe3\x18\x8d\xac/\x08\xf0\x89\xd0>\xe3\xdbN"
    b"\xd0'\x85\x11\x96\xc2$\x8cZ\xedsidps\xf6\xd3r\xa8\xf6\xb9\xcd\xd0Uh\x11o\xd6\xa7W\x081`\xf9\xf6"
    b"\xf8\xd8Q4/\x9e\x1aO\xc0fE\xf3b\x9f\xd7\x87\xa7/|\xd0T4/\x90\xb7\xc7\x05|\xfa\xdbc\xe3ze\xf3\xa8"
    b"d\xf8\xf4\r\xf3\xa9\xc1\x8dZ\x08\x82\xe7\xb6\xeb\x9c\xdb\x90\xab\x10\x9c\x8e\xd3(\xdc\xc3\x1c5?"
    b"\xfb<In(|}pq\x1dJ\xb9\x13\xd4U\x08\xba\xc6R[\xb7\x0e\x90\xb5\x19]\x8cv\x8a\xe6\x05]\xf9\xa4\x0e"
    b"\xb6\x96\xa5M/\x9e\x94\x8bo\xfbI\x1dJ6\xeaX\xed\xd3E\xfd\xa8\xac\x0e\x138\x06\r\xc9\x00S\x16;"
    b"\x81A\x85\x10o\xdf\xc8\xf2)*\x90\xb0\xd5\xfe\x9a2\xf6\xa9p vI]\xba8\n\x04\x08`\x84\xc5\xa8\x81"
    b"\xc3\xb2JL 3\xac\xa7\xe2rH\x16!I\x16\x80\x86\x80\x86:\xd8\x8ao;5\xd4\xc1\x08\xac\x1d\xeet\xbd"
    b"\x90[\xfa\xfa\xe9\x8c\xa5\xf5\xf0\xf6}\x9e|A\x80\x07g\x146 \x90\x02\t\xaaN\xab\x03\x19\xa9\x02"
    b"\xe3Z\x02\xa5\xb2\x0c\xb9A\x05\xdd\x90@ \xf4^\x93`\x15\xda\xbc\x1a\xecR\x94\nQ\xb5\xdd\x90L\x81Q"
    b"\x15\xa5\x04\xc07\xa1\xd8\xc79f\x11\x15K\x8a\xd3!\xaa\xa2\x1b\x12\x08\x04\x18\x83E;\x89\x9f\xc49"
    b"\xd2$O\xea\xf3\xd8\xf2;\x1a\xff/ ,\xc3\x9d\x15\xa4\xe0r\xa9c4\xd4V\x94c\x89\xea\x93\xe1\x9d\\c"
    b"\x88\xd2~0%n\xf7^\xe7\xf2\xd9\xc6\xaaar}\x9a\x91615x\xdf\x06\x0c\x8enZ\x1a&8z\nX\x8e\x02"
)
RAN = {"datasets": 0}


def row(tgid: int, unix_ms: int, container: str | None, node: str | None = None) -> bytes:
    value = codec.row_to_dict(make_row(tgid, unix_ms, container_id=container))
    if node is not None:  # the node the collector ran on; "" is no name
        value["node"] = node
    return msgspec.json.encode(value)


def hostile(good: bytes) -> st.SearchStrategy[bytes]:
    """A line that is not a row, or is one only just: each kind a reader once got wrong."""
    ms = good.split(b",", 1)[0]
    return st.sampled_from(
        [
            good[:-1] + b',"extra":1}',
            good.replace(b'"comm":"python"', b'"comm":"p\xffy"'),
            good + good,
            good + b" " + good,
            b'{"unix_ms":1,"x":' + b"[" * 1000 + b"]" * 1000 + b"}",
            b"[" * 2000 + b"]" * 2000,
            good.replace(ms, b'{"unix_ms":%d' % 2**64),
            good.replace(ms, b'{"unix_ms":%d' % 10**17),
            good.replace(ms, b'{"unix_ms":-1'),
            good.replace(b'"cpu_cores":0.5', b'"cpu_cores":1e400', 1),
            good.replace(b'"tgid":', b'"tgid":"', 1),
            good.replace(b'"workload":"no-gpu"', b'"workload":"no-gpu "'),
            good.replace(b'"threads":8', b'"threads":8.0'),
            good.replace(b'"comm":"python"', b'"comm":"\\ud800"'),
            good.replace(b'"label"', b'"lab\\u0065l"'),
            good[: len(good) // 2],
            b"",
            b"  \t\r",
            b" " + good + b"\r",
            b"\x00" * 40,
            b"not json " + NEEDLE.encode(),
            b'{"unix_ms": 1, "container_id": "%s"}' % NEEDLE.encode(),
            b"null",
            b"x" * (MAX_LINE_BYTES + 1),
            b"y" * MAX_LINE_BYTES,
        ]
    )


@st.composite
def file_bytes(draw: st.DrawFn, first_ms: int) -> bytes:
    """Polls of rows of two containers and a host process, hostile lines among them, and a
    last line torn, whole without its newline, or absent."""
    lines: list[bytes] = []
    for k in range(draw(st.integers(0, 4))):
        unix_ms = first_ms + 2000 * k
        for tgid in range(draw(st.integers(1, 4))):
            container = draw(st.sampled_from([EXAMPLE_CONTAINER, OTHER, None]))
            good = row(tgid + 10 * k, unix_ms, container, draw(st.sampled_from([None, None, "gpu-z", ""])))
            lines.append(draw(hostile(good)) if draw(st.integers(0, 4)) == 0 else good)
    data = b"".join(line + b"\n" for line in lines)
    ending = draw(st.sampled_from(["none", "torn", "whole", "long"]))
    last = row(99, first_ms + 10_000, EXAMPLE_CONTAINER)
    if ending == "torn":
        data += last[: draw(st.integers(1, len(last) - 1))]
    elif ending == "whole":
        data += last
    elif ending == "long":
        data += b"z" * (MAX_LINE_BYTES + 3)
    return data


@st.composite
def zstd_file(draw: st.DrawFn, data: bytes) -> bytes:
    packed = zstandard.ZstdCompressor(level=1, write_checksum=draw(st.booleans())).compress(data)
    damage = draw(st.sampled_from(["none", "none", "truncated", "corrupt", "empty"]))
    if damage == "truncated":
        return packed[: draw(st.integers(0, len(packed) - 1))]
    if damage == "corrupt":
        at = draw(st.integers(0, len(packed) - 1))
        return packed[:at] + bytes(b ^ 0x5A for b in packed[at : at + 8]) + packed[at + 8 :]
    return b"" if damage == "empty" else packed


@st.composite
def node_files(draw: st.DrawFn, index: int) -> list[tuple[str, bytes | None, int]]:
    """(file name, bytes or None for a FIFO, mode) of one node's dataset."""
    files: list[tuple[str, bytes | None, int]] = []
    first_ms = T0_MS + 1_000_000 * index
    for k in range(draw(st.integers(0, 3))):
        name = f"croft-dataset-20261020T14{10 + k:02}10Z.jsonl"
        kind = draw(st.sampled_from(["plain", "zstd", "zstd", "fifo"]))
        data = draw(file_bytes(first_ms + 20_000 * k))
        if kind == "fifo":
            files.append((name + ".zst", None, 0o644))
        elif kind == "zstd":
            files.append((name + ".zst", draw(zstd_file(data)), 0o644))
        else:
            files.append((name, data, 0o644))
    if draw(st.booleans()) or not files:
        mode = draw(st.sampled_from([0o644, 0o644, 0o000]))  # root reads 0o000 too (as the model)
        files.append(("croft-dataset.jsonl", draw(file_bytes(first_ms + 100_000)), mode))
    if draw(st.booleans()):
        files.append(("notes.txt", b"not part of the dataset\n", 0o644))
    return files


NODE_NAMES = [b"gpu-a", b"gpu-b", b"node-\xff", b"n o d e", b"-x", b".hidden", b"\xe9t\xe9"]


@st.composite
def datasets(draw: st.DrawFn) -> dict[bytes | None, list[tuple[str, bytes | None, int]]]:
    """Per-node directories by name (bytes), or one dataset directory (the key None)."""
    if draw(st.booleans()):
        return {None: draw(node_files(0))}
    names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=3, unique=True))
    return {name: draw(node_files(k)) for k, name in enumerate(names)}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="croft-fuzz-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)
    print(f"\nreader fuzz: {RAN['datasets']} generated datasets")


def write(root: Path, spec: dict[bytes | None, list[tuple[str, bytes | None, int]]]) -> list[FileModel]:
    """The dataset on disk, and the model's files in reading order."""
    models: list[FileModel] = []
    for name in sorted(spec, key=lambda n: os.fsdecode(n or b"")):
        directory = root if name is None else Path(os.fsdecode(bytes(root) + b"/" + name))
        directory.mkdir(exist_ok=True)
        node = HOST if name is None else name.decode("utf-8", "backslashreplace")
        for file_name, data, mode in sorted(spec[name]):
            path = directory / file_name
            if data is None:
                os.mkfifo(path)
            else:
                path.write_bytes(data)
                path.chmod(mode)
            if file_name == "notes.txt" or (name or b"").startswith(b"."):
                continue
            problem = "it is a FIFO (named pipe), not a dataset file" if data is None else None
            models.append(model_file(path, node, problem=problem))
    return models


@FUZZ
@given(datasets(), st.sampled_from([1 << 30, 4096, 50_000]))
@example(
    spec={b"gpu-a": [("croft-dataset-20261020T141010Z.jsonl.zst", DAMAGED_WITH_A_PREFIX_TWIN, 0o644)]},
    part_bytes=1 << 30,
)
def test_every_reader_agrees_with_the_model_and_none_raises(
    scratch: Path, spec: dict[bytes | None, list[tuple[str, bytes | None, int]]], part_bytes: int
) -> None:
    RAN["datasets"] += 1
    root = scratch / f"d{RAN['datasets']}"
    root.mkdir()
    try:
        models = write(root, spec)
        if not models:
            return
        check_readers(root, models, part_bytes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def totals(acc: StatsAccumulator) -> tuple[object, ...]:
    return (
        acc.rows, acc.first_ms, acc.last_ms, acc.polls, acc.tgids, acc.processes, acc.workloads,
        dict(acc.syscall_sums), acc.skips.report(), acc.skips.total_lines,
    )  # fmt: skip


def check_readers(root: Path, models: list[FileModel], part_bytes: int) -> None:
    rows = [(r.node or m.node, r) for m in models for r in m.rows]  # a row's own node key first
    for m in models:  # what was generated, for --hypothesis-show-statistics
        for kind in m.skipped():
            event(f"a line {kind}")
        if m.damaged is not None:
            event(m.damaged.split(" (")[0])
    # croft stats (with and without the syscall sums), in one part per file or many
    for syscalls in (False, True):
        facts, acc = read_stats(root, syscalls=syscalls, workers=1, host=HOST, part_bytes=part_bytes)
        got = acc.summary(facts)
        assert got.rows == len(rows)
        assert got.polls == len({(n, r.unix_ms) for n, r in rows})
        assert acc.skips.report() == skip_report(models)
    # croft stats --containers: every row counted under its container, the same skips
    _, listing = read_containers(root, workers=1, host=HOST, part_bytes=part_bytes)
    assert sum(entry.rows for entry in listing.listing()) == len(rows)
    assert listing.skips.report() == skip_report(models)
    # the library: every row in reading order, and the same skips
    said: list[str] = []
    assert list(dataset.node_rows(root, host=HOST, on_skip=said.append)) == rows
    assert tuple(said) == skip_report(models)
    # croft profile and the library by container: the lines mentioning the id
    needle = NEEDLE.encode()
    # A prefix matches every id that starts with it: a damaged segment without a checksum can
    # decode to a row whose id is the example's first bytes followed by others (a second container).
    mine = [(n, r) for n, r in rows if (r.process.container_id or "").startswith(NEEDLE)]
    ids = sorted({r.process.container_id or "" for _, r in mine})
    found = read_profile(root, NEEDLE, None, None, workers=1, host=HOST, part_bytes=part_bytes)
    assert found.matching_ids() == tuple(ids)
    for container in ids:
        track = found.tracks[container]
        assert set(track.polls) == {(n, r.unix_ms) for n, r in mine if r.process.container_id == container}
        assert track.processes == {(n, r.tgid) for n, r in mine if r.process.container_id == container}
    assert found.skips.report() == skip_report(models, needle)
    said.clear()
    assert list(dataset.node_rows(root, container_id=NEEDLE, host=HOST, on_skip=said.append)) == mine
    assert tuple(said) == skip_report(models, needle)
    # croft top: each node's newest poll, from its live file or else its newest segment
    snapshot = read_newest(root, HOST)
    expected = []
    for node in dict.fromkeys(m.node for m in models):
        files = [m for m in models if m.node == node]
        last = files[-1]
        poll = [] if last.whole else newest_poll(last, HELD_POLLS)[0]
        if not poll and last.path.name == "croft-dataset.jsonl":  # else the newest segment's
            segments = [m for m in files[:-1] if not m.whole]
            poll = newest_poll(segments[-1], HELD_POLLS)[0] if segments else []
        if poll:
            expected.append((poll[-1].node or node, poll))  # named by its rows' node key first
    assert [(p.node, list(p.rows)) for p in snapshot.polls] == expected
