# croft stats' native fast path (_rowscan.c): the canonical rows of a buffer folded into stats totals.

def fold(
    data: bytes,
    start: int,
    stop: int,
    node: str,
    polls: dict[str, set[int]],
    tgids: dict[str, set[int]],
    processes: set[tuple[str | None, str | None]],
    with_sums: bool,
    /,
) -> tuple[int, int, int, tuple[int, int, int], list[tuple[str, int]], list[bytes]]: ...
def accepts(line: bytes, /) -> bool: ...  # whether fold(..., with_sums=True) folds `line`
