"""What every reader does with a dataset's lines.

A line is the bytes before a newline (a file's last line may lack it). A line is one of:

- a row: at most `MAX_LINE_BYTES` bytes holding exactly one JSON value that the codec
  (`croft.domain.dataset.codec.decode_row`) accepts;
- blank (only JSON whitespace): holds nothing, is not counted;
- skipped, of one kind (`croft.domain.dataset.skips`): too long, not JSON, or not a row; a last
  line without its newline that is not a row is torn (`last_line`), being written or cut.

`verdict` says which for one line. `decode_block` reads a buffer of many whole lines at once, and
judges them one by one only where the buffer holds a line that is not a row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import msgspec

from croft.domain.dataset.codec import NotARow, NotJSON, decode_row
from croft.domain.dataset.row import Row
from croft.domain.dataset.skips import JSON_WHITESPACE as JSON_WHITESPACE
from croft.domain.dataset.skips import MAX_LINE_BYTES as MAX_LINE_BYTES
from croft.domain.dataset.skips import NOT_A_ROW, NOT_JSON, TOO_LONG, TORN

_DECODE = msgspec.json.Decoder(Row).decode


def verdict(line: bytes) -> Row | str | None:
    """The row `line` holds, else the kind of skip it is (a `skips` kind), or None when it is
    blank. `line` excludes its newline."""
    if len(line) > MAX_LINE_BYTES:
        return TOO_LONG
    try:
        return decode_row(line)
    except NotARow:
        return NOT_A_ROW
    except NotJSON:
        return None if not line.strip(JSON_WHITESPACE) else NOT_JSON


def last_line(found: Row | str | None) -> Row | str:
    """What a last line without its newline is, given what it would be with one (`verdict`): the
    same row, else torn (a line still being written, or cut), unless too long."""
    if found is None or (isinstance(found, str) and found != TOO_LONG):
        return TORN
    return found


def decode_block(data: bytes, start: int, stop: int, skipped: Counter[str]) -> list[Row]:
    """The rows of the whole lines `data[start:stop]` (it ends with a newline, and holds no line
    longer than `MAX_LINE_BYTES`), in order; each skipped line counted in `skipped` by kind."""
    lines = split_lines(data, start, stop)
    try:
        # Each line is decoded alone (a C loop: no Python per line), so "one value per line" is
        # the decoder's own rule, and a clean block is read exactly as `verdict` reads each line.
        return list(map(_DECODE, lines))
    except (msgspec.DecodeError, RecursionError):
        pass
    return rows_of(lines, skipped)


def rows_of(lines: list[bytes], skipped: Counter[str]) -> list[Row]:
    """The rows of `lines` (each without its newline), judged one by one by `verdict`, in order;
    each skipped line counted in `skipped` by kind."""
    rows = []
    for line in lines:
        found = verdict(line)
        if isinstance(found, str):
            skipped[found] += 1
        elif found is not None:
            rows.append(found)
    return rows


def split_lines(data: bytes, start: int, stop: int) -> list[bytes]:
    """The lines of `data[start:stop]` (whole lines: it ends with a newline), without newlines."""
    # A loop of memchr (bytes.find) beats bytes.split and bytes.count, which look at each byte in
    # turn, several times over for lines of a kilobyte.
    lines: list[bytes] = []
    append, find = lines.append, data.find
    while start < stop:
        end = find(b"\n", start, stop)
        if end < 0:  # not a whole line: taken as one all the same
            end = stop
        append(data[start:end])
        start = end + 1
    return lines


def lines_with(data: bytes, start: int, stop: int, needle: bytes) -> Iterator[bytes]:
    """The lines of `data[start:stop]` (whole lines, ending with a newline) that contain `needle`,
    found like `grep -F`: a search of the buffer, no split into lines."""
    hit = data.find(needle, start, stop)
    while hit >= 0:
        first = data.rfind(b"\n", start, hit) + 1 or start
        end = data.find(b"\n", hit, stop)
        yield data[first:end]
        hit = data.find(needle, end, stop)
