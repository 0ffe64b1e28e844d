"""Real collector processes (serve_dataset.py) and local reading for the croft collect tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import zstandard

from croft.adapters.dataset.fetch import HttpDatasetSource
from croft.adapters.dataset.node_copy import NodeCopy, NodeResult
from croft.adapters.dataset.transports import HttpxTransport, SocketTransport
from croft.adapters.dataset.writer import DatasetWriter
from croft.domain.dataset.rotation import Limits
from tests.helpers.dataset import LIVE, poll_lines

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NO_ROTATION = Limits(rotate_secs=10**6, rotate_bytes=1 << 40, retain_days=3650, retain_bytes=1 << 41)


class Collector:
    """A real server process (serve_dataset.py, beside this module) serving `directory`'s dataset."""

    def __init__(self, directory: Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.directory = directory
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "serve_dataset.py"), str(directory / LIVE), str(port), host],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("port="), f"the server said {line!r}"
        self.port = int(line.strip().removeprefix("port="))
        self.url = f"http://{host}:{self.port}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def collector(directory: Path, port: int = 0, host: str = "127.0.0.1") -> Iterator[Collector]:
    server = Collector(directory, port, host)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def dataset_source(url: str, client: str = "socket") -> Iterator[HttpDatasetSource]:
    """The collector at `url` through either of croft collect's HTTP clients: `socket` (what
    `--url` uses) or `httpx` (what the API server's proxy path uses)."""
    if client == "httpx":
        with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
            yield HttpDatasetSource(HttpxTransport(http), "", url)
        return
    transport = SocketTransport(url, 10)
    try:
        yield HttpDatasetSource(transport, "", url)
    finally:
        transport.close()


def copy_node(url: str, out: Path, on_bytes: object = None, client: str = "socket") -> tuple[NodeResult, int]:
    """One node's copy from `url` into `out`: the result and the bytes moved over HTTP."""
    with dataset_source(url, client) as source:
        copy = NodeCopy(source, out, on_bytes=on_bytes) if callable(on_bytes) else NodeCopy(source, out)
        return copy.run(), source.moved_bytes


def write_polls(directory: Path, first_seq: int, polls: int, start_ms: int, rows: int = 20) -> int:
    """Append `polls` polls through a real DatasetWriter (a new run: a live file left there is
    rotated into a segment first); returns the next sequence number."""
    writer = DatasetWriter(directory / LIVE, NO_ROTATION, background=False)
    seq = first_seq
    for i in range(polls):
        writer.append(poll_lines(seq, rows, start_ms + 2000 * i), start_ms + 2000 * i)
        seq += rows
    writer.compress_now()
    writer.close()
    return seq


def local_lines(directory: Path) -> list[bytes]:
    """Every whole line croft stats would read in `directory`: non-hidden *.jsonl and *.jsonl.zst,
    a segment present both plain and compressed read once."""
    lines: list[bytes] = []
    names = {p.name for p in directory.iterdir()}
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.startswith(".") or not name.endswith((".jsonl", ".jsonl.zst")):
            continue
        if name.endswith(".zst") and name.removesuffix(".zst") in names:
            continue
        data = path.read_bytes()
        if name.endswith(".zst"):
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        lines += data.split(b"\n")[:-1]
    return lines


def seqs(lines: list[bytes]) -> list[int]:
    """The sequence numbers (tgids) of rows, sorted."""
    import msgspec

    return sorted(int(msgspec.json.decode(line)["tgid"]) for line in lines)
