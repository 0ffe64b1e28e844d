"""What `croft export` writes, as pure decisions: the hive partition of a row, the name of each Parquet
part, and which source files a re-run must export again.

The export directory holds `node=<node>/hour=<YYYYMMDDTHH>/part-<source>.parquet`, one part per
source file (a segment or a live file) and UTC hour, and `_croft_export.json`, the state: for each
(node, source name) the size and checksum it had when exported and the parts written from it. A
source whose size and checksum are unchanged is not read again; a changed one (a live file that
grew, or was rotated away and began anew) is exported again, and its old parts that the new export
did not rewrite are deleted, so no row is ever in two parts.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

STATE_NAME = "_croft_export.json"  # leading "_": Spark, DuckDB and Hive skip it as metadata
STATE_VERSION = 2
# Version 1 parts have other columns (`unix_ms` a timestamp, before `time`; no `kubernetes`, no
# `process.cmdline`): a version 1 state is read with its checksums forgotten, so that every source
# is exported again and its old parts replaced, and an export directory never mixes two schemas.
OLDER_STATE_VERSIONS = (1,)
_SAFE = re.compile(r"[A-Za-z0-9._-]")


HOUR_MS = 3_600_000


def hour_of(unix_ms: int) -> str:
    """The UTC hour partition of a time: `YYYYMMDDTHH` (what the segment names use, to the hour)."""
    return _hour_label(unix_ms // HOUR_MS)  # called for every row: the label is computed once an hour


@functools.lru_cache(maxsize=4096)
def _hour_label(hour: int) -> str:
    return dt.datetime.fromtimestamp(hour * 3600, dt.UTC).strftime("%Y%m%dT%H")


def partition_value(value: str) -> str:
    """A node name as a hive partition value: characters other than letters, digits, `.`, `_` and
    `-` are written `%XX` (per UTF-8 byte), as Hive escapes them, so `/`, `=` and spaces can never
    make another directory level."""
    return "".join(c if _SAFE.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in value)


def part_path(node: str, hour: str, source_name: str) -> str:
    """The part of `source_name`'s rows in `hour`, relative to the export directory."""
    stem = source_name.removesuffix(".zst").removesuffix(".jsonl")
    return f"node={partition_value(node)}/hour={hour}/part-{partition_value(stem)}.parquet"


@attrs.frozen
class Source:
    """A dataset file as the export sees it: its node, file name, size and content checksum."""

    node: str
    name: str
    size_bytes: int
    checksum: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.node, self.name)


@attrs.frozen
class Exported:
    """What the state remembers of one exported source."""

    size_bytes: int
    checksum: str
    parts: tuple[str, ...]


@attrs.frozen
class ExportPlan:
    """`export`: the sources to read and write now, in order; `unchanged`: those left as they are;
    `stale`: for each source to export, the parts its previous export wrote (delete the ones the
    new export does not rewrite, once it has written its own)."""

    export: tuple[Source, ...]
    unchanged: tuple[Source, ...]
    stale: Mapping[tuple[str, str], tuple[str, ...]]


def plan_export(sources: Iterable[Source], state: Mapping[tuple[str, str], Exported]) -> ExportPlan:
    """Which sources to export: those the state does not hold with the same size and checksum.
    Sources in the state but no longer on disk keep their parts (retention on the node deleted the
    segment; the export is the archive)."""
    export: list[Source] = []
    unchanged: list[Source] = []
    stale: dict[tuple[str, str], tuple[str, ...]] = {}
    for source in sources:
        before = state.get(source.key)
        if before is not None and (before.size_bytes, before.checksum) == (
            source.size_bytes,
            source.checksum,
        ):
            unchanged.append(source)
            continue
        export.append(source)
        stale[source.key] = before.parts if before is not None else ()
    return ExportPlan(export=tuple(export), unchanged=tuple(unchanged), stale=stale)


class BadState(ValueError):
    """The export directory's state file is not one this version wrote."""


def encode_state(state: Mapping[tuple[str, str], Exported]) -> dict[str, Any]:
    """The state as a JSON object, sources sorted by node and name (stable bytes for stable input)."""
    return {
        "version": STATE_VERSION,
        "sources": [
            {
                "node": node,
                "name": name,
                "size_bytes": done.size_bytes,
                "checksum": done.checksum,
                "parts": list(done.parts),
            }
            for (node, name), done in sorted(state.items())
        ],
    }


def decode_state(value: object) -> dict[tuple[str, str], Exported]:
    """The state from its decoded JSON; raises `BadState` naming what is wrong."""
    version = value.get("version") if isinstance(value, dict) else None
    if not isinstance(value, dict) or version not in (STATE_VERSION, *OLDER_STATE_VERSIONS):
        raise BadState(f"not a version {STATE_VERSION} export state")
    sources = value.get("sources")
    if not isinstance(sources, list):
        raise BadState("its sources are not a list")
    state: dict[tuple[str, str], Exported] = {}
    for item in sources:
        try:
            node, name, size, checksum, parts = (
                item["node"],
                item["name"],
                item["size_bytes"],
                item["checksum"],
                item["parts"],
            )
        except (TypeError, KeyError) as exc:
            raise BadState(f"a source entry lacks {exc}") from None
        if not (
            isinstance(node, str)
            and isinstance(name, str)
            and type(size) is int
            and isinstance(checksum, str)
            and isinstance(parts, list)
            and all(isinstance(p, str) and _inside(p) for p in parts)
        ):
            raise BadState(f"the entry for {node!r}/{name!r} has the wrong types")
        if version != STATE_VERSION:
            checksum = ""  # exported by an older version, in other columns: export it again
        state[(node, name)] = Exported(size_bytes=size, checksum=checksum, parts=tuple(parts))
    return state


def _inside(relative: str) -> bool:
    """A part path the state may name: relative, no `..`, no empty component."""
    parts = relative.split("/")
    return not relative.startswith("/") and all(p not in ("", ".", "..") for p in parts)
