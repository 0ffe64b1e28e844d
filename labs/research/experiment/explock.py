"""data/experiment.lock: one experiment at a time on a machine (two workloads sharing CPUs pollute
each other's numbers).

The lock file holds the owner's pid, its start time in clock ticks since boot (/proc/<pid>/stat
field 22, so a reused pid is not taken for the owner), the command and the UTC start. Taking it is
an O_EXCL create. A lock held by a live owner refuses the new experiment, naming the owner; a lock
whose owner is gone is *stale*: it is named (pid, command, start) and refused too, unless the
caller asks to break stale locks, which replaces it and says so. A lock never silently vanishes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs


class LockBusy(RuntimeError):
    """The lock is held (live owner) or stale (dead owner not broken); the message names the owner."""


@attrs.frozen
class Owner:
    pid: int
    start_ticks: int | None
    command: str
    started: str
    host: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} ({self.command!r}, started {self.started})"


def start_ticks(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process's start time (clock ticks after boot), or None when there is no such process."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[19])


def alive(owner: Owner, proc: Path = Path("/proc")) -> bool:
    """Whether the owner still runs: same host, pid present, same start time."""
    if owner.host != socket.gethostname():
        return True  # another host's process cannot be checked: treat as alive
    ticks = start_ticks(owner.pid, proc)
    return ticks is not None and (owner.start_ticks is None or ticks == owner.start_ticks)


def read_owner(path: Path) -> Owner | None:
    try:
        obj = json.loads(path.read_text())
        return Owner(
            int(obj["pid"]),
            obj.get("start_ticks"),
            str(obj["command"]),
            str(obj["started"]),
            str(obj["host"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return Owner(-1, None, "unreadable lock file", "?", socket.gethostname())


def _me(command: str) -> Owner:
    pid = os.getpid()
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Owner(pid, start_ticks(pid), command, now, socket.gethostname())


@contextlib.contextmanager
def experiment_lock(path: Path, command: str | None = None, break_stale: bool = False) -> Iterator[Owner]:
    """Hold `path` for the block. Raises `LockBusy` when a live owner holds it, or when a dead one
    left it and `break_stale` is False."""
    path.parent.mkdir(parents=True, exist_ok=True)
    me = _me(command or " ".join(sys.argv))
    payload = json.dumps(attrs.asdict(me)).encode()
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            owner = read_owner(path)
            if owner is None:
                continue  # released between our create and our read: try again
            if owner.pid != -1 and alive(owner):
                raise LockBusy(
                    f"{path} is held by {owner.describe()}: one experiment at a time; wait for it to finish"
                ) from None
            if not break_stale:
                raise LockBusy(
                    f"{path} is a stale lock left by {owner.describe()}, which is no longer running; "
                    "check that its run finished cleanly, then remove the file or pass --break-stale-lock"
                ) from None
            print(f"run.py: breaking the stale lock of {owner.describe()}", file=sys.stderr)
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
        break
    try:
        yield me
    finally:
        current = read_owner(path)
        if current is not None and current.pid == me.pid:
            path.unlink(missing_ok=True)
