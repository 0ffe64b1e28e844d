"""Whether to warn that the collector is writing nothing: a pure function of how many polls have
gone by without a row and what `--watch` asked for.

A watched process that is idle still gets a row once every `IDLE_EVERY` polls, so a run of more
than `IDLE_EVERY` polls without any row means no process matches: no GPU holder, and no process in
a watched cgroup (or no `--watch`). The warning comes once that is so, then every `REPEAT_POLLS`
polls (5 minutes at one poll every 2 s) while it stays so.
"""

from __future__ import annotations

from croft.domain.collector.selection import IDLE_EVERY

REPEAT_POLLS = 150


def silence_warning(
    polls_without_rows: int, watch: tuple[str, ...], repeat: int = REPEAT_POLLS
) -> str | None:
    """The warning to log after the poll that made `polls_without_rows` in a row, or None."""
    first = IDLE_EVERY + 1
    if polls_without_rows < first or (polls_without_rows - first) % repeat:
        return None
    if not watch:
        return (
            f"nothing written for {polls_without_rows} polls: no GPU holder, and no --watch "
            "(WATCH_CGROUPS) to write other processes; pass e.g. --watch kubepods,system.slice/docker"
        )
    return (
        f"nothing written for {polls_without_rows} polls: no GPU holder, and no process in a cgroup "
        f"under --watch {','.join(watch)}; compare it with the paths in /proc/<pid>/cgroup"
    )


def start_notice(watch: tuple[str, ...]) -> str | None:
    """The warning to log at start: only GPU holders are written without `--watch`."""
    if watch:
        return None
    return (
        "no --watch (WATCH_CGROUPS): only GPU holders are written; "
        "pass e.g. --watch kubepods,system.slice/docker to write the processes of those cgroups too"
    )


def unmatched_watch(watch: tuple[str, ...], mount: str) -> str:
    """The warning when no cgroup under `mount` matches a `--watch` prefix at start."""
    return (
        f"--watch {','.join(watch)} matches no cgroup under {mount} now: only GPU holders are written "
        "until one appears; compare the prefixes with the paths in /proc/<pid>/cgroup"
    )
