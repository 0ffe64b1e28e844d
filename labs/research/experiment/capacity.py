"""The real pods' capacity as croft's rows measured it, set beside the simulator's.

A simulated pod serves `cpu_share x limit / CPU per request` requests a second (croft.sim.cluster),
the CPU per request being the calibration's. Two figures of the real runs check that capacity
without fitting anything:

- the CPU a saturated pod got: its cgroup's `cpu_cores` in the polls where the cgroup was throttled
  in at least `SATURATED` of its CFS periods (`cpu_throttled_fraction`), against the pod's limit;
- the CPU a request cost: the pods' cgroup CPU over the burst against the requests that reached a
  pod in it, answered or timed out (a timed-out request is still served to the end; a refused one
  costs the pods nothing).

Their product against the calibration is the share of the modelled capacity the real pods had: near
1, a gap between the simulated and the real seconds above the objective is not the pods' capacity.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

import burst_series
import scoring

SATURATED = 0.8  # throttled in at least this share of a poll's CFS periods: the pod wants more


@attrs.frozen
class Capacity:
    """`saturated_cores`: the cgroup CPU of every saturated poll of a pod (one figure a poll);
    `ms_per_request`: one figure a run (its pods' CPU over the burst per request that reached them)."""

    limit_cores: float
    calibrated_ms: float
    saturated_cores: scoring.Summary
    ms_per_request: scoring.Summary

    @property
    def share(self) -> float | None:
        """The real pods' capacity as a share of the simulator's (None where either is unmeasured)."""
        got, cost = self.saturated_cores.mean, self.ms_per_request.mean
        if got is None or not cost:
            return None
        return (got / self.limit_cores) * (self.calibrated_ms / cost)

    def text(self) -> str:
        got, cost = self.saturated_cores, self.ms_per_request
        if got.mean is None or cost.mean is None:
            return (
                "the real pods' capacity: not measured (no saturated poll or no CPU in croft's rows "
                "beside the runs)"
            )
        share = self.share
        assert share is not None
        return (
            f"the real pods' capacity, from croft's rows beside the runs: a saturated pod (throttled in "
            f">= {SATURATED:.0%} of its periods) got {got.mean:.3f} ± {got.sd or 0:.3f} cores of its "
            f"{self.limit_cores:g} ({got.n} polls); a request that reached a pod cost "
            f"{cost.mean:.2f} ± {cost.sd or 0:.2f} ms of CPU ({cost.n} runs; calibrated "
            f"{self.calibrated_ms:g} ms): {share:.0%} of the simulated pod's capacity"
        )


def _per_container(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, Mapping[str, Any]]]]:
    """Each container's cgroup figures, one a poll (a container's processes share them), in time order."""
    found: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for unix_ms, poll in burst_series.polls(rows):
        for cid, row in burst_series.per_container(poll).items():
            found.setdefault(cid, []).append((unix_ms, row.get("cgroup_usage") or {}))
    return found


def saturated_polls(run: burst_series.Run) -> list[float]:
    """The cgroup CPU (cores) of every poll, inside the burst, in which a pod was saturated."""
    if run.burst_s is None:
        return []
    end_ms = run.onset_ms + run.burst_s[1] * 1000
    out = []
    for polls in _per_container(run.rows).values():
        for unix_ms, cgroup in polls:
            cores, throttled = cgroup.get("cpu_cores"), cgroup.get("cpu_throttled_fraction")
            if cores is None or throttled is None or not run.onset_ms <= unix_ms <= end_ms:
                continue
            if throttled >= SATURATED:
                out.append(float(cores))
    return out


def ms_per_request(run: burst_series.Run) -> float | None:
    """The pods' cgroup CPU over the burst (each poll's cores times the time since the container's
    previous poll) per request that reached a pod in it; None without a burst, CPU or request."""
    if run.burst_s is None:
        return None
    start_ms, end_ms = run.onset_ms, run.onset_ms + run.burst_s[1] * 1000
    cpu_s = 0.0
    measured = False
    for polls in _per_container(run.rows).values():
        for (before_ms, _), (unix_ms, cgroup) in itertools.pairwise(polls):
            cores = cgroup.get("cpu_cores")
            if cores is None or not start_ms < unix_ms <= end_ms:
                continue
            cpu_s += float(cores) * (unix_ms - before_ms) / 1000
            measured = True
    reached = sum(s.ok + s.timeouts for s in run.workload if start_ms <= s.unix_s * 1000 < end_ms)
    if not measured or not reached:
        return None
    return cpu_s * 1000 / reached


def measure(runs: Sequence[burst_series.Run], limit_cores: float, calibrated_ms: float) -> Capacity:
    """The capacity the real pods of `runs` had (their rows joined by container id)."""
    saturated = [cores for run in runs for cores in saturated_polls(run)]
    costs = [cost for cost in map(ms_per_request, runs) if cost is not None]
    return Capacity(limit_cores, calibrated_ms, scoring.summary_of(saturated), scoring.summary_of(costs))
