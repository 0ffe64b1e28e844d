"""The names the kernel gives as bytes (process names, executable and working-directory paths,
cgroup paths, arguments), as croft writes them.

A name the kernel gives is bytes, not text: a process may `chdir` into `dir\\xff`, a cgroup may be
named `bad\\xff\\xfe`. croft keeps such a name in memory as Python keeps every OS string (PEP 383:
each byte that is not part of valid UTF-8 is a lone surrogate, `surrogateescape`), so that a path
read from /proc opens the same file again, by its real bytes. Where it is written (a dataset row,
a /metrics label, a message) each such byte becomes the four characters `\\xNN` (Python's
`backslashreplace`): valid Unicode that every JSON tool and terminal reads. The written form is
lossy where a name already holds a literal `\\xNN` (systemd escapes unit names so:
`system-systemd\\x2dfsck.slice`): it names a file for a reader, never for croft.
"""

from __future__ import annotations


def written(text: str) -> str:
    """`text` (an OS string: undecodable bytes as lone surrogates) as croft writes it, valid
    Unicode: each byte that is not part of valid UTF-8 as `\\xNN`. Total: a surrogate that no
    byte gave (a hand-made string) is written as `\\udXXX`."""
    if text.isascii():
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
