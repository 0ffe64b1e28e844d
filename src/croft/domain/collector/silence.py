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


def absent_figures(
    layout: str, v1: frozenset[str], v2: frozenset[str], psi: bool, root: str = "/sys/fs/cgroup"
) -> str | None:
    """The line to log once at start naming the cgroup figures this host's layout cannot give a
    row (they are left out of it, never written 0), or None when it gives them all. `layout` is
    cgroupfs's ('v2', 'hybrid', 'v1', 'none'); `v1` the controllers mounted as v1, `v2` those the
    v2 tree offers (its root's cgroup.controllers), `psi` whether it has PSI files."""
    if layout == "none":
        return f"no cgroups under {root}: no row has cgroup figures (cgroup_usage is empty)"
    gone: list[str] = []
    if layout == "v1":
        if not psi:
            gone.append("PSI pressure (cgroup v1 has none)")
        for controller, figure in _V1_FIGURES:
            if controller not in v1:
                gone.append(f"{figure} (no v1 {controller} controller)")
        return _every_row(gone)
    if layout == "hybrid":
        bound = [f for c, f in _V1_FIGURES if c in v1 and c not in v2 and c != "cpuacct"]
        parts = []
        if bound:
            listed = ", ".join(bound).replace(" and ", ", ")
            head, _, last = listed.rpartition(", ")
            parts.append(
                f"a row whose cgroup is a v2 path gets no {head + ' or ' + last if head else last} "
                "(bound to cgroup v1 here: the v1 cgroup it also sits in is another cgroup)"
            )
        parts.append("one whose cgroup is a v1 path gets no PSI pressure (cgroup v1 has none)")
        return "hybrid cgroups: " + "; ".join(parts) + "; these are left out of the rows, never written 0"
    for controller, figure in _V2_FIGURES:
        if controller not in v2:
            gone.append(f"{figure} (the v2 tree offers no {controller} controller)")
    if not psi:
        gone.append("PSI pressure (the kernel has no PSI: psi=0 or CONFIG_PSI off)")
    return _every_row(gone)


def _every_row(gone: list[str]) -> str | None:
    return "cgroup figures this host cannot give, left out of every row: " + "; ".join(gone) if gone else None


_V1_FIGURES = (
    ("memory", "memory and OOM kills"),
    ("cpu", "CPU throttling"),
    ("cpuacct", "cgroup CPU"),
)
_V2_FIGURES = (
    ("memory", "memory and OOM kills"),
    ("cpu", "CPU throttling"),
)
