"""Byte-for-byte comparison of output with a checked-in file, failing with a unified diff of the
decoded lines (as node_exporter's end-to-end test shows its diff), not just "differs"."""

from __future__ import annotations

import difflib

import pytest

MAX_DIFF_LINES = 200


def assert_same_bytes(got: bytes, expected: bytes, name: str, fix: str) -> None:
    """`got == expected`, or fail naming `name`, saying `fix` (how to regenerate after an intended
    change) and showing a unified diff from the expected lines to the lines got."""
    if got == expected:
        return
    diff = list(
        difflib.unified_diff(
            expected.decode(errors="backslashreplace").splitlines(),
            got.decode(errors="backslashreplace").splitlines(),
            fromfile=f"{name} (expected)",
            tofile=f"{name} (got)",
            lineterm="",
        )
    )
    if not diff:
        diff = ["the same lines, different bytes: line endings or the final newline differ"]
    elif len(diff) > MAX_DIFF_LINES:
        diff = [*diff[:MAX_DIFF_LINES], f"... {len(diff) - MAX_DIFF_LINES} more diff lines"]
    pytest.fail(f"{name} differs; {fix}\n" + "\n".join(diff), pytrace=False)
