"""One writer per dataset directory: the collector's lock, as Prometheus' TSDB and atop keep theirs.

`DatasetLock.acquire(directory, about)` takes an exclusive `flock(2)` on `<directory>/.croft.lock`
and holds it for as long as the collector runs; the kernel drops it when the process ends, however
it ends, so a crash leaves no stale lock. The file holds the holder's pid on its first line and
`about` (what it was asked to write, `key=value` lines) after it, for the sentence a second
collector or `croft top` says. The file name starts with a dot: readers skip it, and it is no
file of the dataset's naming, so neither rotation nor the /dataset endpoint touches it.

`holder(directory)` says who holds the lock now, without taking it in a way that could turn a
starting collector away: it takes a shared lock for an instant, and `acquire` tries for
`ACQUIRE_WAIT_S` before it gives up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

import attrs

from croft.errors import UserError

LOCK_NAME = ".croft.lock"
ACQUIRE_WAIT_S = 1.0  # how long a start retries: a reader's probe holds the lock for microseconds
_RETRY_S = 0.05
_MAX_BYTES = 4096


@attrs.frozen
class Holder:
    """Who holds a dataset's lock: its pid (None while it is still writing it) and what it wrote
    about itself (`key=value` lines, e.g. `watch`)."""

    pid: int | None
    about: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        return next((value for name, value in self.about if name == key), None)

    def named(self) -> str:
        """`croft run (pid 1234)`, or `croft run` when the pid is not written yet."""
        return "croft run" if self.pid is None else f"croft run (pid {self.pid})"


def _parse(data: bytes) -> Holder:
    lines = data.decode("utf-8", "replace").splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    about = tuple(
        (name.strip(), value.strip())
        for name, sep, value in (line.partition("=") for line in lines[1:])
        if sep and name.strip()
    )
    return Holder(pid, about)


def _read_holder(fd: int) -> Holder:
    try:
        return _parse(os.pread(fd, _MAX_BYTES, 0))
    except OSError:
        return Holder(None)


class DatasetLock:
    """The exclusive lock of one dataset directory, held until `release` (or the process ends)."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, directory: Path, about: tuple[tuple[str, str], ...] = ()) -> DatasetLock:
        """Lock `directory` (which exists) for this process. A `UserError` naming the other
        collector's pid when one holds it; a `UserError` when the lock file cannot be made."""
        path = directory / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise UserError(
                f"cannot make the lock file {path}: {exc.strerror}; make the dataset directory writable "
                "or choose another --dataset (DATASET_PATH)"
            ) from None
        deadline = time.monotonic() + ACQUIRE_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise UserError(f"cannot lock {path}: {exc.strerror}") from None
                    raise UserError(
                        f"another {holder.named()} writes the dataset in {directory}: stop it, or give "
                        "this one another --dataset (DATASET_PATH); two collectors on one directory "
                        "would close each other's live file and lose rows"
                    ) from None
                time.sleep(_RETRY_S)
        text = "".join([f"{os.getpid()}\n", *(f"{name}={value}\n" for name, value in about)]).encode()
        with contextlib.suppress(OSError):  # the lock holds without its note
            os.ftruncate(fd, 0)
            os.pwrite(fd, text, 0)
        return cls(fd, path)

    def release(self) -> None:
        """Drop the lock (closing the file drops it); the file stays, for the next collector."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def holder(directory: Path) -> Holder | None:
    """Who holds `directory`'s lock now, or None when no collector does (or there is no lock file)."""
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return _read_holder(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
