"""croft top's cells: short strings for ids, names, rates, sizes, times and ages (pure)."""

from __future__ import annotations

import re

from croft.domain.dataset import Row
from croft.domain.utc import readable

SHORT_ID_CHARS = 12
BUSIEST_SYSCALLS = 3
WIDE_SYSCALLS = 8  # on a wide terminal, or in a pipe
ELLIPSIS = "…"
ITEM_SEP = "  "  # between the busiest syscalls of one cell


def truncate(text: str, max_chars: int, *, keep_end: bool = False) -> str:
    """`text` in at most `max_chars` characters (>= 1): cut with a trailing ellipsis, or a leading
    one when `keep_end` (the end of a path says the most). Control characters become spaces."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text)
    if len(clean) <= max_chars:
        return clean
    if keep_end:
        return ELLIPSIS + clean[len(clean) - max_chars + 1 :]
    return clean[: max_chars - 1] + ELLIPSIS


def container_cell(row: Row, max_chars: int = 16) -> str:
    """The container's 12-character short id, or `host:<cwd>` for a host process (the cwd names
    its project; a long one keeps its end)."""
    container_id = row.process.container_id
    if container_id is not None:
        return truncate(container_id[:SHORT_ID_CHARS], max_chars)
    prefix = "host:"
    room = max_chars - len(prefix)
    cwd = truncate(row.process.cwd or "?", room, keep_end=True)
    if cwd.startswith(ELLIPSIS) and "/" in cwd[2:]:
        cwd = ELLIPSIS + cwd[cwd.index("/", 2) :]  # cut at a directory, not inside a name
    return prefix + cwd


def pod_cell(namespace: str, name: str, max_chars: int) -> str:
    """`namespace/name` in at most `max_chars`: the pod's name kept whole where it can be (it tells
    the pods of one namespace apart), the namespace cut first."""
    whole = f"{namespace}/{name}"
    if len(truncate(whole, 4096)) <= max_chars:
        return truncate(whole, max_chars)
    room = max_chars - len(name) - 1  # for the namespace, its ellipsis included
    if room >= 2:
        return truncate(namespace, room) + "/" + truncate(name, 4096)
    return truncate(name, max_chars, keep_end=True)


def cpu_percent(cpu_cores: float) -> str:
    """CPU cores as a percentage of one core, like top, in at most 6 characters: 0.25 -> "25.0",
    16 -> "1600"."""
    percent = cpu_cores * 100
    if percent < 999.95:
        return f"{percent:.1f}"
    return f"{percent:.0f}" if percent < 99_999.5 else human_rate(percent)


def human_bytes(count: int) -> str:
    """Bytes in binary units, at most 5 characters: 0, 812B, 12K, 1.1G, 512M, 3.4T."""
    if count < 1024:
        return f"{count}B" if count else "0"
    value = float(count)
    for unit in "KMGTPE":
        value /= 1024
        if value < 9.95:
            return f"{value:.1f}{unit}"
        if value < 1023.5 or unit == "E":
            return f"{value:.0f}{unit}"
    raise AssertionError("unreachable: E is the last unit")  # pragma: no cover


def human_rate(per_sec: float) -> str:
    """A rate per second, short: 0.5, 3, 282, 1.2k, 35k, 4.1M."""
    if per_sec < 9.95:
        text = f"{per_sec:.1f}"
        return text.removesuffix(".0")
    for scale, unit in ((1.0, ""), (1e3, "k"), (1e6, "M"), (1e9, "G")):
        value = per_sec / scale
        if value < 9.95 and unit:
            return f"{value:.1f}{unit}"
        if value < 999.5:
            return f"{value:.0f}{unit}"
    return f"{per_sec / 1e12:.0f}T"


def busiest_syscalls(row: Row, count: int = BUSIEST_SYSCALLS) -> str:
    """The `count` syscalls with the highest rate this poll as "name rate/s", busiest first (ties
    by name); syscalls with a zero rate are left out. Names are whole (the longest Linux syscall
    name has 22 characters; only a hostile one past 64 is cut): a cell too narrow for them drops
    whole items (`fit_items`)."""
    busy = sorted((s for s in row.syscalls if s.rate_per_sec > 0), key=lambda s: (-s.rate_per_sec, s.name))
    return ITEM_SEP.join(f"{truncate(s.name, 64)} {human_rate(s.rate_per_sec)}/s" for s in busy[:count])


def fit_parts(line: str, max_chars: int, sep: str = " · ") -> str:
    """A line of parts joined by `sep` (the header, the key hints) in at most `max_chars`: the parts
    that fit whole, the later ones left out; cut only when the first alone is too long."""
    if len(line) <= max_chars:
        return line
    parts = line.split(sep)
    kept = parts[0]
    for part in parts[1:]:
        if len(kept) + len(sep) + len(part) > max_chars:
            break
        kept += sep + part
    return kept[:max_chars]


def fit_items(cell: str, max_chars: int) -> str:
    """A list cell (items joined by two spaces) in at most `max_chars`: as many whole items as fit,
    then an ellipsis for the rest; a first item too long by itself is cut."""
    if len(cell) <= max_chars:
        return cell
    items = cell.split(ITEM_SEP)
    kept = items[0]
    if len(kept) + len(ITEM_SEP) + 1 > max_chars:
        return truncate(cell, max_chars)
    for item in items[1:]:
        longer = kept + ITEM_SEP + item
        if len(longer) + len(ITEM_SEP) + 1 > max_chars:
            break
        kept = longer
    return kept + ITEM_SEP + ELLIPSIS


def utc_time(unix_ms: int) -> str:
    """`unix_ms` as "YYYY-MM-DD HH:MM:SS UTC"."""
    return readable(unix_ms)


def age(ms: int) -> str:
    """A duration in milliseconds, read as an age: "0.4 s", "12 s", "5 min", "3 h", "2 d"; a
    negative one (a clock behind the poll's) reads "in the future"."""
    if ms < 0:
        return "in the future"
    secs = ms / 1000
    if secs < 9.95:
        return f"{secs:.1f} s ago"
    if secs < 120:
        return f"{secs:.0f} s ago"
    if secs < 7200:
        return f"{secs / 60:.0f} min ago"
    if secs < 172_800:
        return f"{secs / 3600:.0f} h ago"
    return f"{secs / 86_400:.0f} d ago"


def short_age(ms: int) -> str:
    """An age in at most 4 characters, for the AGE column: "0s", "28s", "3m", "2h", "5d"."""
    secs = max(ms, 0) // 1000
    if secs < 100:
        return f"{secs}s"
    if secs < 6000:
        return f"{secs // 60}m"
    if secs < 360_000:
        return f"{secs // 3600}h"
    return f"{min(secs // 86_400, 999)}d"


def cgroup_cell(row: Row, max_chars: int) -> str:
    """The process's cgroup path in at most `max_chars`, cut as `fit_cgroup` cuts it."""
    return fit_cgroup(truncate(row.process.cgroup or "/", 4096), max(max_chars, 1))


SHORT_UUID_CHARS = 8
_LONG_ID = re.compile(  # an id starts a name, after a "-" or "_", or after "pod" (the kubelet's pod<uid>)
    r"(?<![0-9a-z])(?P<pod>pod)?"
    r"(?P<id>[0-9a-f]{8}(?:[-_][0-9a-f]{4}){3}[-_][0-9a-f]{12}|[0-9a-f]{16,})(?![0-9a-z])"
)


def short_ids(path: str) -> str:
    """`path` with each long id in it cut, as `docker ps` and the CONTAINER column cut them: a
    container id (16 or more hex digits) to its first 12 and an ellipsis, a pod UUID (dashes or,
    in systemd unit names, underscores) to its first 8 and an ellipsis.
    "/kubepods/besteffort/pod904f341f-15dc-…-167b5d41bb35/abd70765…" ->
    "/kubepods/besteffort/pod904f341f…/abd70765cd74…"."""

    def cut(match: re.Match[str]) -> str:
        text = match["id"]
        keep = SHORT_UUID_CHARS if len(text) == 36 and text[8] in "-_" else SHORT_ID_CHARS
        return (match["pod"] or "") + text[:keep] + ELLIPSIS

    return _LONG_ID.sub(cut, path)


def fit_cgroup(path: str, max_chars: int) -> str:
    """A cgroup path in at most `max_chars` (>= 1): whole when it fits; else with its long ids cut
    (`short_ids`); else its end, from a directory where that leaves at least half the width (the
    end names the unit: docker-<id>.scope, cri-containerd-<id>.scope, the pod's container)."""
    if len(path) <= max_chars:
        return path
    short = short_ids(path)
    if len(short) <= max_chars:
        return short
    end = truncate(short, max_chars, keep_end=True)
    slash = end.find("/", 1)
    if slash > 0 and len(end) - slash >= max_chars // 2:
        return ELLIPSIS + end[slash:]
    return end
