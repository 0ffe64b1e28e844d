"""The dataset endpoint on a real `croft run --replay --metrics-addr` process: the index, Range, and
nothing but the dataset directory's own files, whatever the request path says."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from tests.helpers.cli import CROFT
from tests.helpers.net import free_port

REPO = Path(__file__).resolve().parents[2]
SECRET = b"not for the network\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("endpoint")
    data = root / "data"
    data.mkdir()
    (root / "secret.jsonl").write_bytes(SECRET)  # beside the dataset directory
    (data / ".croft-dataset-20261020T130000Z.jsonl.zst.tmp").write_bytes(SECRET)  # a compression in flight
    (data / "croft-dataset-20261020T120000Z.jsonl.zst").symlink_to(root / "secret.jsonl")
    (data / "notes.txt").write_bytes(SECRET)
    port = free_port()
    process = subprocess.Popen(
        [CROFT, "run", "--replay", str(REPO / "fixtures/traces/live"),
         "--dataset", str(data / "croft-dataset.jsonl"), "--metrics-addr", f"127.0.0.1:{port}",
         "--linger", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/dataset/").json()["files"]:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "croft run never served its dataset"
            time.sleep(0.1)
        yield url, data
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stderr is not None:
            process.stderr.close()


@pytest.mark.parametrize("header", ["bytes=" + "9" * 5000 + "-", "bytes=" + "1" * 4301 + "-" + "2" * 4301])
def test_a_range_of_thousands_of_digits_is_416_not_a_500(served: tuple[str, Path], header: str) -> None:
    url, data = served
    answer = httpx.get(url + "/dataset/croft-dataset.jsonl", headers={"Range": header})
    size = (data / "croft-dataset.jsonl").stat().st_size
    assert answer.status_code == 416 and answer.headers["content-range"] == f"bytes */{size}"
    assert httpx.get(url + "/dataset/").status_code == 200  # and it serves on


def raw_get(url: str, target: str) -> tuple[int, bytes]:
    """GET `target` sent byte for byte (no client-side normalisation of `..` or `//`)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.0\r\nHost: x\r\n\r\n".encode("latin-1"))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_the_index_lists_the_dataset_files_with_sizes(served: tuple[str, Path]) -> None:
    url, data = served
    index = msgspec.json.decode(httpx.get(url + "/dataset/").content)
    live = data / "croft-dataset.jsonl"
    assert index == {
        "version": 1,
        "live": "croft-dataset.jsonl",
        "files": [
            {
                "name": live.name,
                "size_bytes": live.stat().st_size,
                "mtime_ms": live.stat().st_mtime_ns // 10**6,
            }
        ],
    }


def test_range_requests(served: tuple[str, Path]) -> None:
    url, data = served
    content = (data / "croft-dataset.jsonl").read_bytes()
    size = len(content)
    whole = httpx.get(url + "/dataset/croft-dataset.jsonl")
    assert whole.status_code == 200 and whole.content == content
    part = httpx.get(url + "/dataset/croft-dataset.jsonl", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == content[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}"
    tail = httpx.get(url + "/dataset/croft-dataset.jsonl", headers={"Range": f"bytes={size - 10}-"})
    assert tail.content == content[-10:]
    past = httpx.get(url + "/dataset/croft-dataset.jsonl", headers={"Range": f"bytes={size}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"
    head = httpx.head(url + "/dataset/croft-dataset.jsonl")
    assert head.status_code == 200 and head.headers["content-length"] == str(size) and head.content == b""


@pytest.mark.parametrize(
    "target",
    ["/dataset/../secret.jsonl", "/dataset/..%2fsecret.jsonl", "/dataset/%2e%2e/secret.jsonl",
     "/dataset//etc/passwd", "/dataset/%2fetc%2fpasswd",
     "/dataset/.croft-dataset-20261020T130000Z.jsonl.zst.tmp",
     "/dataset/croft-dataset-20261020T120000Z.jsonl.zst",
     "/dataset/notes.txt", "/dataset/croft-dataset.jsonl%00",
     "/dataset/%ff", "/dataset/croft-dataset.jsonl/..", "/secret.jsonl", "/dataset/../../../../etc/passwd"],
)  # fmt: skip
def test_nothing_outside_the_dataset_files_is_served(served: tuple[str, Path], target: str) -> None:
    url, _ = served
    status, body = raw_get(url, target)
    assert status == 404
    assert SECRET not in body and b"root:" not in body


def test_the_endpoint_never_follows_a_symlink(served: tuple[str, Path]) -> None:
    url, data = served
    link = data / "croft-dataset-20261020T120000Z.jsonl.zst"
    assert link.is_symlink() and link.exists()
    assert httpx.get(url + f"/dataset/{link.name}").status_code == 404
    names = [f["name"] for f in httpx.get(url + "/dataset/").json()["files"]]
    assert link.name not in names and "notes.txt" not in names
