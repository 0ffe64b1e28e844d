"""`croft run` as a user meets it: refusing politely without root, and live record then replay
giving the very bytes the live run wrote."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers.cli import CROFT
from tests.helpers.workload import BURN, WRITE, OwnCgroup


def _run_as(uid: int, gid: int, argv: list[str]) -> tuple[int, str]:
    """`croft <argv>` in a forked child that dropped to `uid` (everything it needs is already
    imported, so it reads no file the user may not read)."""
    import croft.app.bootstrap
    import croft.app.collector
    import croft.app.run  # noqa: F401
    from croft.app.cli import main

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        code = 99
        try:
            os.setgid(gid)
            os.setuid(uid)
            sys.stderr = os.fdopen(write_end, "w")
            code = main(argv)
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as err:
        stderr = err.read().decode()
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status), stderr


def test_not_root_is_one_sentence_and_exit_1() -> None:
    argv = ["run", "--dataset", "/tmp/croft-never-written.jsonl"]
    if os.geteuid() == 0:
        user = pwd.getpwnam("nobody")
        code, stderr = _run_as(user.pw_uid, user.pw_gid, argv)
    else:
        done = subprocess.run([CROFT, *argv], capture_output=True, text=True, check=False)
        code, stderr = done.returncode, done.stderr
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("croft: croft run needs root"), stderr
    assert "--replay" in lines[0]


@pytest.mark.root
@pytest.mark.slow
def test_live_run_then_replay_of_its_trace_writes_the_same_bytes(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    live, replayed, trace = tmp_path / "live.jsonl", tmp_path / "replayed.jsonl", tmp_path / "trace"
    with OwnCgroup(f"croft-e2e-{os.getpid()}") as group:
        group.spawn(BURN)
        group.spawn(WRITE, str(tmp_path / "written"), "262144")
        log = tmp_path / "croft.log"
        with log.open("wb") as log_file:
            command = [CROFT, "run", "--watch", group.name, "--record", str(trace)]
            croft = subprocess.Popen([*command, "--dataset", str(live)], stderr=log_file)
        deadline = time.monotonic() + 180
        while not (live.exists() and live.stat().st_size) and time.monotonic() < deadline:
            if croft.poll() is not None:
                pytest.skip(f"croft run could not start here: {log.read_text()[-300:]}")
            time.sleep(0.2)
        time.sleep(4.5)
        croft.send_signal(signal.SIGTERM)
        assert croft.wait(timeout=30) == 0, log.read_text()
    assert "writing the last poll" in log.read_text()
    done = subprocess.run(
        [CROFT, "run", "--replay", str(trace), "--dataset", str(replayed)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert live.read_bytes().count(b"\n") >= 4
    assert replayed.read_bytes() == live.read_bytes()


# A busy process that names itself and its working directory with bytes that are not UTF-8.
_ODD_NAMES = """
import ctypes, os, sys
os.chdir(bytes.fromhex(sys.argv[1]))
ctypes.CDLL(None).prctl(15, b"b\\xffrn\\xfe", 0, 0, 0)  # PR_SET_NAME: the comm
while True:
    pass
"""


@pytest.mark.root
@pytest.mark.slow
def test_names_of_bytes_that_are_not_utf8_are_written_escaped_and_the_collector_lives_on(
    tmp_path: Path,
) -> None:
    """A watched process in a cgroup named with bytes 0xFF 0xFE, its cwd and comm holding such
    bytes too: croft run (live, recording) writes every poll, the names escaped as docs/dataset.md
    says, the cgroup's CPU read by its real bytes; SIGHUP ends it after its last poll, exit 0; the
    replay of its trace writes the same bytes."""
    if os.geteuid() != 0:
        pytest.skip("croft run needs root")
    import json

    odd_dir = os.fsencode(tmp_path) + b"/dir\xff"
    Path(os.fsdecode(odd_dir)).mkdir()
    live, replayed, trace = tmp_path / "live.jsonl", tmp_path / "replayed.jsonl", tmp_path / "trace"
    name = os.fsdecode(b"croft-bad\xff\xfe-%d" % os.getpid())
    with OwnCgroup(name) as group:
        group.spawn(_ODD_NAMES, odd_dir.hex())
        log = tmp_path / "croft.log"
        with log.open("wb") as log_file:
            command = [CROFT, "run", "--watch", "croft-bad", "--record", str(trace), "--dataset", str(live)]
            croft = subprocess.Popen(command, stderr=log_file)
        deadline = time.monotonic() + 180
        while not (live.exists() and live.read_bytes().count(b"\n") >= 3) and time.monotonic() < deadline:
            if croft.poll() is not None:
                break
            time.sleep(0.2)
        assert croft.poll() is None, log.read_text(errors="replace")
        croft.send_signal(signal.SIGHUP)
        assert croft.wait(timeout=30) == 0, log.read_text(errors="replace")
    assert "got SIGHUP: writing the last poll" in log.read_text(errors="replace")
    rows = [json.loads(line) for line in live.read_bytes().splitlines()]
    mine = [row for row in rows if row["process"]["cwd"].endswith("/dir\\xff")]
    assert len(mine) >= 3
    for row in mine:
        assert row["process"]["comm"] == "b\\xffrn\\xfe"
        assert row["process"]["cgroup"] == f"/croft-bad\\xff\\xfe-{os.getpid()}"
    assert max(row["cgroup_usage"]["cpu_cores"] for row in mine) > 0  # its own cgroup, by its bytes
    assert min(row["cgroup_usage"]["memory_bytes"] for row in mine) > 0
    done = subprocess.run(
        [CROFT, "run", "--replay", str(trace), "--dataset", str(replayed)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert replayed.read_bytes() == live.read_bytes()
