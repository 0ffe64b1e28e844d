"""`croft top` driven for real in terminals: `--once` in a pty, the live table in a tmux pane that
follows new polls as they are appended and ends cleanly on q and on Ctrl-C."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from tests.helpers.cli import CROFT
from tests.helpers.rows import append, encode, make_row

from croft.domain.dataset.codec import encode_row
from croft.domain.dataset.row import CgroupUsage, Row, ShortLived, SyscallRate

pytestmark = pytest.mark.slow
LIVE = "croft-dataset.jsonl"
COLS, LINES = 100, 40
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def busy_poll(unix_ms: int, comm: str, count: int = 3) -> list[Row]:
    return [
        make_row(
            500 + i, unix_ms, comm=comm, cpu_cores=2.0 - 0.5 * i, workload="gpu-held" if i == 0 else "no-gpu"
        )
        for i in range(count)
    ]


def assert_aligned(screen: str) -> None:
    """The column titles are on one line and every row's PID ends under the PID title."""
    lines = screen.splitlines()
    titles = next(line for line in lines if line.lstrip().startswith("CONTAINER"))
    pid_end = titles.index("PID") + len("PID")
    rows = lines[lines.index(titles) + 1 :]
    rows = [row for row in rows if re.match(r"\S{12} +\d+ ", row)]
    assert rows, screen
    for row in rows:
        assert len(row) <= COLS
        if "clock_nanosleep" in row:  # cut between whole syscalls, not by the terminal's edge
            assert row.endswith("clock_nanosleep 9.0k/s  io_uring_enter 800/s  …"), row
        assert row[pid_end - 1].isdigit() and (len(row) == pid_end or row[pid_end] == " "), row


# --- a pty: --once -----------------------------------------------------------------------------


def run_in_pty(argv: list[str], timeout_s: float = 60, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `argv` with a 100x40 pseudo-terminal as stdin, stdout and stderr; its exit status and
    everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PYTHONIOENCODING")} | (env or {})
    env |= {"TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(LINES)}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=max(deadline - time.monotonic(), 1)), out.decode("utf-8", "replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_once_in_a_terminal_prints_a_styled_aligned_table(tmp_path: Path) -> None:
    stamp = now_ms()
    (tmp_path / LIVE).write_bytes(encode(busy_poll(stamp - 2000, "previous") + busy_poll(stamp, "trainer")))
    status, raw = run_in_pty([CROFT, "top", "--once", "--dataset", str(tmp_path)])
    screen = ANSI.sub("", raw).replace("\r\n", "\n")
    assert status == 0, screen
    assert "\x1b[" in raw, "a terminal gets a styled table"
    assert re.search(
        r"node \S+ · poll \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+\.\d s ago\) · 3 processes · 1 GPU", screen
    )
    assert screen.count("trainer") == 3
    assert "previous" not in screen
    assert "Traceback" not in screen
    assert_aligned(screen)


# --- tmux: the live table ----------------------------------------------------------------------


class Tmux:
    """One private tmux server (its own socket) with one 100x40 session."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "tmux.sock"
        self.conf = directory / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g status off\nset -g history-limit 100\n")

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        # COLUMNS and LINES would fix croft top's width whatever the pane's (pytest-xdist sets them)
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "COLUMNS", "LINES")}
        return subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=env,
        )

    def start(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        line = "env TERM=tmux-256color " + shlex.join(command)
        return self("new-session", "-d", "-s", "top", "-x", str(COLS), "-y", str(LINES), line)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "top").stdout

    def wait_for(self, what: str, ready: Callable[[str], bool], timeout_s: float = 45) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.screen()
            if ready(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the pane shows:\n{screen}")
            time.sleep(0.1)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed; `make test` installs it through scripts/system-deps.sh")
    directory = Path(tempfile.mkdtemp(prefix="croft-tmux-"))  # short: a socket path has 108 bytes
    server = Tmux(directory)
    try:
        yield server
    finally:
        server("kill-server")
        shutil.rmtree(directory, ignore_errors=True)


# The pane runs croft top under this small parent, which writes its exit status to a file (tmux
# itself sometimes reports a pane dead before it has reaped the process, and never learns its
# status). Ctrl-C reaches both; the parent only waits: its handler does nothing, and a handled
# signal goes back to its default in croft top, which turns it into KeyboardInterrupt.
REPORT_EXIT = (
    "import signal, subprocess, sys\n"
    "signal.signal(signal.SIGINT, lambda *_: None)\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(code))\n"
    "__import__('os').replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
)


def start_top(tmux: Tmux, dataset: Path, *extra: str, interval: float = 1) -> Path:
    """Start `croft top --interval 1` on `dataset` in the pane; the file its exit status will be in."""
    status = tmux.socket.parent / "status"
    croft = [
        sys.executable,
        "-m",
        "croft",
        "top",
        "--interval",
        f"{interval:g}",
        "--dataset",
        str(dataset),
        *extra,
    ]
    started = tmux.start([sys.executable, "-c", REPORT_EXIT, str(status), *croft])
    if started.returncode != 0:
        pytest.skip(f"tmux cannot start a session here: {started.stderr.strip()}")
    return status


def exit_status(status: Path, tmux: Tmux) -> str:
    """croft top's exit status once it has ended: "0", or minus the signal that killed it."""
    deadline = time.monotonic() + 30
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"croft top did not end; the pane shows:\n{tmux.screen()}")
        time.sleep(0.1)
    return status.read_text()


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_the_live_table_follows_new_polls_and_ends_cleanly(tmux: Tmux, tmp_path: Path, key: str) -> None:
    live = tmp_path / LIVE
    stamp = now_ms()
    live.write_bytes(encode(busy_poll(stamp - 2000, "alpha")))
    status = start_top(tmux, tmp_path)
    first = tmux.wait_for("the first poll", lambda s: s.count("alpha") == 3)
    assert re.search(r"· 3 processes · 1 GPU holder", first), first
    assert_aligned(first)

    append(live, encode(busy_poll(stamp, "bravo") + busy_poll(stamp, "charlie", 2)[1:]))
    second = tmux.wait_for("the appended poll", lambda s: "bravo" in s and "alpha" not in s)
    assert second.count("bravo") == 3 and second.count("charlie") == 1, second
    assert re.search(r"· 4 processes · 1 GPU holder", second), second
    assert_aligned(second)

    tmux("send-keys", "-t", "top", key)
    assert exit_status(status, tmux) == "0"
    assert "Traceback" not in tmux.screen()


def test_a_file_without_a_complete_poll_waits_for_one(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    line = encode_row(make_row(77, now_ms(), comm="late-starter"))
    live.write_bytes(line[:60])  # the collector is half way through its first poll
    status = start_top(tmux, tmp_path)
    tmux.wait_for("the waiting line", lambda s: "waiting for the first poll" in s)
    append(live, line[60:])
    screen = tmux.wait_for("the completed poll", lambda s: "late-starter" in s)
    assert "waiting" not in screen
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


# --- the interactive screen: keys, resizes, a stopped collector, looking back ---------------------


HINTS = ("↑↓ scroll", "Esc cancel", "any key: back to the table")


def frame(screen: str) -> str | None:
    """The frame drawn last: the pane down to its first key-hint line (a frame's last line, written
    after every line above it), without what an earlier, taller frame left below it until the
    screen is cleared; None while no frame is whole."""
    lines = screen.splitlines()
    end = next((i for i, line in enumerate(lines) if any(hint in line for hint in HINTS)), None)
    return None if end is None else "\n".join(lines[: end + 1])


def drawn(tmux: Tmux, what: str, ready: Callable[[str], bool]) -> str:
    """The frame once `ready` holds on it (see `frame`)."""
    screen = tmux.wait_for(what, lambda s: (whole := frame(s)) is not None and ready(whole))
    whole = frame(screen)
    assert whole is not None
    return whole


def _titles(screen: str) -> list[str]:
    """The column titles of a drawn table (none while it is not drawn)."""
    return next((line.split() for line in screen.splitlines() if " PID " in line), [])


MANY_CALLS = tuple(
    SyscallRate(name=name, rate_per_sec=rate)
    for name, rate in (("clock_nanosleep", 9000.0), ("io_uring_enter", 800.0), ("futex", 282.0))
)


def many_processes(unix_ms: int, count: int = 60) -> list[Row]:
    """`count` processes of one poll: CPU falls as the pid rises, memory rises with it, and every
    tenth is a `loader`."""
    return [
        make_row(
            1000 + i,
            unix_ms,
            comm="loader" if i % 10 == 0 else f"worker{i}",
            cpu_cores=(count - i) / 100,
            rss_bytes=(i + 1) << 20,
        )
        for i in range(count)
    ]


def rows_of(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if re.match(r"\S{12} +\d+ ", line)]


def pids_of(screen: str) -> list[int]:
    return [int(line.split()[1]) for line in rows_of(screen)]


def test_keys_sort_filter_and_scroll(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    live.write_bytes(encode(many_processes(now_ms())))
    status = start_top(tmux, tmp_path, interval=5)
    first = drawn(tmux, "the table", lambda s: "worker1 " in s)
    assert pids_of(first)[:3] == [1000, 1001, 1002]  # CPU, busiest first
    assert "q quit · ? keys · c/m/s/p sort (CPU) · / filter · ↑↓ scroll" in first.rstrip().splitlines()[-1]
    assert re.search(r"rows 1-\d+ of 60", first)

    tmux("send-keys", "-t", "top", "m")
    by_memory = drawn(tmux, "sort by memory", lambda s: "sort (memory)" in s)
    assert pids_of(by_memory)[:3] == [1059, 1058, 1057]

    tmux("send-keys", "-t", "top", "End")
    bottom = drawn(tmux, "the last page", lambda s: pids_of(s)[-1:] == [1000])
    assert re.search(r"rows \d+-60 of 60", bottom)
    tmux("send-keys", "-t", "top", "Home")
    drawn(tmux, "the first page", lambda s: pids_of(s)[:1] == [1059])

    tmux("send-keys", "-t", "top", "/", "l", "o", "a", "d")
    typing = drawn(tmux, "the filter being typed", lambda s: "filter: load_" in s)
    assert "Enter keep · Esc cancel" in typing
    tmux("send-keys", "-t", "top", "Enter")
    filtered = drawn(tmux, "the filtered table", lambda s: "filter 'load' (Esc clears)" in s)
    assert pids_of(filtered) == [1050, 1040, 1030, 1020, 1010, 1000]
    assert "rows 1-6 of 6 (60 before the filter)" in filtered
    tmux("send-keys", "-t", "top", "Escape")
    drawn(tmux, "the filter cleared", lambda s: len(pids_of(s)) > 6)

    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_a_sort_key_twice_reverses_and_slash_starts_a_new_filter(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    live.write_bytes(encode(many_processes(now_ms())))
    status = start_top(tmux, tmp_path, interval=5)
    drawn(tmux, "the table", lambda s: "worker1 " in s)
    tmux("send-keys", "-t", "top", "m")
    by_memory = drawn(tmux, "sort by memory", lambda s: "sort (memory)" in s)
    assert pids_of(by_memory)[:3] == [1059, 1058, 1057]
    tmux("send-keys", "-t", "top", "m")  # the same key again: the order turned round
    reversed_ = drawn(tmux, "memory reversed", lambda s: "sort (memory, reversed)" in s)
    assert pids_of(reversed_)[:3] == [1000, 1001, 1002]
    tmux("send-keys", "-t", "top", "c")  # another key: busiest first again
    by_cpu = drawn(tmux, "sort by CPU", lambda s: "sort (CPU)" in s)
    assert pids_of(by_cpu)[:3] == [1000, 1001, 1002]

    tmux("send-keys", "-t", "top", "/", "l", "o", "a", "d", "Enter")
    drawn(tmux, "the first filter", lambda s: "filter 'load' (Esc clears)" in s)
    tmux("send-keys", "-t", "top", "/")
    typing = drawn(tmux, "a new filter being typed", lambda s: "filter: _" in s)
    assert "filter: load" not in typing  # the new filter starts empty, not from 'load'
    tmux("send-keys", "-t", "top", "w", "o", "r", "k", "e", "r", "5", "Enter")
    second = drawn(tmux, "the second filter", lambda s: "filter 'worker5' (Esc clears)" in s)
    assert sorted(pids_of(second)) == [1005, *range(1051, 1060)]
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


@pytest.mark.parametrize("key", ["?", "h"])
def test_question_mark_and_h_show_the_keys(tmux: Tmux, tmp_path: Path, key: str) -> None:
    (tmp_path / LIVE).write_bytes(encode(many_processes(now_ms())))
    status = start_top(tmux, tmp_path, interval=5)
    drawn(tmux, "the table", lambda s: "worker1 " in s)
    tmux("send-keys", "-t", "top", key)
    keys = drawn(tmux, "the keys", lambda s: "any key: back to the table" in s)
    assert "croft top keys" in keys and "the same key again reverses the order" in keys
    assert "type a new filter" in keys and "worker1 " not in keys
    tmux("send-keys", "-t", "top", "x")  # any key goes back
    back = drawn(tmux, "the table again", lambda s: "worker1 " in s)
    assert "croft top keys" not in back
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_the_filter_matches_node_names_in_the_multi_node_view(tmux: Tmux, tmp_path: Path) -> None:
    stamp = now_ms()
    for node, comm in (("gpu-a", "alpha"), ("cpu-b", "bravo")):
        (tmp_path / node).mkdir()
        rows = [msgspec.structs.replace(r, node=node) for r in busy_poll(stamp, comm, 2)]
        (tmp_path / node / LIVE).write_bytes(encode(rows))
    status = start_top(tmux, tmp_path, interval=5)
    both = drawn(tmux, "both nodes", lambda s: "alpha" in s and "bravo" in s)
    assert "2 nodes (cpu-b, gpu-a)" in both
    tmux("send-keys", "-t", "top", "/", "c", "p", "u", "-", "b", "Enter")
    one = drawn(tmux, "one node's processes", lambda s: "filter 'cpu-b'" in s)
    assert "bravo" in one and "alpha" not in one
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def felt_poll(unix_ms: int) -> list[Row]:
    """Three `python3` processes of one throttled container, told apart by their command lines;
    the busy one's row carries the container's 31 short-lived processes."""
    usage = CgroupUsage(
        cpu_cores=0.2,
        cpu_throttled_fraction=0.95,
        memory_bytes=1 << 30,
        oom_kills=0,
        cpu_pressure_avg10=61.0,
        memory_pressure_avg10=0.0,
        io_pressure_avg10=0.0,
    )
    rows = []
    for k, script in enumerate(("train.py --lr 0.1", "serve.py --port 8080", "eval.py --split test")):
        row = make_row(600 + k, unix_ms, comm="python3", cpu_cores=0.115 - 0.05 * k, cgroup_usage=usage)
        process = msgspec.structs.replace(row.process, cmdline=f"/usr/bin/python3 {script}")
        rows.append(msgspec.structs.replace(row, process=process))
    calls = (SyscallRate(name="execve", rate_per_sec=15.5),)
    rows[0] = msgspec.structs.replace(rows[0], short_lived=ShortLived(processes=31, syscalls=calls))
    return rows


def test_what_the_container_felt_and_the_command_lines_show(tmux: Tmux, tmp_path: Path) -> None:
    """Under a CPU quota a process showed 11.5 % CPU while its cgroup was throttled 95 % of its
    periods: at 160 columns THR%, PSI%, SHORT and COMMAND say it; at 80 THR% stays, the others
    are dropped."""
    (tmp_path / LIVE).write_bytes(encode(felt_poll(now_ms())))
    status = start_top(tmux, tmp_path, interval=30)
    tmux("resize-window", "-t", "top", "-x", "160", "-y", "20")
    wide = drawn(tmux, "the 160-column table", lambda s: "COMMAND" in s and "python3" in s)
    titles = next(line for line in wide.splitlines() if "PID" in line).split()
    assert titles[:2] == ["CONTAINER", "PID"] and titles[-1] == "COMMAND"
    for script in ("train.py --lr 0.1", "serve.py --port 8080", "eval.py --split test"):
        (line,) = [row for row in rows_of(wide) if script in row]
        assert re.search(r" python3 .* 95 +61 +1\.0G .* 31 ", line), line
    tmux("resize-window", "-t", "top", "-x", "80", "-y", "20")
    at_80 = ["CONTAINER", "PID", "COMM", "CPU%", "THR%", "RSS", "AGE", "BUSIEST", "SYSCALLS"]
    narrow = drawn(tmux, "the 80-column table", lambda s: _titles(s) == at_80)
    assert all(len(line) <= 80 for line in narrow.splitlines())
    assert all(re.search(r" python3 +\d+\.\d +95 ", row) for row in rows_of(narrow)), narrow
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_paging_keeps_the_columns(tmux: Tmux, tmp_path: Path) -> None:
    """The widest cells are on the first page only (a long command name, long syscall lists):
    PgDn and End leave the title line as it was."""
    stamp = now_ms()
    rows = many_processes(stamp)
    rows[0] = make_row(1000, stamp, comm="a-long-command", cpu_cores=0.99, syscalls=MANY_CALLS)
    (tmp_path / LIVE).write_bytes(encode(rows))
    status = start_top(tmux, tmp_path, interval=30)
    first = drawn(tmux, "the first page", lambda s: "a-long-command" in s)
    titles = next(line for line in first.splitlines() if "PID" in line)
    tmux("send-keys", "-t", "top", "End")
    last = drawn(tmux, "the last page", lambda s: "a-long-command" not in s and pids_of(s)[-1:] == [1059])
    assert next(line for line in last.splitlines() if "PID" in line) == titles
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_a_resize_redraws_for_the_new_width(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    live.write_bytes(encode(busy_poll(now_ms(), "trainer")))
    status = start_top(tmux, tmp_path, interval=30)  # only the resize can redraw in time
    wide = drawn(tmux, "the table", lambda s: "trainer" in s)
    full_cgroup = (
        "/system.slice/docker-" + "33813f5d0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5.scope"
    )

    titles = next(line for line in wide.splitlines() if "PID" in line)
    assert titles.split() == [  # 100 columns: the narrow columns ranked before the cgroup
        *("CONTAINER", "PID", "COMM", "WORKLOAD", "CPU%", "THR%", "PSI%", "RSS", "NET/s", "I/O/s", "SHORT"),
        *("AGE", "BUSIEST", "SYSCALLS"),
    ]
    tmux("resize-window", "-t", "top", "-x", "60", "-y", "20")
    narrow = drawn(tmux, "the 60-column table", lambda s: "WORKLOAD" not in s and "trainer" in s)
    titles = next(line for line in narrow.splitlines() if "PID" in line)
    assert titles.split() == ["CONTAINER", "PID", "COMM", "CPU%", "THR%", "RSS"]  # then the syscalls
    assert all(len(line) <= 60 for line in narrow.splitlines())
    assert all(re.search(r" \d+ trainer +\d+\.\d ", row) for row in rows_of(narrow)), narrow

    # widening never trades a column for another: 80's columns are all at 90, which adds PSI%
    tmux("resize-window", "-t", "top", "-x", "80", "-y", "20")
    at_80 = _titles(drawn(tmux, "80 columns", lambda s: "THR%" in s and "PSI%" not in s and "trainer" in s))
    tmux("resize-window", "-t", "top", "-x", "90", "-y", "20")
    at_90 = _titles(drawn(tmux, "90 columns", lambda s: "PSI%" in s and "trainer" in s))
    assert set(at_80) < set(at_90) and "CGROUP" not in at_90, (at_80, at_90)

    tmux("resize-window", "-t", "top", "-x", "160", "-y", "20")
    at_160 = drawn(tmux, "the 160-column table", lambda s: "I/O/s" in s and "trainer" in s)
    assert all(len(line) <= 160 for line in at_160.splitlines())
    titles = next(line for line in at_160.splitlines() if "PID" in line)
    assert titles.split()[-3:] == ["CGROUP", "BUSIEST", "SYSCALLS"]
    for row in rows_of(at_160):  # the cgroup reads whole (its id cut), beside the syscalls
        assert row.endswith(" /system.slice/docker-33813f5d0a1b….scope futex 282/s  read 12/s"), row

    tmux("resize-window", "-t", "top", "-x", "230", "-y", "20")
    widest = drawn(tmux, "the 230-column table", lambda s: full_cgroup in s)
    assert "FRAMEWORK" in widest and "I/O/s" in widest
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_a_stopped_collector_is_said_until_polls_come_again(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    live.write_bytes(encode(busy_poll(now_ms() - 30_000, "before")))  # the collector stopped 30 s ago
    status = start_top(tmux, tmp_path)
    stopped = drawn(tmux, "the stopped note", lambda s: "the collector has stopped" in s)
    assert re.search(r"no new poll for \d+ s: the collector has stopped, or writes elsewhere", stopped)
    append(live, encode(busy_poll(now_ms(), "after")))
    running = drawn(tmux, "the new poll", lambda s: "after" in s)
    assert "the collector has stopped" not in running
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


def test_looking_back_steps_through_past_polls(tmux: Tmux, tmp_path: Path) -> None:
    live = tmp_path / LIVE
    stamp = now_ms() - 3_600_000
    live.write_bytes(encode([row for k in range(5) for row in busy_poll(stamp + 2000 * k, f"step{k}", 1)]))
    at = f"{stamp + 4100}"  # between the third poll and the fourth
    status = start_top(tmux, tmp_path, "--at", at)
    third = drawn(tmux, "the poll at --at", lambda s: "looking back: poll 3 of 5" in s)
    assert "step2" in third and "step3" not in third and "←→ poll" in third
    assert "the collector has stopped" not in third
    tmux("send-keys", "-t", "top", "Right")
    fourth = drawn(tmux, "one poll later", lambda s: "looking back: poll 4 of 5" in s)
    assert "step3" in fourth
    tmux("send-keys", "-t", "top", "Left", "Left", "Left", "Left", "Left")
    drawn(tmux, "the first poll", lambda s: "looking back: poll 1 of 5" in s and "step0" in s)
    tmux("send-keys", "-t", "top", "q")
    assert exit_status(status, tmux) == "0"


@pytest.mark.parametrize("variable", ["NO_COLOR", "PYTHONIOENCODING"])
def test_no_color_and_an_ascii_terminal(tmp_path: Path, variable: str) -> None:
    stamp = now_ms()
    (tmp_path / LIVE).write_bytes(encode(busy_poll(stamp, "trainer")))
    value = {"NO_COLOR": "1", "PYTHONIOENCODING": "ascii"}[variable]
    status, raw = run_in_pty([CROFT, "top", "--once", "--dataset", str(tmp_path)], env={variable: value})
    assert status == 0, raw
    assert "Traceback" not in raw and raw.count("trainer") == 3
    if variable == "NO_COLOR":
        assert "\x1b[" not in raw, "NO_COLOR: no bold, no reverse, no colour"
    else:
        assert raw.isascii() and re.search(r"node \S+ \| poll ", raw), raw
