"""Child processes with known syscalls, for the kernel-source contract, the syscount comparison and
the eBPF benchmark. A child reads one command a line on stdin, carries it out, answers `done`:

    getppid K        K getppid calls
    sendto K         K sendto calls of PAYLOAD_BYTES bytes on a loopback UDP socket
    ioctl K          K ioctls on the device given on the command line, and K on /dev/null
    rate R S         getppid at R calls a second for S seconds, paced on the monotonic clock

Between commands a child makes only a read of stdin and a write of `done`; nothing in CPython calls
getppid, sendto or ioctl on its own after start-up.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PAYLOAD_BYTES = 100

CHILD = r"""
import fcntl, os, socket, sys, termios, time

device = sys.argv[1] if len(sys.argv) > 1 else ""
sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sink.bind(("127.0.0.1", 0))
out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
address = sink.getsockname()
payload = b"x" * int(os.environ.get("PAYLOAD_BYTES", "100"))
gpu = os.open(device, os.O_RDWR) if device else -1
null = os.open("/dev/null", os.O_RDONLY)
buffer = bytearray(4)
getppid = os.getppid


def ioctl(fd):
    try:
        fcntl.ioctl(fd, termios.FIONREAD, buffer)
    except OSError:
        pass  # ENOTTY: the device has no such ioctl, the syscall happened all the same


def paced(rate, seconds):
    chunks = int(seconds * 200)
    per_chunk = rate // 200
    start = time.monotonic()
    for chunk in range(chunks):
        for _ in range(per_chunk):
            getppid()
        pause = start + (chunk + 1) / 200 - time.monotonic()
        if pause > 0:
            time.sleep(pause)


sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    command, *args = line.split()
    if command == "getppid":
        for _ in range(int(args[0])):
            getppid()
    elif command == "sendto":
        for _ in range(int(args[0])):
            out.sendto(payload, address)
            sink.recv(65536)
    elif command == "ioctl":
        for _ in range(int(args[0])):
            ioctl(gpu)
            ioctl(null)
    elif command == "rate":
        paced(int(args[0]), float(args[1]))
    sys.stdout.write("done\n")
    sys.stdout.flush()
"""


class Child:
    """A running child; `tgid` is its host pid (or the pid `host_tgid` found for a wrapped one)."""

    def __init__(self, argv_prefix: Sequence[str] = (), device: str = "") -> None:
        self.process = subprocess.Popen(
            [*argv_prefix, sys.executable, "-c", CHILD, *([device] if device else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        assert ready == "ready\n", f"child did not start: {ready!r}"
        self.tgid = self.process.pid

    def start(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def wait(self) -> None:
        assert self.process.stdout is not None
        answer = self.process.stdout.readline()
        assert answer == "done\n", f"child answered {answer!r}"

    def do(self, command: str) -> None:
        self.start(command)
        self.wait()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def make_gpu_node(directory: Path) -> Path:
    """A character device with /dev/null's numbers: it takes any ioctl and answers ENOTTY."""
    node = directory / "nvidia-test0"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return node
