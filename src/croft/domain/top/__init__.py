"""croft top as pure functions: cells (`cells`), the table of held rows (`table`), the columns a
width holds (`layout`), keys and the screen's state (`keys`)."""

from croft.domain.top.cells import (
    ELLIPSIS,
    busiest_syscalls,
    container_cell,
    cpu_percent,
    fit_items,
    human_bytes,
    human_rate,
    truncate,
)
from croft.domain.top.table import COLUMNS, HELD_POLLS, Column, NodePoll, TopRow, TopTable, View, build_table

__all__ = [
    "COLUMNS",
    "ELLIPSIS",
    "HELD_POLLS",
    "Column",
    "NodePoll",
    "TopRow",
    "TopTable",
    "View",
    "build_table",
    "busiest_syscalls",
    "container_cell",
    "cpu_percent",
    "fit_items",
    "human_bytes",
    "human_rate",
    "truncate",
]
