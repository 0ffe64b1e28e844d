"""A hypothesis state machine drives the writer through polls, clock jumps, compression and crashes
(at every step of a write or a compression) against a model: the list of rows that must be on disk.

After every step, reading the directory as a reader would (segments in name order, then the live
file, a torn last line skipped) gives exactly the model's rows, each once and in order."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import zstandard
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import Limits, Naming, SegmentName
from tests.helpers.dataset import LIVE, dataset_files, poll_lines, read_rows

NAMING = Naming.for_live(LIVE)
# Small limits so that segments close every few polls; retention is out of reach here (the model
# would have to restate it), and is covered by the retention properties and the writer tests.
LIMITS = Limits(rotate_secs=20, rotate_bytes=2500, retain_days=3650, retain_bytes=1 << 40)


class WriterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="croft-machine-"))
        self.now_ms = 1_792_505_950_473
        self.expected: list[int] = []
        self.writer = DatasetWriter(self.directory / LIVE, LIMITS, background=False)

    def teardown(self) -> None:
        self.writer.close()
        shutil.rmtree(self.directory)

    def _restart(self) -> None:
        # What survives a kill is what is on disk; closing only releases the descriptor.
        self.writer.close()
        self.writer = DatasetWriter(self.directory / LIVE, LIMITS, background=False)

    def _plain_segments(self) -> list[SegmentName]:
        found = (NAMING.parse(p.name) for p in self.directory.iterdir())
        return sorted(f[0] for f in found if f is not None and f[1] == "plain")

    @rule(rows=st.integers(0, 4), advance_ms=st.integers(0, 9000))
    def poll(self, rows: int, advance_ms: int) -> None:
        self.now_ms += advance_ms
        first = len(self.expected)
        self.writer.append(poll_lines(first, rows, self.now_ms), self.now_ms)
        self.expected.extend(range(first, first + rows))

    @rule(advance_s=st.sampled_from([20, 21, 3600]))
    def jump_clock(self, advance_s: int) -> None:
        self.now_ms += advance_s * 1000
        self.writer.append(b"", self.now_ms)

    @rule()
    def compress(self) -> None:
        self.writer.compress_now()

    @rule()
    def crash_and_restart(self) -> None:
        self._restart()

    @rule(rows=st.integers(1, 4), cut=st.floats(0, 1))
    def crash_in_the_middle_of_a_write(self, rows: int, cut: float) -> None:
        self.writer.append(b"", self.now_ms)  # what append does before its write (rotation)
        self.writer.close()
        first = len(self.expected)
        lines = poll_lines(first, rows, self.now_ms)
        written = lines[: int(len(lines) * cut)]
        with (self.directory / LIVE).open("ab") as live:
            live.write(written)
        self.expected.extend(range(first, first + written.count(b"\n")))
        self.writer = DatasetWriter(self.directory / LIVE, LIMITS, background=False)

    @precondition(lambda self: self._plain_segments())
    @rule(data=st.data(), keep=st.floats(0, 1))
    def crash_while_compressing(self, data: st.DataObject, keep: float) -> None:
        seg = data.draw(st.sampled_from(self._plain_segments()))
        whole = zstandard.ZstdCompressor().compress((self.directory / NAMING.plain(seg)).read_bytes())
        (self.directory / NAMING.temporary(seg)).write_bytes(whole[: int(len(whole) * keep)])
        self._restart()

    @precondition(lambda self: self._plain_segments())
    @rule(data=st.data())
    def crash_between_rename_and_removal(self, data: st.DataObject) -> None:
        seg = data.draw(st.sampled_from(self._plain_segments()))
        plain = (self.directory / NAMING.plain(seg)).read_bytes()
        cctx = zstandard.ZstdCompressor(write_checksum=True)
        (self.directory / NAMING.compressed(seg)).write_bytes(cctx.compress(plain))
        self._restart()

    @invariant()
    def every_row_is_readable_exactly_once_in_order(self) -> None:
        assert [row.tgid for row in read_rows(self.directory)] == self.expected

    @invariant()
    def names_are_unique_and_sort_in_time_order(self) -> None:
        segments = [NAMING.parse(p.name) for p in dataset_files(self.directory) if p.name != LIVE]
        starts = [found[0] for found in segments if found is not None]
        assert len(set(starts)) == len(starts)
        assert starts == sorted(starts)


WriterMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestWriterMachine = WriterMachine.TestCase
