"""The file `croft scale --record` writes and `--replay` reads: one JSON object per line, per poll.

    {"deployment": {"namespace", "name", "replicas", "cpu_limit_cores"},
     "observations": {"now_ms", "pods": [{"name", "container_ids"}],
                      "scrapes": [{"collector", "fetched_at_ms", "body", "error"}]}}

`body` is the collector's /metrics text as fetched (null when it did not answer), so a replay parses
exactly what the live scaler parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import attrs
import cattrs

from croft.domain.scaling.decision import (
    Decision,
    DeploymentView,
    Observations,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
)

_converter = cattrs.Converter(forbid_extra_keys=True)


class NotARecord(ValueError):
    """A line that is not a recorded poll; the message says what is wrong with it."""


@attrs.frozen
class RecordedPoll:
    """One poll as the live scaler saw it."""

    deployment: DeploymentView
    observations: Observations


def encode_poll(poll: RecordedPoll) -> str:
    """One line of JSON (no newline), keys in field order."""
    return json.dumps(_converter.unstructure(poll), separators=(",", ":"), allow_nan=False)


def decode_poll(line: str) -> RecordedPoll:
    """The poll of one recorded line; raises `NotARecord`."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise TypeError("a line must be a JSON object")
        return _converter.structure(data, RecordedPoll)
    except (ValueError, TypeError, KeyError, AttributeError, cattrs.BaseValidationError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NotARecord(f"not a recorded poll: {detail}") from None


def replay(polls: Iterable[RecordedPoll], config: ScaleConfig) -> Iterator[tuple[RecordedPoll, Decision]]:
    """Re-decide recorded polls under `config`, as a dry run that carries its own decisions out: the
    Deployment starts at the first poll's recorded replicas and then has whatever the previous
    decision asked for (the recorded replica counts after the first are ignored)."""
    history = ScaleHistory()
    current: int | None = None
    for poll in polls:
        replicas = poll.deployment.replicas if current is None else current
        decision = desired_replicas(
            poll.observations, attrs.evolve(poll.deployment, replicas=replicas), config, history
        )
        yield poll, decision
        current, history = decision.replicas, decision.history
