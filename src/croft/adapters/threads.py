"""Calls run on a few threads without concurrent.futures, whose imports (logging among them) cost
`croft collect`, `croft stats` and `croft profile` more of their start than the threads save."""

from __future__ import annotations

import threading
from typing import Any


class InOrder:
    """Each call `(function, *args)` run on one of `workers` threads, taken in order; `result(i)`
    waits for the i-th call's outcome (raising what it raised); `join()` waits for the threads."""

    def __init__(self, calls: list[tuple[Any, ...]], workers: int, name: str = "croft-worker") -> None:
        self._calls = calls
        self._outcomes: list[tuple[bool, Any]] = [(False, None)] * len(calls)
        self._done = [threading.Event() for _ in calls]
        self._next = iter(range(len(calls)))
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{n}") for n in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                at = next(self._next, None)
            if at is None:
                return
            function, *args = self._calls[at]
            try:
                self._outcomes[at] = (True, function(*args))
            except BaseException as exc:  # handed to the caller by result()
                self._outcomes[at] = (False, exc)
            finally:
                self._done[at].set()

    def result(self, at: int) -> Any:
        self._done[at].wait()
        ok, value = self._outcomes[at]
        if not ok:
            raise value
        return value

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
