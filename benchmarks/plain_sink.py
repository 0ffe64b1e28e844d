"""The simplest row sink: append each poll's lines to one file and flush. The rotating writer
(croft.adapters.dataset.writer) has the same two methods and replaces it in bootstrap."""

from __future__ import annotations

from pathlib import Path


class PlainAppendSink:
    """Appends whole lines to `path` (its directory is created), one write and flush per poll."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab")

    def append(self, lines: bytes, now_ms: int, monotonic_ns: int | None = None) -> int:
        """Write this poll's `lines` (complete JSON lines) at wall time `now_ms`; the rows written."""
        if lines:
            self._file.write(lines)
            self._file.flush()
        return lines.count(b"\n")

    def close(self) -> None:
        self._file.close()
