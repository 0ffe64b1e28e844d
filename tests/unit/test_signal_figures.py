"""The figures of the signal measurement (croft.runs.signals) on made-up polls whose answers are known."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.runs.signals import PollRecord, Step, figures, saturated, table

STEPS = (Step(0, 40, 5.0), Step(40, 80, 10.0), Step(80, 120, 30.0))
CAPACITY = 12.0


def polls(noise: float = 0.0, lag_polls: int = 0) -> list[PollRecord]:
    """A poll every 2 s: `offered` counts every request, `replies` what a 12 RPS pod answers (×2),
    `lagging` follows offered `lag_polls` polls late."""
    out = []
    for k in range(1, 61):
        t = 2.0 * k
        offered = next(s.offered_rps for s in STEPS if s.start_s < t <= s.end_s)
        late = next(s.offered_rps for s in STEPS if s.start_s < max(t - 2.0 * lag_polls, 0.1) <= s.end_s)
        served = min(offered, CAPACITY)
        wobble = 1 + (noise if k % 2 else -noise)
        out.append(
            PollRecord(
                t_s=t,
                offered_rps=offered,
                served_rps=served,
                values={"offered": offered * wobble, "replies": 2 * served, "lagging": late},
            )
        )
    return out


def test_a_signal_that_counts_arrivals_keeps_its_ratio_and_a_reply_count_falls() -> None:
    result = {
        f.candidate: f for f in figures(polls(lag_polls=3), STEPS, ("offered", "replies", "lagging"), 8.0)
    }
    assert [saturated(polls(), s, 8.0) for s in STEPS] == [False, False, True]
    offered, replies, lagging = result["offered"], result["replies"], result["lagging"]
    assert offered.ratio_below == pytest.approx(1.0) and offered.ratio_above == pytest.approx(1.0)
    assert offered.cv_below == pytest.approx(0.0, abs=1e-12)
    assert offered.delay_s == 2.0  # the first poll after the onset
    assert replies.ratio_below == pytest.approx(2.0)
    assert replies.ratio_above == pytest.approx(2 * CAPACITY / 30)
    assert replies.delay_s == 2.0  # 20 -> 24 calls/s is a move, reached at once
    assert lagging.delay_s == 8.0  # three polls late: the fourth is the first at the new level


def test_noise_is_the_coefficient_of_variation_per_poll() -> None:
    (offered,) = figures(polls(noise=0.1), STEPS, ("offered",), 8.0)
    assert offered.cv_below == pytest.approx(0.1, rel=0.1)
    assert offered.cv_above == pytest.approx(0.1, rel=0.1)


@given(st.floats(min_value=0.0, max_value=0.5))
def test_ratios_are_never_negative_and_the_table_has_a_line_each(noise: float) -> None:
    rows = figures(polls(noise=noise), STEPS, ("offered", "replies", "missing"), 8.0)
    for row in rows:
        for value in (row.ratio_below, row.ratio_above, row.cv_below, row.cv_above, row.delay_s):
            assert value is None or value >= 0
    missing = rows[-1]
    assert (missing.ratio_below, missing.ratio_above, missing.cv_below, missing.delay_s) == (None,) * 4
    assert len(table(rows).splitlines()) == 4
