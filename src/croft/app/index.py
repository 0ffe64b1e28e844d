"""croft index: write the summaries of segments written before croft wrote them, and check them."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET, DatasetOpt


def index(
    path: DatasetOpt = DEFAULT_DATASET,
    *,
    verify: Annotated[
        bool,
        Parameter(
            negative=(),
            help="also read every summarized segment's data and check it against its summary; "
            "summarize anew those that no longer match (exit 1 if any)",
        ),
    ] = False,
) -> int:
    """Append a summary to every zstd segment that has no trusted one (segments written before
    summaries, or copied from such a collector), or replace one of an older version, so that croft
    stats answers from it and croft profile reads only the segments that can match. Rows are
    untouched; each segment is rewritten through a hidden copy renamed into place, its mtime kept.
    A damaged segment is named and left as it is. A summary is trusted while the file ends with it
    as written (closed segments are never changed); --verify also checks the data it describes."""
    from croft.adapters.dataset.summaries import index as write_summaries

    done = write_summaries(path, verify=verify)
    for name in done.mismatched:
        print(f"croft: {name} no longer holds the data its summary was written for; summarized anew")
    for name in done.failed:
        print(f"croft: {name} is damaged and was left without a summary (croft stats names the damage)")
    print(f"{done.written} segments summarized, {done.present} already had a summary")
    return 1 if done.failed or done.mismatched else 0
