"""croft stats' human summary as plain text, without importing rich (whose import alone cost more
than a summarized dataset's whole answer, benchmarks/summaries.py).

`render` in croft.app.answers lays the summary out with rich. When rich would write it without
control codes (stdout not a terminal, NO_COLOR, a dumb terminal) and every table fits the width
rich would use, so that it wraps nothing, `plain_lines` gives the very same characters; when it
cannot be sure (text rich reads as markup or emoji codes, characters other than printable ASCII,
something wider than the console), it answers None and rich renders. tests/unit/test_stats_text.py
compares the two for generated summaries and widths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from croft.domain.utc import readable

if TYPE_CHECKING:
    from pathlib import Path

    from croft.domain.dataset.summary import Stats

SIDE_BY_SIDE_WIDTH = 80  # `render` puts the three tables side by side from this width on
TOTALS_GAP = 2  # the totals table's right padding of each cell
GRID_GAP = 4  # between the side-by-side tables
_RULE = "\u2500"  # box.SIMPLE_HEAD's line under the header
_MARKUP = frozenset("[]\\")  # rich's markup ([tag]) and its escape

Table = tuple[str, tuple[str, str], list[tuple[str, str]]]  # title, headers, (name, value) rows


def size(n: float) -> str:
    """Bytes in binary units, as croft top writes them: 812 B, 12.0 KiB, 1.1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def totals(s: Stats) -> list[tuple[str, str]]:
    """The (name, value) rows of the summary's first table."""
    f = s.files
    plain = f.files - f.compressed
    noun = "file" if f.files == 1 else "files"
    rows = [
        ("files", f"{f.files} {noun} ({f.compressed} zstd, {plain} plain), {size(f.bytes_on_disk)} on disk"),
        ("rows", f"{s.rows:,}"),
        ("skipped", f"{s.skipped_lines:,} lines"),
    ]
    if s.first_ms is not None and s.last_ms is not None:
        rows.append(("first", f"{s.first_ms}  {readable(s.first_ms, ms=True)}"))
        rows.append(("last", f"{s.last_ms}  {readable(s.last_ms, ms=True)}"))
    rows.append(("polls", f"{s.polls:,}"))
    rows.append(("nodes", f"{len(s.nodes)}: {', '.join(s.nodes)}"))
    rows.append(("containers", f"{s.containers:,}"))
    rows.append(("processes", f"{s.processes:,} (distinct node and pid)"))
    return rows


def tables(s: Stats) -> tuple[Table, Table, Table]:
    """The workloads, frameworks and busiest syscalls tables."""
    return (
        ("workloads", ("workload", "rows"), [(w, f"{n:,}") for w, n in s.workloads]),
        ("frameworks", ("framework", "containers"), [(w, f"{n:,}") for w, n in s.frameworks]),
        (
            "busiest syscalls",
            ("syscall", "mean calls/s"),
            [(name, f"{rate:,.1f}") for name, rate in s.busiest_syscalls],
        ),
    )


def plain_width(environ: Mapping[str, str], stdout: TextIO) -> int | None:
    """The width rich's console (croft.app.console.PipeConsole) lays out in when it writes no
    control codes; None when it would style its output (a terminal), or may (Jupyter)."""
    import builtins

    if hasattr(builtins, "get_ipython"):
        return None
    compatible, force = environ.get("TTY_COMPATIBLE", ""), environ.get("FORCE_COLOR")
    if compatible in ("0", "1"):
        terminal = compatible == "1"
    elif force is not None:
        terminal = force != ""
    else:
        try:
            terminal = stdout.isatty()
        except ValueError:
            terminal = False
    dumb = environ.get("TERM", "").strip().lower() in ("dumb", "unknown")
    if terminal and not (environ.get("NO_COLOR") or dumb):
        return None
    columns, lines = environ.get("COLUMNS"), environ.get("LINES")
    fixed = int(columns) if columns is not None and columns.isdigit() else None
    if fixed is not None and lines is not None and lines.isdigit():
        return fixed  # rich's size, both given
    if terminal and dumb:
        return 80
    if fixed is not None:
        return fixed
    for fd in (0, 1, 2):  # rich asks stdin, stdout and stderr in turn
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        return width or 80
    return 80


def plain_lines(path: Path, s: Stats, width: int) -> list[str] | None:
    """The lines of `render`'s output without styles at `width` columns; None when rich would
    wrap, escape or replace anything (then rich must render it)."""
    head = f"croft stats {path}"
    rows = totals(s)
    parts = tables(s)
    texts = [head, *(cell for row in rows for cell in row)]
    texts += [
        cell for _, headers, items in parts for cell in (*headers, *(c for item in items for c in item))
    ]
    # one check of them all: a space between two texts keeps an emoji code from spanning them
    if not _plain(" ".join(texts)) or len(head) > width:
        return None
    name_w = max(len(name) for name, _ in rows)
    value_w = max(len(value) for _, value in rows)
    if name_w + value_w + 2 * TOTALS_GAP > width:
        return None
    gap = " " * TOTALS_GAP
    lines = [head, *(name.ljust(name_w) + gap + value.ljust(value_w) + gap for name, value in rows)]
    if width >= SIDE_BY_SIDE_WIDTH:
        pads = (GRID_GAP, GRID_GAP, 0)  # the grid's padding right of each table, none after the last
        natural = [min(_natural_width(*part) + pad, width) for part, pad in zip(parts, pads, strict=True)]
        widths = _fit(natural, [True, True, True], width)
        blocks: list[list[str]] = []
        for part, pad, room in zip(parts, pads, widths, strict=True):
            block = _table(*part, room - pad)
            if block is None or len(block[0]) != room - pad:
                return None
            blocks.append([line + " " * pad for line in block])
        lines.append("")
        for at in range(max(map(len, blocks))):
            cells = [
                block[at] if at < len(block) else " " * room
                for block, room in zip(blocks, widths, strict=True)
            ]
            lines.append("".join(cells))
        return lines
    for part in parts:
        block = _table(*part, width)
        if block is None:
            return None
        lines.append("")
        lines.extend(block)
    return lines


def _natural_width(title: str, headers: tuple[str, str], items: Sequence[tuple[str, str]]) -> int:
    name_w = max([len(headers[0]), *(len(name) for name, _ in items)])
    value_w = max([len(headers[1]), *(len(value) for _, value in items)])
    return name_w + 3 + value_w  # a cell's padding, the (blank) column line, the next cell's padding


def _table(
    title: str, headers: tuple[str, str], items: Sequence[tuple[str, str]], room: int
) -> list[str] | None:
    """One of the three tables as rich lays it out in `room` columns: title, header, rule, rows,
    every line as wide as the table. Narrower than its contents, rich narrows the value column
    (names are never cut) and wraps the header at its spaces; None where it would cut a word or
    the title, or could not narrow it enough."""
    name_w = max([len(headers[0]), *(len(name) for name, _ in items)])
    value_w = max([len(headers[1]), *(len(value) for _, value in items)])
    longest_word = max([*(len(word) for word in headers[1].split()), *(len(value) for _, value in items)])
    name_cell, value_cell = _fit([name_w + 1, value_w + 1], [False, True], room - 1)  # 1: the column line
    value_w = value_cell - 1  # its text, right of its padding
    width = name_w + 3 + value_w
    if name_cell != name_w + 1 or value_w < longest_word or len(title) > width:
        return None
    header = _wrap(headers[1], value_w)  # a header's cells sit on its last line (rich: bottom)
    lines = [title.ljust(width)]
    lines.extend(
        (headers[0] if at == len(header) - 1 else "").ljust(name_w) + "   " + part.rjust(value_w)
        for at, part in enumerate(header)
    )
    lines.append(_RULE * width)
    lines.extend(name.ljust(name_w) + "   " + value.rjust(value_w) for name, value in items)
    return lines


def _wrap(text: str, width: int) -> list[str]:
    """`text` broken at its spaces into lines of at most `width` (no word is longer), as rich's
    divide_line breaks it, each without its trailing spaces."""
    lines: list[str] = []
    line = ""
    for word in _words(text):
        if line and len(line) + len(word.rstrip()) > width:
            lines.append(line.rstrip())
            line = word
        else:
            line += word
    lines.append(line.rstrip())
    return lines


def _words(text: str) -> list[str]:
    """The words of `text`, each with the spaces after it (the first with those before it too),
    as rich's `_wrap.re_word`, `\\s*\\S+\\s*`, finds them."""
    found: list[str] = []
    word = ""
    for char in text:
        if not char.isspace() and word and word[-1].isspace() and not word.isspace():
            found.append(word)
            word = ""
        word += char
    if word and not word.isspace():
        found.append(word)
    return found


def _fit(widths: list[int], wrapable: list[bool], room: int) -> list[int]:
    """The widths rich's Table gives columns whose natural widths are `widths` in `room` columns:
    the widest wrapable ones narrowed first, in steps to the next widest, then every one evenly
    (rich.table.Table._calculate_column_widths and _collapse_widths)."""
    if sum(widths) <= room:
        return widths
    excess = sum(widths) - room
    while any(wrapable) and sum(widths) > 0 and excess > 0:
        widest = max(w for w, wraps in zip(widths, wrapable, strict=True) if wraps)
        second = max(w if wraps and w != widest else 0 for w, wraps in zip(widths, wrapable, strict=True))
        ratios = [1 if (w == widest and wraps) else 0 for w, wraps in zip(widths, wrapable, strict=True)]
        if not any(ratios) or widest == second:
            break
        widths = _ratio_reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        excess = sum(widths) - room
    if excess > 0:
        widths = _ratio_reduce(excess, [1] * len(widths), widths, widths)
    return widths


def _ratio_reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """rich._ratio.ratio_reduce: `values` less `total` shared by `ratios`, each share at most its maximum."""
    ratios = [ratio if most else 0 for ratio, most in zip(ratios, maximums, strict=True)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    left = total
    result = []
    for ratio, most, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            share = min(most, round(ratio * left / total_ratio))
            result.append(value - share)
            left -= share
            total_ratio -= ratio
        else:
            result.append(value)
    return result


def _plain(text: str) -> bool:
    """Whether rich prints `text` as it is: printable ASCII without markup or escapes, and no
    emoji code (rich's `:(\\S*?):`, a name between two colons) but two digits, as in a time of
    day. Without regular expressions: compiling them cost more than the summary's whole text."""
    if not (text.isascii() and text.isprintable()) or not _MARKUP.isdisjoint(text):
        return False
    at = text.find(":")
    while at >= 0:
        end = text.find(":", at + 1)
        if end < 0:
            return True
        name = text[at + 1 : end]
        if " " in name:  # no code starts here: the next colon may start one
            at = end
            continue
        if not (len(name) == 2 and name.isdigit()):
            return False
        at = text.find(":", end + 1)
    return True
