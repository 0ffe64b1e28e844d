"""The network namespaces of a poll's processes, read through /proc/<pid>/net (`NetnsSample`).

Every process read in full is placed in its namespace by the inode of /proc/<pid>/ns/net (cached per
pid and start time). Each namespace but the host's (the one of pid 1) is then read once, through its
lowest pid: `net/snmp`, `net/netstat`, `net/dev` and its TCP queues every poll, its own
addresses (`net/fib_trie`, `net/if_inet6`) every `addresses_every` polls. A namespace none of whose
processes can be read this poll (all exited, a torn file) is left out of the poll, never an error.

The TCP queues (accept backlogs, unread bytes, listening ports) come from a netlink sock_diag dump
in the namespace (`croft.adapters.host.sockdiag`), or where none can be made from `net/tcp` and
`net/tcp6`. Either walks every bucket of the kernel's established-socket hash, which all namespaces
share unless `net.ipv4.tcp_child_ehash_entries` gives new ones their own: the cost is the hash's
size, not the namespace's sockets, once per namespace and poll (262,144 buckets on a 24 GB host:
about 0.9 ms a dump, 2.3 ms a file).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import attrs

from croft.adapters.host.procfs import read_bytes
from croft.adapters.host.sockdiag import SockDiag, open_sock_diag
from croft.domain.collector.netparse import (
    SocketQueues,
    parse_dev_rx,
    parse_fib_trie_local,
    parse_if_inet6,
    parse_mib,
    parse_tcp_queues,
)
from croft.domain.collector.procparse import Unparsable
from croft.domain.collector.snapshot import NetnsSample, ProcessChanges, ProcessSample

log = logging.getLogger("croft.netns")


@attrs.frozen
class _Addresses:
    read_at_poll: int
    addresses: tuple[str, ...]


def netns_inode(link: str) -> int | None:
    """The inode of a `net:[4026531840]` link target; None for anything else."""
    if link.startswith("net:[") and link.endswith("]"):
        digits = link[5:-1]
        if digits.isdigit():
            return int(digits)
    return None


class NetnsFS:
    """Reads the namespaces of the processes it is given, from `root` (`/proc`, or a fixture tree)."""

    def __init__(
        self, root: Path = Path("/proc"), *, addresses_every: int = 15, sock_diag: bool = True
    ) -> None:
        self._root = str(root)
        self._sock_diag = sock_diag
        self._diag: dict[int, SockDiag] = {}  # netns inode: its sock_diag socket
        self._no_diag: set[int] = set()  # netns inodes whose socket could not be made or failed
        self._said_no_diag = False
        self._addresses_every = addresses_every
        self._inodes: dict[int, tuple[int, int | None]] = {}  # pid: (start ticks, netns inode)
        self._members: dict[int, set[int]] = {}  # netns inode: the pids placed in it
        self._tgids: dict[int, tuple[int, ...]] = {}  # netns inode: its pids ascending, while unchanged
        self._addresses: dict[int, _Addresses] = {}
        self._poll = 0

    def _inode(self, pid: int) -> int | None:
        try:
            return netns_inode(os.readlink(f"{self._root}/{pid}/ns/net"))  # noqa: PTH115
        except OSError:
            return None

    def read(
        self, processes: tuple[ProcessSample, ...], changes: ProcessChanges | None = None
    ) -> tuple[NetnsSample, ...]:
        """The namespaces of `processes` (but the host's), by inode. `changes`, when given, are
        relative to the processes of the previous call: only the processes they name are placed
        again (10,000 idle processes a poll), and the namespaces are those a full placing gives."""
        self._poll += 1
        host = self._inode(1)
        if changes is None:
            cached, self._inodes, self._members, self._tgids = self._inodes, {}, {}, {}
            for process in processes:
                self._enter(process, cached.get(process.tgid))
        else:
            for tgid in changes.gone:
                self._leave(tgid)
            now = changes.by_tgid
            for tgid in changes.changed:
                process, known = now[tgid], self._inodes.get(tgid)
                if known is None or known[0] != process.start_ticks:
                    self._leave(tgid)
                    self._enter(process, None)
        members = self._members
        out: list[NetnsSample] = []
        for inode in sorted(members):
            if inode == host:
                continue
            tgids = self._tgids.get(inode)
            if tgids is None:
                tgids = self._tgids[inode] = tuple(sorted(members[inode]))
            sample = self._sample(inode, tgids)
            if sample is not None:
                out.append(sample)
        self._addresses = {inode: a for inode, a in self._addresses.items() if inode in members}
        for inode in [inode for inode in self._diag if inode not in members]:
            self._diag.pop(inode).close()  # the socket holds its namespace: let it go
        self._no_diag.intersection_update(members)
        return tuple(out)

    def _enter(self, process: ProcessSample, cached: tuple[int, int | None] | None) -> None:
        """Place `process` in its namespace (the cached inode when it is of the same process)."""
        if cached is None or cached[0] != process.start_ticks:
            cached = (process.start_ticks, self._inode(process.tgid))
        self._inodes[process.tgid] = cached
        inode = cached[1]
        if inode is not None:
            self._members.setdefault(inode, set()).add(process.tgid)
            self._tgids.pop(inode, None)

    def _leave(self, tgid: int) -> None:
        known = self._inodes.pop(tgid, None)
        if known is None or known[1] is None:
            return
        inode = known[1]
        members = self._members[inode]
        members.discard(tgid)
        if not members:
            del self._members[inode]
        self._tgids.pop(inode, None)

    def _sample(self, inode: int, tgids: tuple[int, ...]) -> NetnsSample | None:
        for tgid in tgids:
            base = f"{self._root}/{tgid}/net/"
            try:
                snmp = parse_mib(read_bytes(base + "snmp"))
                netstat = parse_mib(read_bytes(base + "netstat"))
                rx_bytes, rx_packets = parse_dev_rx(read_bytes(base + "dev"))
                queues = self._queues(inode, tgid, base)
                addresses = self._own_addresses(inode, base)
            except (OSError, Unparsable) as exc:
                log.debug("network namespace %d through pid %d: %s", inode, tgid, exc)
                continue
            return NetnsSample(
                inode=inode,
                tgids=tgids,
                passive_opens=snmp.get("Tcp.PassiveOpens", 0),
                in_segs=snmp.get("Tcp.InSegs", 0),
                listen_drops=netstat.get("TcpExt.ListenDrops", 0),
                rx_bytes=rx_bytes,
                rx_packets=rx_packets,
                listen_backlog=queues.listen_backlog,
                unread_bytes=queues.unread_bytes,
                addresses=addresses,
                listen_ports=queues.listen_ports,
            )
        return None

    def _queues(self, inode: int, tgid: int, base: str) -> SocketQueues:
        """The namespace's TCP queues: through its sock_diag socket (made on first need), else its
        `net/tcp` and `net/tcp6` files (see `croft.adapters.host.sockdiag`)."""
        diag = self._diag.get(inode)
        if diag is None and self._sock_diag and inode not in self._no_diag:
            diag = open_sock_diag(f"{self._root}/{tgid}/ns/net", inode)
            if diag is None:
                if not self._said_no_diag:
                    self._said_no_diag = True
                    log.info(
                        "network namespace %d: no sock_diag socket in it (entering a namespace needs "
                        "CAP_SYS_ADMIN); its TCP queues come from net/tcp, ~2 ms a file and poll",
                        inode,
                    )
                self._no_diag.add(inode)
            else:
                self._diag[inode] = diag
        if diag is not None:
            try:
                return diag.queues()
            except OSError as exc:
                log.info("network namespace %d: sock_diag failed (%s); reading net/tcp instead", inode, exc)
                diag.close()
                del self._diag[inode]
                self._no_diag.add(inode)
        queues = parse_tcp_queues(read_bytes(base + "tcp"))
        with contextlib.suppress(FileNotFoundError):  # a kernel without IPv6
            queues = queues + parse_tcp_queues(read_bytes(base + "tcp6"))
        return queues

    def _own_addresses(self, inode: int, base: str) -> tuple[str, ...]:
        cached = self._addresses.get(inode)
        if cached is not None and self._poll - cached.read_at_poll < self._addresses_every:
            return cached.addresses
        addresses = parse_fib_trie_local(read_bytes(base + "fib_trie"))
        with contextlib.suppress(FileNotFoundError):
            addresses = (*addresses, *parse_if_inet6(read_bytes(base + "if_inet6")))
        self._addresses[inode] = _Addresses(self._poll, addresses)
        return addresses
