"""`croft top` as a command through a pipe: --once output, errors, and batch mode ending cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from croft.domain.dataset.codec import encode_row
from tests.helpers.cli import CROFT, croft
from tests.helpers.rows import T0_MS, encode, make_row, poll

LIVE = "croft-dataset.jsonl"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    rows = [
        *poll(T0_MS, 3),
        make_row(41, T0_MS + 2000, comm="trainer", cpu_cores=3.5, workload="gpu-held"),
        make_row(7, T0_MS + 2000, comm="loader", cpu_cores=0.25, container_id=None, cwd="/srv/etl"),
        make_row(1234567, T0_MS + 2000, comm="a-very-long-process-name", cpu_cores=1.0),
    ]
    (tmp_path / LIVE).write_bytes(encode(rows))
    return tmp_path


def test_once_prints_a_tidy_table_and_exits_0(dataset: Path) -> None:
    out = croft("top", "--once", "--dataset", str(dataset / LIVE))
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    lines = out.stdout.splitlines()
    assert re.fullmatch(
        r"node \S+ · poll 2026-10-20 14:19:12 UTC \(\d+ d ago\) · 6 processes \(3 idle\) · 1 GPU holder",
        lines[0],
    )
    assert re.fullmatch(r"no new poll for \d+ d: the collector has stopped, or writes elsewhere", lines[1])
    titles, *rows = lines[2:]
    assert titles.split() == [
        "CONTAINER",
        "PID",
        "COMM",
        "FRAMEWORK",
        "WORKLOAD",
        "CPU%",
        "THR%",
        "PSI%",
        "RSS",
        "NET/s",
        "I/O/s",
        "SHORT",
        "AGE",
        "CGROUP",
        "BUSIEST",
        "SYSCALLS",
    ]
    assert [row.split()[2] for row in rows] == ["trainer", "a-very-long-pr…", "loader", *["python"] * 3]
    assert rows[2].startswith("host:/srv/etl ")
    for idle in rows[3:]:  # the first poll's processes, held from 2 s before at 0 % with their age
        # its container's throttling, pressure and short-lived count are those of the newest poll
        assert re.search(
            r" 0\.0 +0 +0 +1\.0G +0 +0 +0 +2s /system\.slice/docker-33813f5d\S+\.scope$", idle
        ), idle
    for line in lines:
        assert line == line.rstrip()
    pid_end = titles.index("PID") + len("PID")  # right-justified numbers end under their title
    for row, pid in zip(rows, ["41", "1234567", "7", "1000", "1001", "1002"], strict=True):
        assert row[pid_end - len(pid) : pid_end] == pid
        assert row[pid_end - len(pid) - 1] == " "


def test_the_dataset_comes_from_DATASET_PATH_too(dataset: Path) -> None:
    out = croft("top", "--once", env={"DATASET_PATH": str(dataset)})
    assert out.returncode == 0, out.stderr
    assert "trainer" in out.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            None,
            r"croft: \S+ does not exist; give a dataset file or directory, or set DATASET_PATH",
        ),
        (b"", r"croft: \S+ is empty: no poll has been written yet; start `croft run`, or point"),
        (
            encode_row(make_row(1))[:50],
            r"croft: \S+ has no complete poll yet; wait for `croft run` to write one",
        ),
    ],
)
def test_no_poll_is_one_line_and_a_non_zero_exit(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / LIVE
    if content is not None:
        path.write_bytes(content)
    out = croft("top", "--once", "--dataset", str(path))
    assert out.returncode == 1
    assert re.fullmatch(message + r".*\n", out.stderr), out.stderr
    assert out.stderr.count("\n") == 1
    assert out.stdout == ""


@pytest.mark.parametrize(
    ("watch", "says"),
    [
        ("", r"writes it, but without --watch it writes only GPU holders, and there is none: restart it "
             r"with --watch \(WATCH_CGROUPS\)"),
        ("kubepods", r"writes it: rows come from its second poll on \(4 s\), for GPU holders and the "
                     r"processes in cgroups under --watch kubepods"),
    ],
)  # fmt: skip
def test_an_empty_dataset_a_collector_writes_says_what_it_waits_for(
    tmp_path: Path, watch: str, says: str
) -> None:
    """croft run holds the directory's lock while it runs: croft top does not tell the user to
    start it, but why it has written nothing yet and what to change."""
    (tmp_path / LIVE).write_bytes(b"")
    other = subprocess.Popen(  # a collector's lock, held by another process
        [sys.executable, "-c", "import sys, time\n"
         "from pathlib import Path\n"
         "from croft.adapters.dataset.lock import DatasetLock\n"
         f"DatasetLock.acquire(Path(sys.argv[1]), (('watch', {watch!r}),))\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n", str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert other.stdout is not None and other.stdout.readline() == "locked\n"
        out = croft("top", "--once", "--dataset", str(tmp_path / LIVE))
    finally:
        other.kill()
        other.communicate()
    assert out.returncode == 1
    assert re.fullmatch(
        rf"croft: \S+ is empty: no poll has been written yet; croft run \(pid {other.pid}\) {says}.*\n",
        out.stderr,
    ), out.stderr
    assert "start `croft run`" not in out.stderr


@pytest.mark.parametrize("interval", ["0", "-1", "nan"])
def test_a_bad_interval_is_a_clear_error(dataset: Path, interval: str) -> None:
    out = croft("top", f"--interval={interval}", "--dataset", str(dataset))
    assert out.returncode == 1
    assert out.stderr.startswith("croft: --interval must be a positive number of seconds, got ")
    assert out.stderr.endswith("; try --interval 2\n")


def test_batch_mode_reprints_every_interval_and_ends_cleanly_on_ctrl_c(dataset: Path) -> None:
    """Not a terminal and no --once: a whole table every --interval, like `top -b`."""
    proc = subprocess.Popen(
        [CROFT, "top", "--interval", "0.2", "--dataset", str(dataset)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    headers = 0
    for line in proc.stdout:
        headers += line.startswith("node ")
        if headers == 2:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert headers == 2
    assert proc.returncode == 0
    assert "Traceback" not in err


def test_at_takes_the_time_croft_printed_and_refuses_times_outside_the_data(dataset: Path) -> None:
    """The header's `2026-10-20 14:19:12 UTC`, given back to --at, shows that poll; an age (`10m`)
    and a time past the data are refused alike, naming the nearest poll."""
    printed = croft("top", "--once", "--dataset", str(dataset)).stdout.splitlines()[0]
    when = re.search(r"poll (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)", printed)
    assert when, printed
    back = croft("top", "--once", "--at", when.group(1), "--dataset", str(dataset))
    assert back.returncode == 0, back.stderr
    assert f"poll {when.group(1)}" in back.stdout.splitlines()[0]
    for at in ("10m", "2026-10-20 14:20:00 UTC"):  # a minute after the last poll
        out = croft("top", "--once", "--at", at, "--dataset", str(dataset))
        assert out.returncode == 1 and out.stdout == "", out
        assert re.fullmatch(
            rf"croft: \S+ has no poll within 10 s of --at {at} \([^)]+ UTC\): "
            r"(the nearest poll is [^;]+|no poll between [^;]+); give an --at time the dataset covers "
            r"\(croft stats shows its span\)\n",
            out.stderr,
        ), out.stderr
