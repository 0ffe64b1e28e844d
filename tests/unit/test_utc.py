"""The one UTC formatter (croft.domain.utc) against the standard library's float-based conversions that
croft used in five places before, and the stamp's parse."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.utc import MAX_MS, iso_ms, parse_stamp, readable, stamp

YEAR_2100_MS = 4_102_444_800_000
instants = st.integers(min_value=0, max_value=YEAR_2100_MS)


def _from_float(unix_ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(unix_ms / 1000, tz=dt.UTC)


@given(instants)
def test_stamp_is_strftime_in_utc_and_parses_back_to_its_second(unix_ms: int) -> None:
    expected = dt.datetime.fromtimestamp(unix_ms // 1000, tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    assert stamp(unix_ms) == expected
    assert parse_stamp(expected) == unix_ms // 1000 * 1000


@pytest.mark.parametrize(
    "text", ["20260230T000000Z", "20261301T000000Z", "20261020T240000Z", "19691231T235959Z", "2026-10-20", ""]
)
def test_a_stamp_that_is_no_real_second_from_1970_on_does_not_parse(text: str) -> None:
    assert parse_stamp(text) is None


def test_stamps_clamp_to_the_years_they_can_spell() -> None:
    assert stamp(-1) == "19700101T000000Z"
    assert stamp(MAX_MS + 10_000) == "99991231T235959Z"
    assert parse_stamp("99991231T235959Z") == MAX_MS // 1000 * 1000


@given(instants)
def test_iso_ms_is_isoformat_of_the_float_conversion(unix_ms: int) -> None:
    expected = _from_float(unix_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert iso_ms(unix_ms) == expected


@given(instants)
def test_readable_is_strftime_of_the_float_conversion(unix_ms: int) -> None:
    moment = _from_float(unix_ms)
    assert readable(unix_ms, ms=True) == moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    assert readable(unix_ms) == moment.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def test_readable_examples() -> None:
    assert readable(1_792_501_200_123) == "2026-10-20 13:00:00 UTC"
    assert readable(1_792_501_200_123, ms=True) == "2026-10-20 13:00:00.123 UTC"
    assert iso_ms(1_792_501_200_123) == "2026-10-20T13:00:00.123Z"
