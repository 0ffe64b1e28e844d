"""croft index: write the summaries of segments written before croft wrote them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from croft.app.options import DEFAULT_DATASET


def index(
    path: Annotated[
        Path,
        Parameter(
            env_var="DATASET_PATH", help="a file, a dataset directory or a directory of per-node directories"
        ),
    ] = DEFAULT_DATASET,
) -> int:
    """Append a summary to every zstd segment that has no trusted one (segments written before
    summaries, or copied from such a collector), or replace one of an older version, so that croft
    stats answers from it and croft profile reads only the segments that can match. Rows are
    untouched; each segment is rewritten through a hidden copy renamed into place, its mtime kept.
    A damaged segment is named and left as it is."""
    from croft.adapters.dataset.summaries import index as write_summaries

    done = write_summaries(path)
    for name in done.failed:
        print(f"croft: {name} is damaged and was left without a summary (croft stats names the damage)")
    print(f"{done.written} segments summarized, {done.present} already had a summary")
    return 1 if done.failed else 0
