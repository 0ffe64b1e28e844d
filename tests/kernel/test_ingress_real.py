"""The offered-load signals against the real kernel: a server in its own network namespace (a veth
pair, as a pod has), real requests from the host, and what croft's procfs reader (`NetnsFS`) and eBPF
programs (`bpf/ingress.c`) say about them, against the counts the test itself made."""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from croft.adapters.host.netns import NetnsFS
from croft.adapters.host.procfs import ProcFS, read_bytes
from croft.adapters.host.sockdiag import open_sock_diag
from croft.domain.collector.ingress import endpoint_totals, ingress
from croft.domain.collector.kernel import KernelSample
from croft.domain.collector.netparse import parse_tcp_queues
from croft.domain.collector.snapshot import NetnsSample
from tests.helpers.loaders import open_source

pytestmark = [pytest.mark.root]

NS = f"croft-ingress-{os.getpid()}"
HOST_END, NS_END = f"cih{os.getpid() % 100000}", f"cin{os.getpid() % 100000}"
HOST_IP, NS_IP = "10.251.97.1", "10.251.97.2"
PORT, SILENT_PORT = 8080, 8081
REQUESTS, CONNECTIONS, WAITING, UNREAD_BYTES = 60, 5, 7, 100

# Answers HTTP/1.1 with keep-alive on PORT; listens on SILENT_PORT and never accepts, so connections
# wait in its accept queue with their bytes unread.
SERVER = f"""
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\\n")
    def log_message(self, *args):
        pass

silent = socket.socket()
silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
silent.bind(("0.0.0.0", {SILENT_PORT}))
silent.listen(64)
server = ThreadingHTTPServer(("0.0.0.0", {PORT}), Handler)
print("ready", flush=True)
server.serve_forever()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    if os.geteuid() != 0:
        pytest.skip("a network namespace and a veth pair need root")
    if shutil.which("ip") is None:
        pytest.skip("no ip(8): apt-get install iproute2")
    _ip("netns", "add", NS)
    process: subprocess.Popen[str] | None = None
    try:
        _ip("link", "add", HOST_END, "type", "veth", "peer", "name", NS_END)
        _ip("link", "set", NS_END, "netns", NS)
        _ip("addr", "add", f"{HOST_IP}/30", "dev", HOST_END)
        _ip("link", "set", HOST_END, "up")
        _ip("-n", NS, "addr", "add", f"{NS_IP}/30", "dev", NS_END)
        _ip("-n", NS, "link", "set", NS_END, "up")
        _ip("-n", NS, "link", "set", "lo", "up")
        process = subprocess.Popen(
            ["ip", "netns", "exec", NS, sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process.pid  # ip netns exec execs the interpreter: the same pid
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()
        subprocess.run(["ip", "link", "del", HOST_END], check=False, capture_output=True, timeout=30)
        _ip("netns", "del", NS)


def sample_of(netns: NetnsFS, tgid: int) -> NetnsSample:
    procfs = ProcFS(Path("/proc"))
    processes, _ = procfs.scan(lambda pid, _membership: pid == tgid)
    (sample,) = netns.read(processes)
    return sample


def keep_alive_requests(count: int) -> None:
    connection = http.client.HTTPConnection(NS_IP, PORT, timeout=10)
    for _ in range(count):
        connection.request("GET", "/")
        assert connection.getresponse().read() == b"ok\n"
    connection.close()


def test_the_namespace_counters_and_queues_count_what_was_sent(server: int) -> None:
    netns = NetnsFS(Path("/proc"))
    before = sample_of(netns, server)
    assert before.tgids == (server,)
    assert NS_IP in before.addresses and "127.0.0.1" not in before.addresses
    assert {PORT, SILENT_PORT} <= set(before.listen_ports)
    keep_alive_requests(REQUESTS)
    for _ in range(CONNECTIONS - 1):
        keep_alive_requests(1)
    waiting = [socket.create_connection((NS_IP, SILENT_PORT), timeout=10) for _ in range(WAITING)]
    try:
        for sock in waiting:
            sock.sendall(b"x" * UNREAD_BYTES)
        deadline = time.monotonic() + 10
        after = sample_of(netns, server)
        while after.unread_bytes < WAITING * UNREAD_BYTES and time.monotonic() < deadline:
            time.sleep(0.05)
            after = sample_of(netns, server)
        assert after.inode == before.inode
        assert after.passive_opens - before.passive_opens == CONNECTIONS + WAITING
        assert after.listen_backlog == WAITING  # handshakes done, never accepted
        assert after.unread_bytes == WAITING * UNREAD_BYTES
        requests = REQUESTS + CONNECTIONS - 1
        assert after.in_segs - before.in_segs >= requests  # every request, plus ACKs and handshakes
        assert after.rx_packets - before.rx_packets >= requests
        value = ingress(after, before, 2_000_000_000, KernelSample())
        assert value is not None and value.tcp_passive_opens_s == (CONNECTIONS + WAITING) / 2
    finally:
        for sock in waiting:
            sock.close()


def test_sock_diag_gives_the_queues_the_files_give(server: int) -> None:
    """The contract of the two ways to a namespace's TCP queues: one netlink dump
    (`croft.adapters.host.sockdiag`) and `net/tcp` + `net/tcp6`, on the same sockets: connections
    waiting unaccepted with bytes unread, keep-alive ones served, and the listeners."""
    path = f"/proc/{server}/ns/net"
    inode = Path(path).stat().st_ino
    assert open_sock_diag(path, inode + 1) is None  # another namespace's inode: never believed
    assert open_sock_diag(f"/proc/{server}/status", inode) is None  # not a namespace file
    diag = open_sock_diag(path, inode)
    assert diag is not None, "root makes a sock_diag socket in the server's namespace"
    before = diag.queues()  # what the earlier tests left waiting in the silent port's queue
    waiting = [socket.create_connection((NS_IP, SILENT_PORT), timeout=10) for _ in range(WAITING)]
    served = http.client.HTTPConnection(NS_IP, PORT, timeout=10)
    try:
        served.request("GET", "/")
        assert served.getresponse().read() == b"ok\n"
        for sock in waiting:
            sock.sendall(b"x" * UNREAD_BYTES)
        base = f"/proc/{server}/net/"
        deadline = time.monotonic() + 10
        while True:
            files = parse_tcp_queues(read_bytes(base + "tcp")) + parse_tcp_queues(read_bytes(base + "tcp6"))
            dumped = diag.queues()
            if files == dumped and dumped.unread_bytes >= before.unread_bytes + WAITING * UNREAD_BYTES:
                break
            assert time.monotonic() < deadline, f"files {files} vs sock_diag {dumped}"
            time.sleep(0.05)
        assert dumped.listen_backlog == before.listen_backlog + WAITING
        assert {PORT, SILENT_PORT} <= set(dumped.listen_ports)
        # NetnsFS takes the dump (the files only where no socket can be made): the same sample
        through_files = sample_of(NetnsFS(Path("/proc"), sock_diag=False), server)
        through_diag = sample_of(NetnsFS(Path("/proc")), server)
        assert (through_diag.listen_backlog, through_diag.unread_bytes, through_diag.listen_ports) == (
            through_files.listen_backlog,
            through_files.unread_bytes,
            through_files.listen_ports,
        )
    finally:
        served.close()
        for sock in waiting:
            sock.close()
        diag.close()


WITHOUT_SYS_ADMIN = """
import sys
from pathlib import Path
from croft.adapters.host.netns import NetnsFS
from croft.adapters.host.procfs import ProcFS
from croft.adapters.host.sockdiag import open_sock_diag
server = int(sys.argv[1])
path = f"/proc/{server}/ns/net"
print(open_sock_diag(path, Path(path).stat().st_ino) is None)
processes, _ = ProcFS().scan(lambda pid, _membership: pid == server)
(sample,) = NetnsFS().read(processes)
print(",".join(str(port) for port in sample.listen_ports))
"""


def test_without_cap_sys_admin_the_files_give_the_queues(server: int) -> None:
    """The DaemonSet's capabilities (no SYS_ADMIN): no namespace can be entered, so no sock_diag
    socket is made, and NetnsFS reads the files instead, with the same listeners."""
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1): apt-get install util-linux")
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", sys.executable, "-c",
         WITHOUT_SYS_ADMIN, str(server)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    no_socket, ports = done.stdout.split("\n")[:2]
    assert no_socket == "True"
    assert {PORT, SILENT_PORT} <= {int(port) for port in ports.split(",")}


@pytest.mark.bpf
def test_ebpf_counts_one_data_segment_per_request_and_each_handshake(loader: str, server: int) -> None:

    netns = NetnsFS(Path("/proc"))
    sample = sample_of(netns, server)
    with open_source(loader) as source:
        source.read()
        keep_alive_requests(REQUESTS)
        for _ in range(CONNECTIONS - 1):
            keep_alive_requests(1)
        counted = source.read()
    assert counted.counts_endpoints
    segments, connections = endpoint_totals(sample, counted.endpoints)
    requests = REQUESTS + CONNECTIONS - 1
    # One segment each (a request is sent in one write and waits for its answer); a retransmission
    # on this idle veth would add one.
    assert requests <= segments <= requests + 2
    assert connections == CONNECTIONS
    # The client's side of those connections lives in the host's namespace: not the server's.
    assert all(c.port != PORT for c in counted.endpoints if c.address == HOST_IP)
