"""Which columns of croft top's table a screen width holds, and the lines they make (pure).

`layout(table, width)` takes the columns in the order of their `keep` rank (PID, CPU%, COMM, the
pod and CONTAINER first; FRAMEWORK last) for as long as the next one still fits, and stops at the
first that does not: so the columns a width shows are the first ones of one fixed list, and a
column shown at one width is shown at every wider one (a narrow column never comes back in place
of a wide one that a wider screen then shows). Widths are measured on every row that passes the
filter, not only the page shown, so scrolling never changes them. Each column starts at its
natural width (its widest cell or title); where that is too wide, the columns that can give way
do so first, in two steps: down to what still reads (`readable_chars`: the cgroup to its path with
long ids cut as `docker ps` cuts them, at most 40 characters; the syscalls to two or three whole
ones; the command line to 40 characters), the longer giving way first, then each further, down to
its `min_chars` (the one ranked last first). A wide screen shows every column in full: the whole
cgroup path, up to eight busiest syscalls and the command line. `lines(table, widths)` pads and
cuts the cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from croft.domain.top.cells import fit_cgroup, fit_items, short_ids, truncate
from croft.domain.top.table import Column, TopTable

GAP = 1  # spaces between columns


def natural_widths(table: TopTable) -> tuple[int, ...]:
    """Each column's widest cell (of every matching row) or title."""
    every = table.sized_cells()
    return tuple(
        max([len(column.title), *(len(cells[index]) for cells in every)])
        for index, column in enumerate(table.columns)
    )


@attrs.frozen
class Sizes:
    """What `layout` weighs for each column: its `natural` width (widest cell or title), the width
    its cells take once cut the first way (`cut`: a cgroup with its long ids cut; else natural)
    and, for a column that gives way, the `readable` width it keeps while another has more."""

    natural: tuple[int, ...]
    cut: tuple[int, ...]
    readable: tuple[int, ...]

    @classmethod
    def of(cls, table: TopTable) -> Sizes:
        natural = natural_widths(table)
        cut, readable = list(natural), list(natural)
        for index, column in enumerate(table.columns):
            if column.key == "cgroup":
                short = (short_ids(cells[index]) for cells in table.sized_cells())
                cut[index] = max([len(column.title), *(len(cell) for cell in short)])
            if column.readable_chars is not None:
                readable[index] = min(cut[index], column.readable_chars)
        return cls(tuple(natural), tuple(cut), tuple(readable))


def layout(table: TopTable, width: int | None) -> list[int | None]:
    """The width of each column of `table` in `width` characters (None: no limit), None for a
    column dropped."""
    sizes = Sizes.of(table)
    natural = sizes.natural
    if width is None:
        return list(natural)
    ranked = sorted(range(len(table.columns)), key=lambda i: (table.columns[i].keep, i))
    kept: set[int] = set()
    widths: list[int | None] | None = None
    for index in ranked:  # the first columns of the ranking that fit; stop at the first that does not
        # a column joins only while the flexible columns ranked before it keep what still reads
        holding = {i for i in kept if table.columns[i].min_chars is not None}
        wider = _squeezed(table, sizes, kept | {index}, width, holding)
        if wider is None:
            break
        kept.add(index)
        widths = wider
    if widths is None:  # a screen narrower than the first column alone: cut it
        only = ranked[0]
        widths = [min(natural[only], max(width, 1)) if i == only else None for i in range(len(natural))]
    return widths


def _squeezed(
    table: TopTable,
    sizes: Sizes,
    kept: set[int],
    width: int,
    holding: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[int | None] | None:
    """The kept columns' widths within `width`, or None when they cannot fit. The flexible columns
    give way: a cgroup too long for the room is cut to its short-id form; then all come down to
    their readable widths, the one furthest above its own giving each character (so a long cgroup
    and a long syscall list share what is left); then one at a time as far as their `min_chars`
    (the one ranked last first), those in `holding` no further than their readable width. Last, a
    flexible column wider than its cut cells hands the spare characters to another."""
    columns = table.columns
    widths: list[int | None] = [sizes.natural[i] if i in kept else None for i in range(len(columns))]
    flexible = sorted((i for i in kept if columns[i].min_chars is not None), key=lambda i: -columns[i].keep)
    over = sum(w for w in widths if w is not None) + GAP * (len(kept) - 1) - width
    sized = {i: sizes.natural[i] for i in flexible}
    for index in flexible:
        if over > 0 and sizes.cut[index] < sized[index]:
            over -= sized[index] - sizes.cut[index]
            sized[index] = sizes.cut[index]
    while over > 0:
        room = {i: w - sizes.readable[i] for i, w in sized.items() if w > sizes.readable[i]}
        if not room:
            break
        widest = max(room, key=lambda i: (room[i], -flexible.index(i)))
        sized[widest] -= 1
        over -= 1
    for index in flexible:
        floor = max(columns[index].min_chars or 0, len(columns[index].title))
        if index in holding:
            floor = max(floor, sizes.readable[index])
        give = min(max(over, 0), max(sized[index] - floor, 0))
        sized[index] -= give
        over -= give
    if over > 0:
        return None
    _share_spare(table, sizes, sized)
    for index, size in sized.items():
        widths[index] = size
    return widths


def _share_spare(table: TopTable, sizes: Sizes, sized: dict[int, int]) -> None:
    """Narrow each flexible column in `sized` to its widest cell once cut to it (whole syscalls, a
    cgroup's short form), and give what that frees to another whose cells then show more."""
    for index in list(sized):
        used = _used(table, index, sized[index])
        spare = sized[index] - used
        sized[index] = used
        for other in sized:
            wider = min(sizes.natural[other], sized[other] + spare)
            if other != index and _used(table, other, wider) > _used(table, other, sized[other]):
                sized[other] = wider
                break


def _used(table: TopTable, index: int, width: int) -> int:
    """The characters column `index`'s cells take when cut to `width`, its title's at least."""
    column = table.columns[index]
    cells = (fit(column, row[index], width).rstrip() for row in table.sized_cells())
    return max([len(column.title), *(len(cell) for cell in cells)])


def fit(column: Column, text: str, width: int) -> str:
    """`text` in `width` characters: padded to it, or cut (whole syscalls, the cgroup's end)."""
    if len(text) > width:
        if column.key == "syscalls":
            text = fit_items(text, width)
        elif column.key == "cgroup":
            text = fit_cgroup(text, width)
        else:
            text = truncate(text, width, keep_end=column.key == "container")
    return text.rjust(width) if column.justify == "right" else text.ljust(width)


def lines(table: TopTable, widths: Sequence[int | None]) -> tuple[str, list[str]]:
    """The title line and one line per row, cells padded to `widths` (None: left out), trailing
    spaces removed."""
    kept = [(i, w) for i, w in enumerate(widths) if w is not None]
    sep = " " * GAP
    titles = sep.join(fit(table.columns[i], table.columns[i].title, w) for i, w in kept).rstrip()
    rows = [sep.join(fit(table.columns[i], row.cells[i], w) for i, w in kept).rstrip() for row in table.rows]
    return titles, rows
