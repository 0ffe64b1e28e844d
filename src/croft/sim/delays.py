"""The delays of a new pod, measured on real runs' timelines, for the simulator's `SimApp`.

For each pod created inside a run's window (after the load started):

- controller delay: from the scale-up (the latest rescale to more replicas at or before the pod's
  creation) to the pod object;
- pod start delay: from the pod object to its containers running (`started_ms`: scheduling, the
  sandbox, the image, the process);
- Ready delay: from running to Ready (the readiness probe's first success).

A delay that did not happen inside the window (a pod still starting at the end) is left out, not
counted as 0. Kubernetes' timestamps have a resolution of one second, so a measured delay may be
up to a second off and may read 0. The harness records a scale-up when it sees it (kube.py reads
the Deployment once a second, and each read takes its own time), so a pod's whole-second
creationTimestamp may read up to `SCALE_UP_SLACK_S` before its scale-up: such a pod belongs to that
scale-up (delay 0), not to the one before it. (On the real node's runs of 2026-12-03, 11 of 31
pods read 1.0-1.3 s before their recorded scale-up; taken for the previous scale-up's, they made
"controller delays" of 10.6-28.9 s that never happened.)
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

import attrs

from croft.runs.rundir import Timeline

SCALE_UP_SLACK_S = 2.0
"""How long before its recorded scale-up a pod's creation may read: the 1 s resolution of
creationTimestamp and up to a second (a poll of the harness and its kubectl call) of recording."""


@attrs.frozen
class Spread:
    """Measured values of one delay (seconds), in the order met."""

    values_s: tuple[float, ...]

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(min, max); None when nothing was measured."""
        return (min(self.values_s), max(self.values_s)) if self.values_s else None

    def text(self) -> str:
        if not self.values_s:
            return "not measured"
        mean = statistics.fmean(self.values_s)
        sd = statistics.stdev(self.values_s) if len(self.values_s) > 1 else 0.0
        low, high = min(self.values_s), max(self.values_s)
        return f"{mean:.1f} ± {sd:.1f} s (range {low:.1f}-{high:.1f}, n={len(self.values_s)})"


@attrs.frozen
class PodDelays:
    controller: Spread
    pod_start: Spread
    readiness: Spread

    def sim_overrides(self) -> dict[str, tuple[float, ...]]:
        """`SimApp` fields for the measured delays (those measured at least once): the values as
        measured, for a `SimApp` that names them in `sampled_delays`."""
        out: dict[str, tuple[float, ...]] = {}
        for field, spread in (
            ("controller_delay_s", self.controller),
            ("pod_start_s", self.pod_start),
            ("readiness_s", self.readiness),
        ):
            if spread.values_s:
                out[field] = spread.values_s
        return out


def measure(timelines: Iterable[Timeline]) -> PodDelays:
    """The delays of every pod created inside the windows of `timelines`."""
    controller: list[float] = []
    start: list[float] = []
    ready: list[float] = []
    for timeline in timelines:
        ups = sorted(r.at_ms for r in timeline.rescales if r.to_replicas > r.from_replicas)
        for pod in timeline.pods:
            if pod.created_ms < timeline.start_ms:
                continue
            # creationTimestamp is whole seconds and the scale-up is recorded when seen: a pod may
            # read up to SCALE_UP_SLACK_S before its scale-up
            asked = [at for at in ups if at <= pod.created_ms + SCALE_UP_SLACK_S * 1000]
            if asked:
                controller.append(max(pod.created_ms - asked[-1], 0) / 1000)
            if pod.started_ms is not None:
                start.append(max(pod.started_ms - pod.created_ms, 0) / 1000)
                if pod.ready_ms is not None:
                    ready.append(max(pod.ready_ms - pod.started_ms, 0) / 1000)
    return PodDelays(Spread(tuple(controller)), Spread(tuple(start)), Spread(tuple(ready)))
