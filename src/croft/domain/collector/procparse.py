"""Pure parsers for the procfs and cgroupfs files croft reads. Each takes the file's bytes and
returns plain values, or raises `Unparsable` for a torn or damaged file (the shell drops that
process for the poll and counts it). Names (comm, arguments, cgroup paths, libraries) are OS
strings: bytes that are not UTF-8 kept as lone surrogates (`croft.domain.os_text`), so that a
cgroup path opens the cgroup it names by its real bytes; rows write them escaped.

Formats: proc(5) and https://docs.kernel.org/admin-guide/cgroup-v2.rst,
https://docs.kernel.org/accounting/psi.html, https://docs.kernel.org/scheduler/sched-stats.html.
"""

from __future__ import annotations

import attrs

from croft.domain.collector.snapshot import CgroupMembership


class Unparsable(ValueError):
    """A pseudo-file whose bytes do not have the kernel's shape (truncated, empty, garbled)."""


@attrs.frozen
class Stat:
    """The fields croft uses from /proc/<pid>/stat. `rss_pages` is in pages, `vsize_bytes` in bytes,
    `start_ticks` and `cpu_ticks` (utime+stime) in clock ticks."""

    comm: str
    cpu_ticks: int
    threads: int
    start_ticks: int
    vsize_bytes: int
    rss_pages: int


def parse_stat(data: bytes) -> Stat:
    """Parse /proc/<pid>/stat. The comm sits between the first '(' and the last ')' and may hold
    spaces or parentheses; every field after it is split on spaces. A line without its final
    newline, or with fewer than the 44 fields every kernel since 2.6 writes, is torn."""
    if not data.endswith(b"\n"):
        raise Unparsable("stat line has no final newline (torn read)")
    text = data.decode("utf-8", "surrogateescape")
    open_at = text.find("(")
    close_at = text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise Unparsable("stat has no (comm)")
    rest = text[close_at + 2 :].split()
    # rest[0] is field 3 (state); field n of proc(5) is rest[n - 3].
    if len(rest) < 42:
        raise Unparsable(f"stat has {len(rest) + 2} fields, expected at least 44")
    try:
        return Stat(
            comm=text[open_at + 1 : close_at],
            cpu_ticks=int(rest[11]) + int(rest[12]),
            threads=int(rest[17]),
            start_ticks=int(rest[19]),
            vsize_bytes=int(rest[20]),
            rss_pages=int(rest[21]),
        )
    except ValueError as exc:
        raise Unparsable(f"stat has a non-numeric field: {exc}") from exc


def parse_status_ctxt(data: bytes) -> tuple[int, int]:
    """(voluntary, involuntary) context switches from /proc/<pid>/status (its last two lines)."""
    return _status_field(data, b"\nvoluntary_ctxt_switches:"), _status_field(
        data, b"\nnonvoluntary_ctxt_switches:"
    )


def _status_field(data: bytes, key: bytes) -> int:
    start = data.find(key)
    if start < 0:
        raise Unparsable(f"no {key.strip().decode()} line")
    end = data.find(b"\n", start + len(key))
    return _int_after_colon(data[start + 1 : end if end >= 0 else len(data)])


def _int_after_colon(line: bytes) -> int:
    try:
        return int(line.split(b":", 1)[1])
    except ValueError as exc:
        raise Unparsable(f"not a number in {line!r}") from exc


def parse_io(data: bytes) -> tuple[int, int]:
    """(read_bytes, write_bytes) of storage I/O from /proc/<pid>/io."""
    return _status_field(data, b"\nread_bytes:"), _status_field(data, b"\nwrite_bytes:")


def parse_schedstat(data: bytes) -> int:
    """Nanoseconds spent waiting on a run queue: the second field of /proc/<pid>/schedstat."""
    fields = data.split()
    if len(fields) < 3:
        raise Unparsable("schedstat has fewer than 3 fields")
    try:
        return int(fields[1])
    except ValueError as exc:
        raise Unparsable("schedstat field is not a number") from exc


def parse_cmdline(data: bytes) -> tuple[str, ...]:
    """Arguments of /proc/<pid>/cmdline (NUL-separated; empty for kernel threads)."""
    return tuple(arg.decode("utf-8", "surrogateescape") for arg in data.split(b"\0") if arg)


def parse_cgroup_membership(data: bytes) -> CgroupMembership:
    """Parse /proc/<pid>/cgroup: `0::<path>` is the v2 hierarchy, `<id>:<controllers>:<path>` a v1
    one (several controllers may share a line: `cpu,cpuacct`)."""
    unified: str | None = None
    controllers: list[tuple[str, str]] = []
    # Split on newlines only: a cgroup's name may hold any other byte (str.splitlines would also
    # split on \x1c-\x1e, \x85 and U+2028).
    for line in data.decode("utf-8", "surrogateescape").split("\n"):
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        path = path.removesuffix(" (deleted)")
        if not names:
            unified = path
        else:
            controllers.extend((name, path) for name in names.split(","))
    if unified is None and not controllers:
        raise Unparsable("cgroup file names no hierarchy")
    return CgroupMembership(unified=unified, controllers=tuple(sorted(controllers)))


def parse_maps_libraries(data: bytes) -> tuple[str, ...]:
    """Sorted basenames of the shared objects (`*.so`, `*.so.N`) mapped in /proc/<pid>/maps."""
    names: set[str] = set()
    for line in data.split(b"\n"):
        slash = line.find(b"/")
        if slash < 0 or b".so" not in line:
            continue
        base = line[slash:].rsplit(b"/", 1)[-1].removesuffix(b" (deleted)")
        if base.endswith(b".so") or b".so." in base:
            names.add(base.decode("utf-8", "surrogateescape"))
    return tuple(sorted(names))


def parse_flat_keyed(data: bytes, sep: bytes = b" ") -> dict[str, int]:
    """`key value` lines (cpu.stat, memory.events, memory.stat) or `key: value` lines (io)."""
    out: dict[str, int] = {}
    for line in data.split(b"\n"):
        key, found, value = line.partition(sep)
        if not found:
            continue
        try:
            out[key.strip().decode()] = int(value)
        except ValueError:
            continue
    return out


def parse_single_int(data: bytes) -> int:
    """A file holding one integer (memory.current, cpuacct.usage, memory.usage_in_bytes)."""
    try:
        return int(data.strip())
    except ValueError as exc:
        raise Unparsable(f"expected one integer, got {data[:40]!r}") from exc


def parse_psi_some_avg10(data: bytes) -> float:
    """The `some avg10` percentage of a PSI file (cpu.pressure, memory.pressure, io.pressure)."""
    return parse_psi_some(data)[0]


def parse_psi_some(data: bytes) -> tuple[float, int | None]:
    """The `some` line of a PSI file: its avg10 percentage and its `total`, the cumulative
    microseconds in which at least one task stalled on the resource (None if the line has no
    total). https://docs.kernel.org/accounting/psi.html"""
    for line in data.split(b"\n"):
        if line.startswith(b"some "):
            fields = dict(field.partition(b"=")[::2] for field in line.split()[1:])
            if b"avg10" not in fields:
                break
            try:
                total = fields.get(b"total")
                return float(fields[b"avg10"]), None if total is None else int(total)
            except ValueError as exc:
                raise Unparsable(f"bad avg10 or total in {line!r}") from exc
    raise Unparsable("pressure file has no 'some avg10='")
