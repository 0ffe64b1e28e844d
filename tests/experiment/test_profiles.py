"""profiles.py: the open-loop profiles as pure functions of time, and their send schedule."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import profiles
from croft.runs.load import send_times


def test_burst_at_scale_half_is_the_spec_s_burst_after_a_warm_up():
    p = profiles.with_warmup(profiles.burst(0.5))
    assert p.duration_s == 30 + 180 + 120 + 180
    assert p.burst_s == (210.0, 330.0)
    assert [p.rate_at(t) for t in (0, 29.9)] == [5.0, 5.0]  # warm-up
    assert [p.rate_at(t) for t in (30, 209.99)] == [5.0, 5.0]  # 180 s at 5 RPS
    assert [p.rate_at(t) for t in (210, 329.99)] == [75.0, 75.0]  # 120 s at 75 RPS
    assert [p.rate_at(t) for t in (330, 509.99)] == [5.0, 5.0]  # 5 RPS again
    assert p.rate_at(510) == 0.0 and p.rate_at(-1) == 0.0
    assert p.meta() == {
        "profile": "burst",
        "scale": 0.5,
        "base_rps": 5.0,
        "peak_rps": 75.0,
        "warmup_s": 30.0,
        "warmup_rps": 5.0,
        "duration_s": 510.0,
    }


def test_scale_multiplies_rates_not_durations():
    p = profiles.burst(2.0)
    assert (p.rate_at(0), p.rate_at(200), p.duration_s) == (20.0, 300.0, 480.0)


def test_steps_hold_or_ramp():
    held = profiles.build("constant", levels=(2, 4, 8, 12), shape="step", step_s=60)
    assert [held.rate_at(t) for t in (0, 59, 60, 130, 239)] == [2, 2, 4, 8, 12]
    ramped = profiles.build("constant", levels=(2, 4, 8, 12), shape="ramp", step_s=60)
    assert ramped.rate_at(30) == pytest.approx(3.0)
    assert ramped.rate_at(150) == pytest.approx(10.0)
    assert ramped.rate_at(200) == 12 and ramped.duration_s == 240


def test_waves_keep_their_shape_after_a_warm_up():
    bare = profiles.periodic(1.0, duration_s=600)
    warmed = profiles.with_warmup(bare, 30, 7.0)
    assert warmed.rate_at(10) == 7.0
    for t in (0.0, 75.0, 150.0, 299.0):
        assert warmed.rate_at(t + 30) == pytest.approx(bare.rate_at(t))
    assert bare.rate_at(0) == pytest.approx(10.0) and bare.rate_at(150) == pytest.approx(150.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: profiles.build("burst", scale=0), "--scale must be above 0"),
        (lambda: profiles.build("nope"), "--profile 'nope' is not one of"),
        (lambda: profiles.parse_steps("2,x"), "--steps '2,x' is not"),
        (lambda: profiles.steps((2, -1)), "--steps needs one or more rates of 0 or more"),
        (lambda: profiles.steps((2,), shape="saw"), "--shape 'saw'"),
    ],
)
def test_bad_options_are_named(call, message):
    with pytest.raises(profiles.ProfileError, match=message.replace("(", r"\(")):
        call()


@given(
    name=st.sampled_from(profiles.PROFILES),
    scale=st.floats(0.1, 3),
    t=st.floats(-10, 1000, allow_nan=False),
)
def test_rates_are_never_negative_and_zero_outside(name, scale, t):
    p = profiles.build(name, scale, duration_s=300)
    rate = p.rate_at(t)
    assert rate >= 0
    if t < 0 or t >= p.duration_s:
        assert rate == 0


@given(rps=st.integers(1, 200), seconds=st.integers(1, 20))
def test_a_constant_rate_sends_exactly_rps_each_second_evenly(rps, seconds):
    times = send_times(profiles.constant(duration_s=seconds, rps=rps).rate_at, seconds)
    assert len(times) == rps * seconds
    per_second = [sum(1 for t in times if s <= t < s + 1) for s in range(seconds)]
    assert per_second == [rps] * seconds
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(math.isclose(g, 1 / rps, abs_tol=1e-6) for g in gaps)


@given(st.sampled_from(profiles.PROFILES), st.floats(0.1, 2))
def test_the_schedule_follows_the_integral_of_the_rate(name, scale):
    p = profiles.build(name, scale, duration_s=120)
    times = send_times(p.rate_at, p.duration_s)
    integral = sum(p.rate_at(i * 0.01 + 0.005) * 0.01 for i in range(int(p.duration_s * 100)))
    assert abs(len(times) - integral) <= 1
    assert times == sorted(times) and all(0 <= t < p.duration_s for t in times)


def test_a_ramp_burst_reaches_its_peak_in_ramp_s_and_holds_it():
    p = profiles.ramp_burst(12, 60, ramp_s=30, before_s=60, hold_s=120, after_s=60)
    assert p.duration_s == 60 + 30 + 120 + 60 and p.burst_s == (60.0, 210.0)
    assert [p.rate_at(t) for t in (0, 59.9, 60)] == [12, 12, 12]
    assert p.rate_at(75) == pytest.approx(36.0)  # halfway up
    assert [p.rate_at(t) for t in (90, 209.9, 210, 269.9)] == [60, 60, 12, 12]
    assert p.meta() == {
        "profile": "burst",
        "base_rps": 12,
        "peak_rps": 60,
        "ramp_s": 30,
        "before_s": 60,
        "hold_s": 120,
        "after_s": 60,
        "duration_s": 270,
    }


def test_a_ramp_burst_of_0_s_is_a_step():
    p = profiles.ramp_burst(5, 25, ramp_s=0, before_s=10, hold_s=20, after_s=10)
    assert [p.rate_at(t) for t in (9.99, 10, 29.99, 30)] == [5, 25, 25, 5]
    assert p.burst_s == (10.0, 30.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 10), "a burst needs a base rate above 0"), ((10, 5), "a burst needs"), ((5, 10, -1), "ramp")],
)
def test_a_ramp_burst_refuses_what_is_not_one(args, message):
    with pytest.raises(profiles.ProfileError, match=message):
        profiles.ramp_burst(*args)
