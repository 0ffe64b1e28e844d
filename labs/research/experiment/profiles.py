"""The open-loop load profiles of docs/experiments.md: constant, ramp, burst, periodic, variable.

Each is a pure function of time: `Profile.rate_at(t_s)` is the offered rate (requests/s) `t_s`
seconds after the load starts. `--scale` multiplies every rate (not the durations). A web run puts
a warm-up in front (`with_warmup`): by default 30 s at the profile's starting rate.

At --scale 1 the base rate is 10 RPS and the peak 150 RPS, so `burst --scale 0.5` is 5 RPS for
180 s, 75 RPS for 120 s, 5 RPS for 180 s, after a 30 s warm-up at 5 RPS.

`--steps 2,4,8,12 --shape ramp` goes linearly from each step's rate to the next in `--step-secs`
(and holds the last one as long); `--shape step` holds each for `--step-secs`.

The answer's boundary (`ramp_burst`) is a burst whose peak is reached in `ramp_s` seconds from the
onset (0: a step), held, then a step back to the base: the same burst at every shape, so that the
shape alone decides whether an autoscaler can keep up. Its runs record `ramp_s` (the shape).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

BASE_RPS = 10.0
PEAK_RPS = 150.0
BURST_BEFORE_S, BURST_S, BURST_AFTER_S = 180.0, 120.0, 180.0
PERIOD_S = 300.0
STEP_S = 60.0
WARMUP_S = 30.0
PROFILES = ("constant", "ramp", "burst", "periodic", "variable")
SHAPES = ("step", "ramp")


class ProfileError(ValueError):
    """Profile options that do not make a profile; the message says which and how to fix it."""


@attrs.frozen
class Profile:
    """A piecewise-linear rate: `points` are (t_s, rps) corners, ascending in t, from t = 0 to
    `duration_s`; `wave` adds sines (amplitude rps, period s, phase) from `wave_from_s` on
    (periodic, variable).
    `burst_s` is (onset, end) of the burst in seconds, for burst profiles."""

    name: str
    points: tuple[tuple[float, float], ...]
    params: tuple[tuple[str, Any], ...] = ()
    burst_s: tuple[float, float] | None = None
    wave: tuple[tuple[float, float, float], ...] = ()  # (amplitude rps, period s, phase rad)
    wave_from_s: float = 0.0  # the wave starts here (after a warm-up), at its own time 0

    @property
    def duration_s(self) -> float:
        return self.points[-1][0]

    def rate_at(self, t_s: float) -> float:
        """Requests per second at `t_s` (0 outside [0, duration_s)); never negative."""
        if t_s < 0 or t_s >= self.duration_s:
            return 0.0
        rate = self.points[-1][1]
        for (t0, r0), (t1, r1) in zip(self.points, self.points[1:], strict=False):
            if t0 <= t_s < t1:
                rate = r0 if t1 == t0 else r0 + (r1 - r0) * (t_s - t0) / (t1 - t0)
                break
        if t_s >= self.wave_from_s:
            for amplitude, period, phase in self.wave:
                rate += amplitude * math.sin(2 * math.pi * (t_s - self.wave_from_s) / period + phase)
        return max(rate, 0.0)

    def meta(self) -> dict[str, Any]:
        """The profile's name and parameters, as runs.jsonl records them."""
        return {"profile": self.name, **dict(self.params), "duration_s": self.duration_s}


def _hold(segments: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Corners of piecewise-constant (duration, rps) segments."""
    points: list[tuple[float, float]] = []
    t = 0.0
    for duration, rps in segments:
        points += [(t, rps), (t + duration, rps)]
        t += duration
    return tuple(points)


def constant(scale: float = 1.0, duration_s: float = 300.0, rps: float | None = None) -> Profile:
    rate = BASE_RPS * scale if rps is None else rps
    return Profile("constant", _hold([(duration_s, rate)]), (("scale", scale), ("rps", rate)))


def burst(scale: float = 1.0, after_s: float = BURST_AFTER_S) -> Profile:
    """Base for 180 s, peak for 120 s, base for 180 s (base 10, peak 150 RPS at scale 1); `after_s`
    lengthens the base after the burst (the answer's figure runs on past the scored window)."""
    base, peak = BASE_RPS * scale, PEAK_RPS * scale
    points = _hold([(BURST_BEFORE_S, base), (BURST_S, peak), (after_s, base)])
    params = (("scale", scale), ("base_rps", base), ("peak_rps", peak))
    return Profile("burst", points, params, (BURST_BEFORE_S, BURST_BEFORE_S + BURST_S))


def ramp_burst(
    base_rps: float,
    peak_rps: float,
    ramp_s: float = 0.0,
    before_s: float = 60.0,
    hold_s: float = BURST_S,
    after_s: float = 60.0,
) -> Profile:
    """`base_rps` for `before_s`, then linearly up to `peak_rps` over `ramp_s` (0: a step), held for
    `hold_s`, then `base_rps` again for `after_s`. The burst is the ramp and the hold: onset at
    `before_s`, end at `before_s + ramp_s + hold_s`."""
    if not (0 < base_rps <= peak_rps):
        raise ProfileError("a burst needs a base rate above 0 and a peak at least as high")
    if ramp_s < 0 or before_s < 0 or after_s < 0 or hold_s <= 0:
        raise ProfileError("a burst's ramp, before and after seconds must be 0 or more, its hold above 0")
    on, top, off = before_s, before_s + ramp_s, before_s + ramp_s + hold_s
    corners = [(0.0, base_rps), (on, base_rps), (top, peak_rps), (off, peak_rps), (off, base_rps)]
    points = (*corners, (off + after_s, base_rps))
    params = (
        ("base_rps", base_rps),
        ("peak_rps", peak_rps),
        ("ramp_s", ramp_s),
        ("before_s", before_s),
        ("hold_s", hold_s),
        ("after_s", after_s),
    )
    return Profile("burst", points, params, burst_s=(on, off))


def steps(
    levels: Sequence[float], shape: str = "step", step_s: float = STEP_S, scale: float = 1.0
) -> Profile:
    """`levels` (RPS at scale 1) held for `step_s` each (shape step) or ramped between (shape ramp)."""
    if not levels or any(not (level >= 0) for level in levels):
        raise ProfileError("--steps needs one or more rates of 0 or more, e.g. --steps 2,4,8,12")
    if shape not in SHAPES:
        raise ProfileError(f"--shape {shape!r} is not one of {', '.join(SHAPES)}")
    if not step_s > 0:
        raise ProfileError("--step-secs must be above 0")
    rates = [level * scale for level in levels]
    if shape == "step":
        points = _hold([(step_s, r) for r in rates])
    else:
        points = (*tuple((i * step_s, r) for i, r in enumerate(rates)), (len(rates) * step_s, rates[-1]))
    params = (("scale", scale), ("steps", tuple(levels)), ("shape", shape), ("step_s", step_s))
    return Profile("ramp" if shape == "ramp" else "steps", points, params)


def ramp(scale: float = 1.0, duration_s: float = 300.0) -> Profile:
    """From the base rate to the peak rate, linearly, over `duration_s`."""
    points = ((0.0, BASE_RPS * scale), (duration_s, PEAK_RPS * scale))
    return Profile("ramp", points, (("scale", scale),))


def periodic(scale: float = 1.0, duration_s: float = 600.0, period_s: float = PERIOD_S) -> Profile:
    """A sine between the base and the peak rate, period `period_s`, starting at the base."""
    mid, amplitude = (BASE_RPS + PEAK_RPS) / 2 * scale, (PEAK_RPS - BASE_RPS) / 2 * scale
    wave = ((amplitude, period_s, -math.pi / 2),)
    params = (("scale", scale), ("period_s", period_s))
    return Profile("periodic", _hold([(duration_s, mid)]), params, wave=wave)


def variable(scale: float = 1.0, duration_s: float = 600.0) -> Profile:
    """Three incommensurate sines around the middle rate: irregular but reproducible, no randomness."""
    mid = (BASE_RPS + PEAK_RPS) / 2 * scale
    amplitude = (PEAK_RPS - BASE_RPS) / 2 * scale
    wave = (
        (0.5 * amplitude, 173.0, -math.pi / 2),
        (0.3 * amplitude, 61.0, 1.0),
        (0.2 * amplitude, 23.0, 2.0),
    )
    return Profile("variable", _hold([(duration_s, mid)]), (("scale", scale),), wave=wave)


def with_warmup(profile: Profile, warmup_s: float = WARMUP_S, rps: float | None = None) -> Profile:
    """`profile` after `warmup_s` at `rps` (default: the profile's rate at its start)."""
    if warmup_s < 0:
        raise ProfileError("--warmup-secs must be 0 or more")
    if warmup_s == 0:
        return profile
    rate = profile.rate_at(0.0) if rps is None else rps
    points = ((0.0, rate), (warmup_s, rate), *((t + warmup_s, r) for t, r in profile.points))
    params = (*profile.params, ("warmup_s", warmup_s), ("warmup_rps", rate))
    burst_s = (
        None if profile.burst_s is None else (profile.burst_s[0] + warmup_s, profile.burst_s[1] + warmup_s)
    )
    return attrs.evolve(
        profile, points=points, params=params, burst_s=burst_s, wave_from_s=profile.wave_from_s + warmup_s
    )


def build(
    name: str,
    scale: float = 1.0,
    levels: Sequence[float] | None = None,
    shape: str = "step",
    step_s: float = STEP_S,
    duration_s: float | None = None,
    rps: float | None = None,
) -> Profile:
    """The profile of run.py's options: `--steps` (with `--shape`) wins over `--profile`."""
    if not scale > 0:
        raise ProfileError("--scale must be above 0")
    if levels:
        return steps(levels, shape, step_s, scale)
    if name == "burst":
        return burst(scale)
    if name == "constant":
        return constant(scale, duration_s or 300.0, rps)
    if name == "ramp":
        return ramp(scale, duration_s or 300.0)
    if name == "periodic":
        return periodic(scale, duration_s or 600.0)
    if name == "variable":
        return variable(scale, duration_s or 600.0)
    raise ProfileError(f"--profile {name!r} is not one of {', '.join(PROFILES)}")


def parse_steps(text: str) -> tuple[float, ...]:
    """`--steps 2,4,8,12` as rates; a bad list is a `ProfileError`."""
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ProfileError(
            f"--steps {text!r} is not a comma-separated list of rates, e.g. 2,4,8,12"
        ) from None
