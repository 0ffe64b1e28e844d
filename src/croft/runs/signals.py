"""How well a load signal tracks offered load: the figures of the offered-load measurement, pure.

A measurement steps one pod's open-loop load through `Step`s and records, at every collector poll,
each candidate signal's value and what the client saw (`PollRecord`; its `sent_rps`, the
requests the client got round to sending, falls below `offered_rps` when the client itself is
starved of CPU). For each candidate:

- `ratio_below`/`ratio_above`: the signal per offered request/s, over the settled polls of the steps
  the pod kept up with (served >= `KEPT_UP` × offered) and of those it did not (saturated);
- `cv_below`/`cv_above`: its noise at steady load, the coefficient of variation (sd ÷ mean) of its
  per-poll values within a settled step, the median over the steps (where its mean is above 0) the
  pod kept up with, and over those it did not;
- `delay_s`: after the onset of the first saturated step, seconds until it first reached
  `REACHED` of the way from its settled level in the step before to its settled level in this one;
  None when it did not move by `MOVED` of its old level (a signal that saturated has no new level
  to reach).

"Settled" polls of a step are those at least `settle_s` after its onset, so that the figures do not
mix two levels.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence

import attrs

KEPT_UP = 0.9
REACHED = 0.9
MOVED = 0.1


@attrs.frozen
class Step:
    """Load held at `offered_rps` from `start_s` to `end_s` (seconds from the load's start)."""

    start_s: float
    end_s: float
    offered_rps: float


@attrs.frozen
class PollRecord:
    """One collector poll: `t_s` the end of its interval (seconds from the load's start), what the
    client offered and got answered over it (requests/s), and each candidate's value then."""

    t_s: float
    offered_rps: float
    served_rps: float
    values: Mapping[str, float]
    sent_rps: float | None = None


@attrs.frozen
class Figures:
    candidate: str
    ratio_below: float | None
    ratio_above: float | None
    cv_below: float | None
    cv_above: float | None
    delay_s: float | None


def settled(polls: Sequence[PollRecord], step: Step, settle_s: float) -> list[PollRecord]:
    """The polls whose whole interval lies in `step` at least `settle_s` after its onset (the
    poll interval is taken as the gap to the poll before; the first poll has none and is left out)."""
    out: list[PollRecord] = []
    for before, poll in itertools.pairwise(polls):
        if before.t_s >= step.start_s + settle_s and poll.t_s <= step.end_s:
            out.append(poll)
    return out


def saturated(polls: Sequence[PollRecord], step: Step, settle_s: float) -> bool | None:
    """Whether the pod fell behind in `step`: served < KEPT_UP × offered over its settled polls
    (None without settled polls or offered load)."""
    window = settled(polls, step, settle_s)
    if not window or step.offered_rps <= 0:
        return None
    served = statistics.fmean(p.served_rps for p in window)
    return served < KEPT_UP * step.offered_rps


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def figures(
    polls: Sequence[PollRecord], steps: Sequence[Step], candidates: Sequence[str], settle_s: float
) -> list[Figures]:
    """The figures of each of `candidates` (keys of `PollRecord.values`; a poll without a candidate
    counts as no value of it)."""
    ordered = sorted(polls, key=lambda p: p.t_s)
    verdicts = [saturated(ordered, step, settle_s) for step in steps]
    onset = next((i for i, v in enumerate(verdicts) if v), None)
    out: list[Figures] = []
    for name in candidates:
        below: list[float] = []
        above: list[float] = []
        cvs: dict[bool, list[float]] = {False: [], True: []}
        levels: list[float | None] = []
        for step, verdict in zip(steps, verdicts, strict=True):
            window = [p.values[name] for p in settled(ordered, step, settle_s) if name in p.values]
            levels.append(_mean(window))
            if step.offered_rps > 0 and verdict is not None:
                (above if verdict else below).extend(v / step.offered_rps for v in window)
            cv = _cv(window)
            if cv is not None and verdict is not None:
                cvs[verdict].append(cv)
        delay = None
        if onset is not None and onset > 0:
            delay = _delay(ordered, steps[onset], levels[onset - 1], levels[onset], name)
        out.append(
            Figures(
                candidate=name,
                ratio_below=_mean(below),
                ratio_above=_mean(above),
                cv_below=statistics.median(cvs[False]) if cvs[False] else None,
                cv_above=statistics.median(cvs[True]) if cvs[True] else None,
                delay_s=delay,
            )
        )
    return out


def _delay(
    polls: Sequence[PollRecord], step: Step, old: float | None, new: float | None, name: str
) -> float | None:
    if old is None or new is None or not math.isfinite(old) or not math.isfinite(new):
        return None
    if abs(new - old) <= MOVED * max(abs(old), 1e-9):
        return None
    mark = old + REACHED * (new - old)
    for poll in polls:
        if poll.t_s <= step.start_s or poll.t_s > step.end_s or name not in poll.values:
            continue
        value = poll.values[name]
        if (new > old and value >= mark) or (new < old and value <= mark):
            return poll.t_s - step.start_s
    return None


def table(rows: Sequence[Figures]) -> str:
    """The figures as an aligned text table (ratios to 3 significant digits, CVs in %, delay in s)."""

    def number(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    columns = ("per req below", "per req above", "above/below", "CV below", "CV above")
    header = f"{'signal':<26} {columns[0]:>13} {columns[1]:>13} {columns[2]:>11}"
    header += f" {columns[3]:>8} {columns[4]:>8} {'delay':>7}"
    lines = [header]
    for row in rows:
        change = (
            row.ratio_above / row.ratio_below
            if row.ratio_above is not None and row.ratio_below not in (None, 0.0)
            else None
        )
        below = None if row.cv_below is None else row.cv_below * 100
        above = None if row.cv_above is None else row.cv_above * 100
        lines.append(
            f"{row.candidate:<26} {number(row.ratio_below, '13.3g'):>13} "
            f"{number(row.ratio_above, '13.3g'):>13} "
            f"{number(change, '11.2f'):>11} {number(below, '7.1f'):>7}% {number(above, '7.1f'):>7}% "
            f"{number(row.delay_s, '6.1f'):>6}s"
        )
    return "\n".join(lines)
