"""Compiling and loading croft's eBPF programs with BCC, and draining their maps.

Every failure to load becomes one `UserError` sentence naming the cause and the fix; what clang and
the verifier printed (BCC writes it straight to file descriptor 2) is shown only when `verbose`.
`bcc` is imported inside functions: importing this module loads nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from croft.errors import UserError

TRACEFS_ROOTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
SETUP_HINT = "run scripts/setup-bpf.sh as root"

log = logging.getLogger("croft.bcc")


def program_dir() -> Path:
    """The directory of croft's bpf/*.c: package data, so a source checkout (where the repository's
    `bpf/` links to it) and an installed wheel find the same files."""
    return Path(str(resources.files("croft") / "bpf"))


def program_text(directory: Path, names: Sequence[str]) -> str:
    """The programs `names` (file stems) of `directory`, concatenated into one BCC module so they
    compile once."""
    parts = []
    for name in names:
        path = directory / f"{name}.c"
        try:
            parts.append(f"// {path}\n{path.read_text()}")
        except OSError as exc:
            raise UserError(f"cannot read the eBPF program {path}: {exc.strerror}; reinstall croft") from exc
    return "\n".join(parts)


def has_tracepoint(category: str, event: str) -> bool:
    """Whether tracefs lists tracepoint `category:event` (False also when tracefs is not mounted)."""
    return any((root / "events" / category / event).is_dir() for root in TRACEFS_ROOTS)


def check_can_load(release: str, modules_root: Path) -> None:
    """Raise the `UserError` for what is missing before BCC is even tried: the module, root, headers."""
    try:
        import bcc  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"the bcc Python module is not importable from {sys.executable}: {SETUP_HINT} "
            "(it installs python3-bpfcc and links it into the virtualenv)"
        ) from exc
    if os.geteuid() != 0:
        raise UserError("loading eBPF programs needs root: run croft run as root (e.g. with sudo)")
    build = modules_root / release / "build"
    if not (build / "include").is_dir() and not Path("/sys/kernel/kheaders.tar.xz").exists():
        raise UserError(
            f"no kernel headers for Linux {release} at {build}: install linux-headers-{release}, "
            f"or {SETUP_HINT} to link Debian's linux-headers-amd64"
        )


@contextlib.contextmanager
def _stderr_captured() -> Iterator[tempfile._TemporaryFileWrapper[bytes]]:
    """Point file descriptor 2 at a temporary file for the duration (clang and libbpf write there)."""
    sys.stderr.flush()
    with tempfile.NamedTemporaryFile(prefix="croft-bcc-") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield capture
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def load(text: str, cflags: Sequence[str], *, source: Path, release: str, verbose: bool) -> Any:
    """Compile `text`, load it and attach its RAW_TRACEPOINT_PROBEs; returns the `bcc.BPF`."""
    from bcc import BPF

    with _stderr_captured() as capture:
        try:
            return BPF(text=text.encode(), cflags=list(cflags))
        except Exception as exc:
            failure: Exception | None = exc
        capture.seek(0)
        output = capture.read().decode(errors="replace")
    if verbose and output:
        sys.stderr.write(output)
    raise _load_error(str(failure), output, source=source, release=release, verbose=verbose) from failure


def _load_error(message: str, output: str, *, source: Path, release: str, verbose: bool) -> UserError:
    def see(what: str) -> str:
        return f"{what} is above" if verbose else f"rerun with --verbose to see {what}"

    if "Failed to compile" in message:
        if "kernel headers" in output:
            return UserError(f"BCC found no kernel headers for Linux {release}: {SETUP_HINT}")
        return UserError(
            f"the eBPF programs in {source} do not compile against the headers in "
            f"/lib/modules/{release}/build: {see('what clang said')}"
        )
    if "Operation not permitted" in message:
        return UserError(
            "the kernel refused to load eBPF programs (root with CAP_BPF, CAP_PERFMON and "
            "CAP_SYS_ADMIN is needed): run croft run as root, in a privileged container"
        )
    if "Failed to load" in message:
        program = message.split("program", 1)[-1].split(":", 1)[0].strip(" b'")
        return UserError(
            f"the kernel's verifier rejected croft's eBPF program {program}: {see('its log')}, "
            f"and report it with the kernel version {release}"
        )
    if "attach" in message:
        return UserError(
            f"cannot attach croft's eBPF programs to the kernel's tracepoints ({message}): "
            f"{SETUP_HINT}, or {see('what BCC said')}"
        )
    return UserError(f"loading croft's eBPF programs failed ({message}): {see('what BCC said')}")


class Drain:
    """Reads and deletes every entry of one BPF hash map per call, each entry atomically
    (BPF_MAP_LOOKUP_AND_DELETE_BATCH, Linux 5.6+), so no increment falls between a read and a
    clear. The key and value buffers are allocated once, at the largest capacity of `tables` (maps of
    one key and value type: a pair drained by turns, `which` naming the one a call drains)."""

    def __init__(self, *tables: Any) -> None:
        self._tables = tables
        self._capacity = max(int(table.max_entries) for table in tables)
        self._keys = (tables[0].Key * self._capacity)()
        self._values = (tables[0].Leaf * self._capacity)()

    def __call__(self, which: int = 0) -> Iterator[tuple[Any, Any]]:
        """(key, value) pairs: ctypes structs viewing the buffers (copy what you keep before the next
        call), or plain ints for integer keys and values."""
        total = self._drain(self._tables[which])
        for index in range(total):
            yield self._keys[index], self._values[index]

    def raw(self, which: int = 0) -> tuple[bytes, bytes]:
        """The drained keys and values as packed bytes (for `struct.iter_unpack`: a few hundred ns
        an entry, where ctypes structs cost microseconds)."""
        table = self._tables[which]
        total = self._drain(table)
        key_size, value_size = ctypes.sizeof(table.Key), ctypes.sizeof(table.Leaf)
        return (
            ctypes.string_at(self._keys, key_size * total),
            ctypes.string_at(self._values, value_size * total),
        )

    def _drain(self, table: Any) -> int:
        from bcc.libbcc import lib

        key_size = ctypes.sizeof(table.Key)
        value_size = ctypes.sizeof(table.Leaf)
        capacity = int(table.max_entries)
        in_batch, out_batch, count = ctypes.c_uint32(0), ctypes.c_uint32(0), ctypes.c_uint32(0)
        total = 0
        while total < capacity:
            count.value = capacity - total
            result = lib.bpf_lookup_and_delete_batch(
                table.map_fd,
                ctypes.byref(in_batch) if total else None,
                ctypes.byref(out_batch),
                ctypes.byref(self._keys, key_size * total),
                ctypes.byref(self._values, value_size * total),
                ctypes.byref(count),
            )
            code = (ctypes.get_errno() or -result) if result != 0 else 0
            total += count.value
            if code in (errno.ENOENT, errno.ENOSPC):
                break  # the end of the map; or a bucket larger than the room left: next poll's
            if code != 0:
                raise OSError(code, f"BPF_MAP_LOOKUP_AND_DELETE_BATCH: {os.strerror(code)}")
            if count.value == 0:
                break
            in_batch.value = out_batch.value
        return total


# membarrier(2)'s syscall number by machine (arch/x86/entry/syscalls/syscall_64.tbl,
# include/uapi/asm-generic/unistd.h), and its MEMBARRIER_CMD_GLOBAL (include/uapi/linux/membarrier.h).
MEMBARRIER_NR = {"x86_64": 324, "aarch64": 283}
MEMBARRIER_CMD_GLOBAL = 1
LOSS = "a count made while its map is drained may be lost"


class ProgramBarrier:
    """Waits until every eBPF program run that began before the call has ended: membarrier
    (MEMBARRIER_CMD_GLOBAL), which runs synchronize_rcu() when more than one CPU is online
    (kernel/sched/membarrier.c), and tracepoint programs run inside rcu_read_lock()
    (kernel/trace/bpf_trace.c).
    Where the syscall is missing (another machine, a nohz_full kernel: EINVAL) it says so once, as a
    warning, and returns at once: an increment racing a drain may then be lost."""

    def __init__(self, machine: str | None = None) -> None:
        machine = machine if machine is not None else os.uname().machine
        self._nr = MEMBARRIER_NR.get(machine)
        self._libc = ctypes.CDLL(None, use_errno=True)
        if self._nr is None:
            log.warning("no membarrier syscall number for %s: %s", machine, LOSS)

    def __call__(self) -> None:
        if self._nr is None:
            return
        if self._libc.syscall(self._nr, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0:
            log.warning("membarrier(MEMBARRIER_CMD_GLOBAL): %s: %s", os.strerror(ctypes.get_errno()), LOSS)
            self._nr = None


def per_cpu_total(table: Any, slots: Sequence[int] = (0,)) -> int:
    """The sum over CPUs and over `slots` of a BPF_PERCPU_ARRAY (slots past its size count 0)."""
    size = int(table.max_entries)
    return sum(int(v) for slot in slots if slot < size for v in table[slot])
