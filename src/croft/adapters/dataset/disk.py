"""The file-system calls that put dataset bytes on disk, as a port: `Disk`, and `OS_DISK`, the real one.

The dataset writer and croft collect's node copy write through it, so that the fault tests can put a
disk that writes short, fills up, fails with EIO or refuses a rename behind the same code the users
run (tests/faults). Everything else (directory listing, reading, stat) uses `os` directly.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Protocol


class Disk(Protocol):
    """The few calls that change what a file holds or which name it is under; each behaves as the
    `os` call of its name (a short write returns fewer bytes, a failure raises `OSError`)."""

    def write(self, fd: int, data: bytes | memoryview) -> int: ...
    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int: ...
    def fsync(self, fd: int) -> None: ...
    def replace(self, source: Path, target: Path) -> None: ...


class OsDisk:
    """The real file system."""

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def replace(self, source: Path, target: Path) -> None:
        source.replace(target)


OS_DISK: Disk = OsDisk()


def write_all(disk: Disk, fd: int, data: bytes | memoryview, offset: int | None = None) -> None:
    """Write all of `data` (at `offset`, or appended when None), continuing after short writes.
    A write that makes no progress raises `OSError(ENOSPC)`: the kernel answers a write on a full
    disk either so or with the error itself."""
    view = memoryview(data)
    while view:
        n = disk.write(fd, view) if offset is None else disk.pwrite(fd, view, offset)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]
        if offset is not None:
            offset += n


def fsync_directory(directory: Path) -> None:
    """Make renames and removals in `directory` durable (straight through `os`: a directory's entries
    are not a file's bytes, so this is no call of the `Disk` port)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
