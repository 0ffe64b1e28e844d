"""croft's one progress display: rich.progress on stderr, shown only on a terminal.

croft stats and profile show bytes read of the total, croft collect a bar per node, croft export
the files written, croft deploy the DaemonSet's rollout. On a terminal the display is live and
erased when the work ends; elsewhere (a pipe, a CI log) nothing is drawn, except that with `log`
each new description is written as a line of its own, so a log still tells what happened.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


class _Task:
    def __init__(self, description: str, total: float | None) -> None:
        self.description = description
        self.total = total
        self.completed = 0.0


class Progress:
    """Tasks with a description and, when `transfer`, bytes done of a total with their rate.
    Nothing is drawn before `after_s` (a read that answers at once shows nothing)."""

    def __init__(
        self, *, transfer: bool = True, log: bool = False, after_s: float = 0.0, stream: TextIO | None = None
    ) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._tty = self._stream.isatty()
        self._transfer = transfer
        self._log = log
        self._after = time.monotonic() + after_s
        self._rich: RichProgress | None = None
        self._tasks: dict[int, _Task] = {}
        self._logged: dict[int, str] = {}
        self._ids: dict[int, TaskID] = {}
        self._count = 0
        self._lock = threading.Lock()  # collect's copies report from their own threads

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Erase the display (its last state stays in a log)."""
        with self._lock:
            if self._rich is not None:
                self._rich.stop()
                self._rich = None

    def add(self, description: str, total: float | None = None) -> int:
        """A new task; its number for `update` and `remove`."""
        number = self._count
        self._count += 1
        self._tasks[number] = _Task(description, total)
        self._show(number)
        return number

    def update(
        self,
        number: int,
        *,
        description: str | None = None,
        completed: float | None = None,
        advance: float = 0.0,
        total: float | None = None,
    ) -> None:
        task = self._tasks[number]
        task.description = task.description if description is None else description
        task.total = task.total if total is None else total
        task.completed = (task.completed if completed is None else completed) + advance
        self._show(number)

    def remove(self, number: int) -> None:
        with self._lock:
            self._tasks.pop(number, None)
            if self._rich is not None and number in self._ids:
                self._rich.remove_task(self._ids.pop(number))

    def _show(self, number: int) -> None:
        with self._lock:
            self._show_locked(number)

    def _show_locked(self, number: int) -> None:
        task = self._tasks[number]
        if not self._tty:
            if self._log and self._logged.get(number) != task.description:
                self._logged[number] = task.description
                print(task.description, file=self._stream, flush=True)
            return
        if self._rich is None:
            if time.monotonic() < self._after:
                return
            self._rich = self._start()
        if number not in self._ids:
            self._ids[number] = self._rich.add_task(task.description, total=task.total)
        self._rich.update(
            self._ids[number], description=task.description, total=task.total, completed=task.completed
        )

    def _start(self) -> RichProgress:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, ProgressColumn, TextColumn, TransferSpeedColumn
        from rich.progress import Progress as RichProgress

        columns: tuple[ProgressColumn, ...] = (TextColumn("{task.description}"),)
        if self._transfer:
            columns += (BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn())
        console = Console(file=self._stream, force_terminal=True)
        progress = RichProgress(*columns, console=console, transient=True)
        progress.start()
        return progress
