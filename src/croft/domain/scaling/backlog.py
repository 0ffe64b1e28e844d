"""The requests queued in a Deployment's pods, from the collectors' queue gauges, for one-step sizing.

The collector serves, per container, the queues of its network namespace (shared by the containers
of a pod, so a pod counts once, its largest):

- `croft_container_listen_backlog`: connections waiting to be accepted. Each holds at least its
  first request, so it counts as one request (exact for clients that open a connection per request);
- `croft_container_unread_bytes`: bytes received and not yet read. With `bytes_per_request` (a
  request's bytes as the server reads them, headers and body) they count as
  `unread ÷ bytes_per_request` requests; without it (0) they are not counted, as keep-alive clients
  queue their requests there and nothing else tells how many.

A pod without the gauges (its namespace not measured) queues nothing as far as croft knows; a
garbled gauge (NaN, infinite, negative) counts as nothing and is named, so the estimate is a lower
bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from croft.domain.metrics import CONTAINER_LISTEN_BACKLOG, CONTAINER_UNREAD_BYTES, LABEL_CONTAINER_ID, Sample

QUEUE_GAUGES = frozenset({CONTAINER_LISTEN_BACKLOG, CONTAINER_UNREAD_BYTES})


def queued_requests(
    samples: Iterable[tuple[str, Sample]],
    pods: Sequence[tuple[str, tuple[str, ...]]],
    bytes_per_request: float,
) -> tuple[float, tuple[str, ...]]:
    """(requests queued in `pods`, gaps): `samples` are (collector, sample) of any names (the queue
    gauges are picked out), `pods` (name, container ids)."""
    listen: dict[str, float] = {}
    unread: dict[str, float] = {}
    gaps: list[str] = []
    for collector, sample in samples:
        if sample.name not in QUEUE_GAUGES:
            continue
        container = sample.label(LABEL_CONTAINER_ID)
        if container is None:
            continue
        if not (math.isfinite(sample.value) and sample.value >= 0):
            gaps.append(f"collector {collector} serves {sample.name} {sample.value!r} for {container[:12]}")
            continue
        into = listen if sample.name == CONTAINER_LISTEN_BACKLOG else unread
        into[container] = max(into.get(container, 0.0), sample.value)
    total = 0.0
    for _pod, containers in pods:
        per_container = [
            listen.get(c, 0.0) + (unread.get(c, 0.0) / bytes_per_request if bytes_per_request > 0 else 0.0)
            for c in containers
        ]
        total += max(per_container, default=0.0)
    return total, tuple(gaps)
