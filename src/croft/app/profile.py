"""croft profile: the resource profile of one container, as JSON."""

from __future__ import annotations

import sys
from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt
from croft.errors import UserError

SHOWN_IDS = 10  # an ambiguous prefix lists at most this many of the ids it matches


def profile(
    container_id: Annotated[str, Parameter(help="a container id, or a prefix of at least 4 hex digits")],
    *,
    dataset: DatasetOpt = DEFAULT_DATASET,
    from_ms: Annotated[int | None, Parameter(help="start of the window, unix ms, inclusive")] = None,
    to_ms: Annotated[int | None, Parameter(help="end of the window, unix ms, inclusive")] = None,
) -> int:
    """Print the nodes a container ran on, its polls and processes, the share of polls holding a GPU,
    and mean, p95 and max of CPU cores, memory, throttling and CPU pressure over the window."""
    import orjson

    from croft.adapters.dataset.scan import read_profile
    from croft.app.stats import report_skips
    from croft.domain.dataset.profile import prefix_error, profile_of

    problem = prefix_error(container_id)
    if problem:
        raise UserError(problem)
    if from_ms is not None and to_ms is not None and from_ms > to_ms:
        raise UserError(
            f"--from-ms {from_ms} is after --to-ms {to_ms}; give a window that starts before it ends"
        )
    prefix = container_id.lower()
    found = read_profile(dataset, prefix, from_ms, to_ms)
    report_skips(found.skips.report())
    ids = found.matching_ids()
    if not ids:
        raise UserError(
            f"no container id starting with {prefix} in {dataset}; "
            f"croft stats {dataset} counts its containers"
        )
    if len(ids) > 1:
        shown = ", ".join(ids[:SHOWN_IDS]) + (
            f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        )
        raise UserError(
            f"container id prefix {prefix} matches {len(ids)} containers: {shown}; give more digits"
        )
    track = found.tracks[ids[0]]
    result = profile_of(ids[0], track, from_ms, to_ms)
    if result is None:
        raise UserError(
            f"container {ids[0]} has no rows from {_end(from_ms)} to {_end(to_ms)}; its rows span "
            f"{track.first_ms} to {track.last_ms} (unix ms)"
        )
    sys.stdout.write(orjson.dumps(result.to_json()).decode() + "\n")
    return 0


def _end(unix_ms: int | None) -> str:
    return "the start" if unix_ms is None else str(unix_ms)
