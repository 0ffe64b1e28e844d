"""croft top's keys: the bytes a terminal sends, decoded to key names, and what each key does to
the screen's state (pure; the terminal adapter only reads bytes).

Keys, as htop and below have them: c, m, s, p sort by CPU, memory, syscalls, PID, and the same key
again turns the order round; / types a new filter (Enter keeps it, Esc keeps the one before; Esc
outside typing clears the filter); the arrows, PgUp, PgDn, Home and End scroll; with --at, ← and →
(or [ and ]) step to the poll before or after; ? or h shows the keys (any key goes back); q quits.
"""

from __future__ import annotations

import attrs

from croft.domain.top.table import View

SORT_KEYS = {"c": "cpu", "m": "memory", "s": "syscalls", "p": "pid"}
SORT_TITLES = {"cpu": "CPU", "memory": "memory", "syscalls": "syscalls", "pid": "PID"}

_SEQUENCES = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"\x1bOA": "up",
    b"\x1bOB": "down",
    b"\x1bOC": "right",
    b"\x1bOD": "left",
    b"\x1b[5~": "pageup",
    b"\x1b[6~": "pagedown",
    b"\x1b[H": "home",
    b"\x1b[F": "end",
    b"\x1bOH": "home",
    b"\x1bOF": "end",
    b"\x1b[1~": "home",
    b"\x1b[4~": "end",
}
_SINGLE = {b"\r": "enter", b"\n": "enter", b"\x7f": "backspace", b"\x08": "backspace", b"\t": "tab"}


def decode_keys(data: bytes) -> list[str]:
    """The keys in `data` (what one read of a terminal in cbreak mode returned): printable
    characters as themselves, escape sequences by name ("up", "pagedown", ...), a lone Esc as
    "escape". Unknown sequences are dropped."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        if data[i] == 0x1B:
            for sequence, name in _SEQUENCES.items():
                if data.startswith(sequence, i):
                    keys.append(name)
                    i += len(sequence)
                    break
            else:
                if i + 1 < len(data) and data[i + 1 : i + 2] in (b"[", b"O"):
                    end = i + 2  # an unknown CSI/SS3 sequence: skip to its final byte
                    while end < len(data) and not (0x40 <= data[end] <= 0x7E and data[end] != ord("[")):
                        end += 1
                    i = end + 1
                else:
                    keys.append("escape")
                    i += 1
            continue
        one = data[i : i + 1]
        if one in _SINGLE:
            keys.append(_SINGLE[one])
        elif 0x20 <= data[i] < 0x7F:
            keys.append(one.decode())
        i += 1
    return keys


@attrs.frozen
class Screen:
    """The live screen's state: the view (sort, filter), the filter being typed (None when not
    typing), the first row shown, the poll stepped to with --at (an index into the polls read;
    None live) and whether q was pressed."""

    view: View = attrs.field(factory=View)
    typing: str | None = None
    offset: int = 0
    step: int | None = None
    quit: bool = False
    help: bool = False


def press(screen: Screen, key: str, page_rows: int, steps: int = 0) -> Screen:
    """The state after `key`, on a screen showing `page_rows` rows; `steps` is how many polls
    --at can step through (0 live)."""
    if screen.typing is not None:
        return _typing(screen, key)
    page = max(page_rows, 1)
    if key in ("q", "Q"):
        return attrs.evolve(screen, quit=True, help=False)
    if screen.help:  # the key list is shown: any key goes back to the table
        return attrs.evolve(screen, help=False)
    if key in ("?", "h"):
        return attrs.evolve(screen, help=True)
    if key in SORT_KEYS:
        sort = SORT_KEYS[key]
        again = screen.view.sort == sort
        view = attrs.evolve(screen.view, sort=sort, reverse=again and not screen.view.reverse)
        return attrs.evolve(screen, view=view, offset=0)
    if key == "/":
        return attrs.evolve(screen, typing="")  # a new filter, not more of the one in force
    if key == "escape":
        return attrs.evolve(screen, view=attrs.evolve(screen.view, filter=""), offset=0)
    moves = {"up": -1, "down": 1, "pageup": -page, "pagedown": page, "k": -1, "j": 1}
    if key in moves:
        return attrs.evolve(screen, offset=max(screen.offset + moves[key], 0))
    if key == "home":
        return attrs.evolve(screen, offset=0)
    if key == "end":
        return attrs.evolve(screen, offset=1 << 30)  # the table clamps it to the last page
    if screen.step is not None and key in ("left", "right", "[", "]"):
        delta = -1 if key in ("left", "[") else 1
        return attrs.evolve(screen, step=min(max(screen.step + delta, 0), max(steps - 1, 0)))
    return screen


def _typing(screen: Screen, key: str) -> Screen:
    typed = screen.typing or ""
    if key == "enter":
        return attrs.evolve(screen, view=attrs.evolve(screen.view, filter=typed), typing=None, offset=0)
    if key == "escape":
        return attrs.evolve(screen, typing=None)
    if key == "backspace":
        return attrs.evolve(screen, typing=typed[:-1])
    if len(key) == 1:
        return attrs.evolve(screen, typing=typed + key)
    return screen


def hint_line(screen: Screen, stepping: bool) -> str:
    """The key-hint line at the bottom: what the keys do, the sort and filter in force."""
    if screen.typing is not None:
        return f"filter: {screen.typing}_   Enter keep · Esc cancel"
    if screen.help:
        return "any key: back to the table · q quit"
    sort = SORT_TITLES.get(screen.view.sort, screen.view.sort) + (", reversed" if screen.view.reverse else "")
    filtering = f"/ filter {screen.view.filter!r} (Esc clears)" if screen.view.filter else "/ filter"
    parts = [f"q quit · ? keys · c/m/s/p sort ({sort})", filtering]
    if stepping:
        parts.append("←→ poll")
    parts.append("↑↓ scroll")  # PgUp, PgDn, Home and End too: ? lists them
    return " · ".join(parts)


HELP_LINES = (
    "croft top keys",
    "",
    "  c  m  s  p     sort by CPU, memory, syscalls, PID; the same key again reverses the order",
    "  /              type a new filter: container id or name, pod, namespace, cgroup, framework,",
    "                 workload, command, command line, host cwd, node (several nodes); Enter keeps it,",
    "                 Esc keeps the one before",
    "  Esc            clear the filter",
    "  ↑ ↓ j k        scroll a row",
    "  PgUp PgDn      scroll a page",
    "  Home End       first, last page",
    "  ← → [ ]        with --at: the poll before, after",
    "  ? h            this list",
    "  q  Ctrl-C      quit",
    "",
    "Columns: THR% the share of the cgroup's CPU periods throttled, PSI% its CPU pressure (some",
    "avg10), SHORT the container's short-lived processes in the last poll, AGE the age of an idle",
    "process's row; POD and CONTAINER name Kubernetes pods where the collector reads the API.",
)
"""What ? and h show: every key, and the columns that are not plain."""
