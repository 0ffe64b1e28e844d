"""Which columns of croft top's table a screen width holds, and the lines they make (pure).

`layout(table, width)` starts from every column at its natural width (its widest cell or title).
Where that is too wide, the columns that can give way do so first (the cgroup, then the syscalls,
down to their `min_chars`), then columns are dropped, lowest `keep` first, until the rest fits:
PID, CPU%, COMM and CONTAINER stay longest. A wide screen shows every column in full: the whole
cgroup path and up to eight busiest syscalls. `lines(table, widths)` pads and cuts the cells.
"""

from __future__ import annotations

from collections.abc import Sequence

from croft.domain.top.cells import fit_items, truncate
from croft.domain.top.table import Column, TopTable

GAP = 1  # spaces between columns


def natural_widths(table: TopTable) -> list[int]:
    """Each column's widest cell or title."""
    return [
        max([len(column.title), *(len(row.cells[index]) for row in table.rows)])
        for index, column in enumerate(table.columns)
    ]


def layout(table: TopTable, width: int | None) -> list[int | None]:
    """The width of each column of `table` in `width` characters (None: no limit), None for a
    column dropped."""
    natural = natural_widths(table)
    if width is None:
        return list(natural)
    kept = set(range(len(table.columns)))
    drop_order = sorted(kept, key=lambda i: (-table.columns[i].keep, -i))
    while True:
        widths = _squeezed(table.columns, natural, kept, width)
        if widths is not None or len(kept) == 1:
            break
        kept.discard(drop_order.pop(0))
    if widths is None:  # a screen narrower than the one column left: cut it
        (only,) = kept
        widths = [min(natural[only], max(width, 1)) if i == only else None for i in range(len(natural))]
    return widths


def _squeezed(
    columns: Sequence[Column], natural: list[int], kept: set[int], width: int
) -> list[int | None] | None:
    """The kept columns' widths within `width`, flexible columns narrowed as far as their
    `min_chars` (the cgroup first); None when they cannot fit."""
    widths: list[int | None] = [natural[i] if i in kept else None for i in range(len(columns))]
    flexible = [i for i in sorted(kept, key=lambda i: -columns[i].keep) if columns[i].min_chars is not None]
    over = sum(w for w in widths if w is not None) + GAP * (len(kept) - 1) - width
    for index in flexible:  # the first to be dropped gives way first
        if over <= 0:
            break
        current = widths[index]
        assert current is not None
        floor = max(columns[index].min_chars or 0, len(columns[index].title))
        give = min(over, max(current - floor, 0))
        widths[index] = current - give
        over -= give
    return widths if over <= 0 else None


def fit(column: Column, text: str, width: int) -> str:
    """`text` in `width` characters: padded to it, or cut (whole syscalls, the cgroup's end)."""
    if len(text) > width:
        if column.key == "syscalls":
            text = fit_items(text, width)
        else:
            text = truncate(text, width, keep_end=column.key in ("cgroup", "container"))
    return text.rjust(width) if column.justify == "right" else text.ljust(width)


def lines(table: TopTable, widths: Sequence[int | None]) -> tuple[str, list[str]]:
    """The title line and one line per row, cells padded to `widths` (None: left out), trailing
    spaces removed."""
    kept = [(i, w) for i, w in enumerate(widths) if w is not None]
    sep = " " * GAP
    titles = sep.join(fit(table.columns[i], table.columns[i].title, w) for i, w in kept).rstrip()
    rows = [sep.join(fit(table.columns[i], row.cells[i], w) for i, w in kept).rstrip() for row in table.rows]
    return titles, rows
