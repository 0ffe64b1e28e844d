"""croft's eBPF maps by file descriptor, whichever loader made them (libbpf from the CO-RE object,
or BCC): reading and deleting every entry at once, updates, per-CPU sums, and the barrier that lets
a drain wait for the programs that wrote what it drains.

Keys and values are bytes in the layout of the C structs of bpf/*.c (`struct.Struct` formats next
to their readers, checked against the object's BTF in tests/kernel/test_bpf_objects.py).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from collections.abc import Iterator, Sequence

import attrs

from croft.adapters.host.libbpf import Libbpf

log = logging.getLogger("croft.ebpf")


@attrs.define
class BpfMap:
    """One map: its file descriptor and sizes (bytes; `value_size` of one CPU's value for a per-CPU
    map), its capacity in entries."""

    name: str
    fd: int
    key_size: int
    value_size: int
    max_entries: int
    lib: Libbpf

    def set(self, key: bytes, value: bytes) -> None:
        self.lib.update(self.fd, _buffer(key, self.key_size), _buffer(value, self.value_size))

    def get(self, key: bytes) -> bytes | None:
        value = ctypes.create_string_buffer(self.value_size)
        return value.raw if self.lib.lookup(self.fd, _buffer(key, self.key_size), value) else None

    def delete(self, key: bytes) -> bool:
        """Whether the key was there."""
        return self.lib.delete(self.fd, _buffer(key, self.key_size))

    def all_keys(self) -> list[bytes]:
        """Every key, walked with BPF_MAP_GET_NEXT_KEY (for a map nothing else deletes from)."""
        found: list[bytes] = []
        previous: ctypes.Array[ctypes.c_char] | None = None
        following = ctypes.create_string_buffer(self.key_size)
        while self.lib.next_key(self.fd, previous, following):
            found.append(following.raw)
            previous = ctypes.create_string_buffer(following.raw, self.key_size)
            if len(found) > self.max_entries:
                break  # the walk restarted under deletions: what was found is every key
        return found

    def per_cpu_total(self, slots: Sequence[int] = (0,), cpus: int | None = None) -> int:
        """The sum over CPUs and over `slots` of a per-CPU array of u64 (slots past its size count 0)."""
        cpus = cpus if cpus is not None else self.lib.num_possible_cpus()
        stride = (self.value_size + 7) // 8 * 8  # each CPU's value is 8-byte aligned
        values = ctypes.create_string_buffer(stride * cpus)
        total = 0
        for slot in slots:
            if slot >= self.max_entries:
                continue
            if self.lib.lookup(self.fd, _buffer(slot.to_bytes(4, "little"), 4), values):
                raw = values.raw
                total += sum(
                    int.from_bytes(raw[cpu * stride : cpu * stride + 8], "little") for cpu in range(cpus)
                )
        return total


class Drain:
    """Reads and deletes every entry of one hash map per call: BPF_MAP_LOOKUP_AND_DELETE_BATCH (Linux
    5.6+), each entry read and deleted at once under its bucket lock. Where the kernel lacks it, each
    key is looked up and deleted in turn (which loses nothing for croft's drained maps: no program
    writes a map of the parity being drained, see bpf/syscalls.c).

    The key and value buffers are allocated once, at the largest capacity of `maps` (maps of one key
    and value size: a pair drained by turns, `which` naming the one a call drains). `batch=False`
    drains key by key from the start, as on a kernel without batch operations."""

    def __init__(self, *maps: BpfMap, batch: bool = True) -> None:
        self._maps = maps
        capacity = max(m.max_entries for m in maps)
        self._key_size, self._value_size = maps[0].key_size, maps[0].value_size
        self._keys = ctypes.create_string_buffer(self._key_size * capacity)
        self._values = ctypes.create_string_buffer(self._value_size * capacity)
        self._batch = batch

    def raw(self, which: int = 0) -> tuple[bytes, bytes]:
        """The drained keys and values as packed bytes (for `struct.iter_unpack`)."""
        bpf_map = self._maps[which]
        total = self._drain_batch(bpf_map) if self._batch else None
        if total is None:
            return self._drain_each(bpf_map)
        return (
            ctypes.string_at(self._keys, self._key_size * total),
            ctypes.string_at(self._values, self._value_size * total),
        )

    def __call__(self, which: int = 0) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs of bytes."""
        keys, values = self.raw(which)
        k, v = self._key_size, self._value_size
        for index in range(len(keys) // k):
            yield keys[index * k : (index + 1) * k], values[index * v : (index + 1) * v]

    def _drain_batch(self, bpf_map: BpfMap) -> int | None:
        """Entries drained into the buffers, or None where the kernel has no batch operations."""
        in_batch, out_batch, count = ctypes.c_uint32(0), ctypes.c_uint32(0), ctypes.c_uint32(0)
        capacity, total = bpf_map.max_entries, 0
        while total < capacity:
            count.value = capacity - total
            code = bpf_map.lib.lookup_and_delete_batch(
                bpf_map.fd,
                in_batch if total else None,
                out_batch,
                self._keys,
                self._values,
                (self._key_size * total, self._value_size * total),
                count,
            )
            total += count.value
            if code in (errno.ENOENT, errno.ENOSPC):
                break  # the end of the map; or a bucket larger than the room left: next poll's
            if code in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP) and total == 0 and not in_batch.value:
                log.info("no BPF_MAP_LOOKUP_AND_DELETE_BATCH here (Linux 5.6+): maps are drained key by key")
                self._batch = False
                return None
            if code != 0:
                raise OSError(code, f"BPF_MAP_LOOKUP_AND_DELETE_BATCH on {bpf_map.name}: {os.strerror(code)}")
            if count.value == 0:
                break
            in_batch.value = out_batch.value
        return total

    def _drain_each(self, bpf_map: BpfMap) -> tuple[bytes, bytes]:
        keys, values = [], []
        for key in bpf_map.all_keys():
            value = bpf_map.get(key)
            if value is not None and bpf_map.delete(key):
                keys.append(key)
                values.append(value)
        return b"".join(keys), b"".join(values)


def _buffer(data: bytes, size: int) -> ctypes.Array[ctypes.c_char]:
    if len(data) != size:
        raise ValueError(f"{len(data)} bytes for a {size}-byte key or value")
    return ctypes.create_string_buffer(data, size)


MEMBARRIER_CMD_GLOBAL = 1  # include/uapi/linux/membarrier.h
LOSS = "a count made while its map is drained may be lost"


class ProgramBarrier:
    """Waits until every eBPF program run that began before the call has ended: membarrier
    (MEMBARRIER_CMD_GLOBAL), which runs synchronize_rcu() when more than one CPU is online
    (kernel/sched/membarrier.c), and tracepoint programs run inside rcu_read_lock()
    (kernel/trace/bpf_trace.c). `nr` is membarrier's number in this machine's syscall table.
    Where the syscall is missing (no number, a nohz_full kernel: EINVAL) it says so once, as a
    warning, and returns at once: an increment racing a drain may then be lost."""

    def __init__(self, nr: int | None) -> None:
        self._nr = nr
        self._libc = ctypes.CDLL(None, use_errno=True)
        if nr is None:
            log.warning("no membarrier syscall number for %s: %s", os.uname().machine, LOSS)

    def __call__(self) -> None:
        if self._nr is None:
            return
        if self._libc.syscall(self._nr, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0:
            log.warning("membarrier(MEMBARRIER_CMD_GLOBAL): %s: %s", os.strerror(ctypes.get_errno()), LOSS)
            self._nr = None
