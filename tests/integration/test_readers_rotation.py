"""Readers racing the collector's rotation never undercount: every row that existed for a reader's
whole run is counted, once, and answers never go backwards.

Two tests. A hypothesis state machine interleaves, deterministically, the real dataset writer's
appends, rotations and compressions (each plain segment compressed and removed) with the phases of
a real reader: listing the files (`find_files`, and the trusted summaries `croft stats` takes
from it), then reading them a part at a time with the readers' own functions (`croft stats`'
`stats_of_part`, `croft profile`'s `profile_of_part`, `croft.dataset`'s `file_rows`). Then real
processes: a writer rotating every few hundred milliseconds on its own compression thread, and
`croft stats --json` and `croft profile` run over and over against it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.helpers.cli import CROFT
from tests.helpers.dataset import LIVE, poll_lines

from croft import dataset
from croft.adapters.dataset.files import DatasetFile, Part, find_files, split
from croft.adapters.dataset.scan import profile_of_part, stats_of_part
from croft.adapters.dataset.summaries import load_all
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.profile import ProfileAccumulator
from croft.domain.dataset.rotation import Limits
from croft.domain.dataset.skips import SkipTally
from croft.domain.dataset.summary import StatsAccumulator

ROOT = Path(__file__).resolve().parents[2]
T0_MS = 1_792_505_950_000
ROWS_PER_POLL = 7
CONTAINER = f"{0:064x}"  # every row's (tests.helpers.rows.seq_row)
# A rotation every few polls; nothing is ever deleted, so every row written stays.
LIMITS = Limits(rotate_secs=3600, rotate_bytes=12_000, retain_days=3650, retain_bytes=1 << 40)


class _Reader:
    """One reader under way: what it listed, the rows written before it listed (every one must be
    counted), the parts it has left to read and what it counted so far."""

    def __init__(self, kind: str, floor: int, parts: list[Part], files: tuple[DatasetFile, ...]) -> None:
        self.kind = kind
        self.floor = floor
        self.parts = parts
        self.files = files
        self.stats = StatsAccumulator()
        self.profile = ProfileAccumulator(CONTAINER[:8], None, None)
        self.seen: Counter[int] = Counter()
        self.skips = SkipTally()


class ReadersRacingRotation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="croft-race-"))
        self.writer = DatasetWriter(self.directory / LIVE, LIMITS, background=False)
        self.written = 0  # rows of completed appends: sequence numbers [0, written)
        self.now_ms = T0_MS
        self.reader: _Reader | None = None
        self.last_answer = 0

    def teardown(self) -> None:
        self.writer.close()
        self.reader = None
        shutil.rmtree(self.directory)

    @rule(polls=st.integers(1, 5))
    def append(self, polls: int) -> None:
        for _ in range(polls):
            self.writer.append(poll_lines(self.written, ROWS_PER_POLL, self.now_ms), self.now_ms)
            self.written += ROWS_PER_POLL
            self.now_ms += 2000

    @rule()
    def compress(self) -> None:
        """The compression thread's work: each plain segment becomes a `.zst`, the plain removed."""
        self.writer.compress_now()

    @precondition(lambda self: self.reader is None)
    @rule(kind=st.sampled_from(["stats", "profile", "library"]), part_bytes=st.sampled_from([3000, 1 << 20]))
    def start_reader(self, kind: str, part_bytes: int) -> None:
        files = find_files(self.directory, "here")
        reader = _Reader(kind, self.written, [], files)
        rest = files
        if kind == "stats":  # as read_stats: trusted summaries answered now, the rest read
            summaries = load_all(files)
            for f, summary in zip(files, summaries, strict=True):
                if summary is not None:
                    summary.stats(f.node, str(f.path), into=reader.stats)
            rest = tuple(f for f, summary in zip(files, summaries, strict=True) if summary is None)
        reader.parts = list(split(rest, part_bytes)) if kind != "library" else [Part(f) for f in rest]
        self.reader = reader

    @precondition(lambda self: self.reader is not None)
    @rule()
    def read_a_part(self) -> None:
        reader = self.reader
        assert reader is not None
        if reader.parts:
            part = reader.parts.pop(0)
            if reader.kind == "stats":
                reader.stats.merge(stats_of_part(part))
            elif reader.kind == "profile":
                reader.profile.merge(profile_of_part(part, CONTAINER[:8], None, None))
            else:
                reader.seen.update(row.tgid for row in dataset.file_rows(part.file, reader.skips))
            return
        self.reader = None
        self._check(reader)

    def _check(self, reader: _Reader) -> None:
        """Every row written before the reader listed, once; none that was never written."""
        if reader.kind == "stats":
            counted, skips = reader.stats.rows, reader.stats.skips.report()
        elif reader.kind == "profile":
            track = reader.profile.tracks.get(CONTAINER)
            processes = {tgid for _, tgid in track.processes} if track is not None else set()
            assert processes >= set(range(reader.floor))
            counted, skips = len(processes), reader.profile.skips.report()
        else:
            assert set(reader.seen) >= set(range(reader.floor))
            assert max(reader.seen.values(), default=1) == 1, "a row counted twice"
            counted, skips = sum(reader.seen.values()), reader.skips.report()
        assert skips == ()
        assert reader.floor <= counted <= self.written
        assert counted >= self.last_answer, "an answer went backwards"
        self.last_answer = counted

    @invariant()
    def nothing_is_deleted(self) -> None:
        assert self.writer.counters().segments_deleted == 0


ReadersRacingRotation.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_readers_racing_rotation_count_every_row_once = ReadersRacingRotation.TestCase


def test_croft_stats_and_profile_never_go_backwards_while_a_real_writer_rotates(tmp_path: Path) -> None:
    """A writer process (the real DatasetWriter, its compression thread, a segment closed every few
    hundred milliseconds) and croft stats --json / croft profile run 12 times each against it: each
    answer counts every row written before it started, and no answer is below the one before."""
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.dataset_driver", str(tmp_path), "0", str(T0_MS), "1500"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    progress = writer.stdout
    written = [int(progress.readline())]

    def completed() -> int:
        return written[-1]

    last_rows = last_polls = 0
    try:
        for _ in range(12):
            floor = completed()
            stats = subprocess.run(
                [CROFT, "stats", str(tmp_path), "--json"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert stats.returncode == 0 and stats.stderr == "", stats.stderr
            answer = json.loads(stats.stdout)
            assert answer["rows"] >= floor and answer["skipped_lines"] == 0
            assert (answer["rows"], answer["polls"]) >= (last_rows, last_polls)
            last_rows, last_polls = answer["rows"], answer["polls"]
            profile = subprocess.run(
                [CROFT, "profile", CONTAINER[:8], "--dataset", str(tmp_path)],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert profile.returncode == 0 and profile.stderr == "", profile.stderr
            assert json.loads(profile.stdout)["polls"] >= last_polls
            line = progress.readline()
            if not line:
                break
            written.append(int(line))
    finally:
        writer.kill()
        writer.wait(timeout=30)
        progress.close()
