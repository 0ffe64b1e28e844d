"""data/experiment.lock: one experiment at a time; a stale lock is named, never silently ignored."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

import explock


def _dead_pid() -> int:
    """The pid of a real process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=10)
    return child.pid


def _write(path, pid, ticks, command="run.py web --prefix old"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "pid": pid,
                "start_ticks": ticks,
                "command": command,
                "started": "2026-01-01T00:00:00Z",
                "host": socket.gethostname(),
            }
        )
    )


def test_held_for_the_block_and_released_after(tmp_path):
    lock = tmp_path / "data" / "experiment.lock"
    with explock.experiment_lock(lock, "run.py web --prefix a") as me:
        owner = json.loads(lock.read_text())
        assert owner["pid"] == os.getpid() == me.pid
        assert owner["command"] == "run.py web --prefix a"
        assert owner["start_ticks"] == explock.start_ticks(os.getpid())
    assert not lock.exists()


def test_a_live_owner_refuses_a_second_experiment_and_is_named(tmp_path):
    lock = tmp_path / "experiment.lock"
    with explock.experiment_lock(lock, "run.py web --prefix first"):
        with pytest.raises(explock.LockBusy) as refused, explock.experiment_lock(lock, "second"):
            pass
        assert f"held by pid {os.getpid()}" in str(refused.value)
        assert "run.py web --prefix first" in str(refused.value)
        assert lock.exists()  # the refused one did not take or remove it
    assert not lock.exists()


def test_a_live_owner_in_another_process_refuses(tmp_path):
    lock = tmp_path / "experiment.lock"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _write(lock, sleeper.pid, explock.start_ticks(sleeper.pid), "run.py gpu")
        busy = pytest.raises(explock.LockBusy, match=rf"held by pid {sleeper.pid} .*run.py gpu")
        with busy, explock.experiment_lock(lock, break_stale=True):
            pass
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_a_stale_lock_of_a_dead_process_is_named_and_kept(tmp_path):
    lock = tmp_path / "experiment.lock"
    pid = _dead_pid()
    _write(lock, pid, 12345)
    with pytest.raises(explock.LockBusy) as refused, explock.experiment_lock(lock):
        pass
    message = str(refused.value)
    assert "stale lock" in message and f"pid {pid}" in message and "run.py web --prefix old" in message
    assert "--break-stale-lock" in message
    assert json.loads(lock.read_text())["pid"] == pid  # still there, for whoever looks


def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path):
    lock = tmp_path / "experiment.lock"
    # This very process, but with another start time: the pid was reused since the lock was taken.
    _write(lock, os.getpid(), (explock.start_ticks(os.getpid()) or 0) + 1)
    with pytest.raises(explock.LockBusy, match="stale lock"), explock.experiment_lock(lock):
        pass


def test_breaking_a_stale_lock_says_so_and_takes_it(tmp_path, capsys):
    lock = tmp_path / "experiment.lock"
    pid = _dead_pid()
    _write(lock, pid, 1)
    with explock.experiment_lock(lock, "new run", break_stale=True):
        assert json.loads(lock.read_text())["command"] == "new run"
    assert f"breaking the stale lock of pid {pid}" in capsys.readouterr().err
    assert not lock.exists()


def test_an_unreadable_lock_is_stale_not_ignored(tmp_path):
    lock = tmp_path / "experiment.lock"
    lock.write_text("{not json")
    with pytest.raises(explock.LockBusy, match="unreadable lock file"), explock.experiment_lock(lock):
        pass


def test_run_py_refuses_with_one_sentence_and_exit_2(tmp_path):
    lock = tmp_path / "experiment.lock"
    _write(lock, _dead_pid(), 1)
    out = subprocess.run(
        [
            sys.executable,
            str(explock.__file__).replace("explock.py", "run.py"),
            "calibrate",
            "--data",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # calibrate checks root only after taking the lock: the stale lock speaks first.
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("run.py: ") and "stale lock" in out.stderr and "Traceback" not in out.stderr
