"""A `croft.adapters.dataset.disk.Disk` that fails on purpose: the real file system, except that the
call numbered `at` (0-based, counting every write, pwrite, fsync and replace) does `fault`.

Faults: "short" (the write puts half its bytes on disk and returns that count; the next call goes
on normally), "short-then-enospc" (half the bytes land, every later write fails with ENOSPC, as a
disk filling up mid-write does), "enospc" and "eio" (this call and every later one of its kind fail:
a full disk stays full, a broken one stays broken), "rename" (this replace fails with EXDEV, once).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from croft.adapters.dataset.disk import OS_DISK

FAULTS = ("short", "short-then-enospc", "enospc", "eio", "rename")


class FaultyDisk:
    def __init__(self, at: int | None = None, fault: str = "enospc") -> None:
        assert fault in FAULTS
        self.at, self.fault = at, fault
        self.calls: list[str] = []
        self.fired = False  # the fault's call came
        self.hurt = False  # a call failed, or wrote short and nothing wrote the rest
        self._broken = False

    def _next(self, kind: str) -> str | None:
        """The fault this call does, if any."""
        n = len(self.calls)
        self.calls.append(kind)
        if self._broken and kind in ("write", "pwrite", "fsync"):
            return "eio" if self.fault == "eio" else "enospc"
        if n != self.at:
            return None
        self.fired = True
        if self.fault in ("enospc", "eio", "short-then-enospc"):
            self._broken = True
        return self.fault

    def _fail(self, fault: str) -> OSError:
        self.hurt = True
        code = errno.EIO if fault == "eio" else errno.ENOSPC
        return OSError(code, os.strerror(code))

    def _write(self, kind: str, data: bytes | memoryview, do: object) -> int:
        fault = self._next(kind)
        assert callable(do)
        if fault in ("short", "short-then-enospc") and len(data) > 1:
            return int(do(memoryview(data)[: len(data) // 2]))
        if fault in ("enospc", "eio", "short-then-enospc"):
            raise self._fail(fault)
        return int(do(data))

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return self._write("write", data, lambda d: OS_DISK.write(fd, d))

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        return self._write("pwrite", data, lambda d: OS_DISK.pwrite(fd, d, offset))

    def fsync(self, fd: int) -> None:
        fault = self._next("fsync")
        if fault in ("enospc", "eio"):
            raise self._fail(fault)
        OS_DISK.fsync(fd)

    def replace(self, source: Path, target: Path) -> None:
        if self._next("replace") == "rename":
            self.hurt = True
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(source), None, str(target))
        OS_DISK.replace(source, target)
