"""CF time decoding against Python's datetime (standard calendar after 1582) and dates worked out by hand for the
other calendars (what a day count means in each is a matter of counting month lengths)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from gdal_mcp.engine.raster.cf_time import CFTimeError, decode_cf_time, is_time_units


@pytest.mark.parametrize("calendar", [None, "standard", "gregorian", "proleptic_gregorian"])
def test_real_world_calendars_match_datetime_after_1582(calendar: str | None) -> None:
    rng = random.Random(25)
    cases = [
        ("days", "2000-01-01", dt.datetime(2000, 1, 1)),
        ("hours", "1900-01-01 00:00:0.0", dt.datetime(1900, 1, 1)),
        ("minutes", "1970-01-01T00:00:00Z", dt.datetime(1970, 1, 1)),
        ("seconds", "1981-01-01 00:00:00 UTC", dt.datetime(1981, 1, 1)),
        ("days", "1850-1-1", dt.datetime(1850, 1, 1)),
    ]
    for unit, ref, base in cases:
        for _ in range(200):
            value = rng.randint(-20_000, 80_000) * {"days": 1, "hours": 24, "minutes": 1440, "seconds": 86400}[unit]
            value += rng.choice([0, 0.5, 0.25])
            expected = (base + dt.timedelta(**{unit: value})).isoformat()
            assert decode_cf_time(repr(value), f"{unit} since {ref}", calendar) == expected, (unit, ref, value)


def test_the_calendars_differ_as_their_month_lengths_say() -> None:
    units = "days since 2020-01-01"
    # 2020 is a leap year: day 59 is Feb 29 in the real-world calendars, Mar 1 without leap days, Feb 30 in 360_day
    assert decode_cf_time(59, units, "standard") == "2020-02-29T00:00:00"
    assert decode_cf_time(59, units, "noleap") == "2020-03-01T00:00:00"
    assert decode_cf_time(59, units, "365_day") == "2020-03-01T00:00:00"
    assert decode_cf_time(59, units, "360_day") == "2020-02-30T00:00:00"
    assert decode_cf_time(59, units, "all_leap") == "2020-02-29T00:00:00"
    # day 181: 31+29+31+30+31+30 = 182 -> Jun 30 (standard); 181 = Jul 1 with 28-day Febs; 6*30+1 -> Jul 2 (360_day)
    assert decode_cf_time(181, units, "standard") == "2020-06-30T00:00:00"
    assert decode_cf_time(181, units, "noleap") == "2020-07-01T00:00:00"
    assert decode_cf_time(181, units, "360_day") == "2020-07-02T00:00:00"
    # a whole year of each calendar
    assert decode_cf_time(365, units, "noleap") == "2021-01-01T00:00:00"
    assert decode_cf_time(366, units, "all_leap") == "2021-01-01T00:00:00"
    assert decode_cf_time(360, units, "360_day") == "2021-01-01T00:00:00"
    assert decode_cf_time(59, "days since 2021-01-01", "all_leap") == "2021-02-29T00:00:00"
    assert decode_cf_time(-1, "days since 2021-03-01", "noleap") == "2021-02-28T00:00:00"


def test_julian_and_the_1582_switch_of_the_standard_calendar() -> None:
    # 1900 is a leap year in the Julian calendar only
    assert decode_cf_time(1, "days since 1900-02-28", "julian") == "1900-02-29T00:00:00"
    assert decode_cf_time(1, "days since 1900-02-28", "standard") == "1900-03-01T00:00:00"
    # the standard calendar is Julian before 1582-10-15: Thursday 4 October was followed by Friday 15 October
    assert decode_cf_time(1, "days since 1582-10-04", "standard") == "1582-10-15T00:00:00"
    assert decode_cf_time(1, "days since 1582-10-04", "proleptic_gregorian") == "1582-10-05T00:00:00"
    assert decode_cf_time(1, "days since 1500-02-28", "standard") == "1500-02-29T00:00:00"
    assert decode_cf_time(1, "days since 1500-02-28", "proleptic_gregorian") == "1500-03-01T00:00:00"
    with pytest.raises(CFTimeError, match="does not exist"):
        decode_cf_time(0, "days since 1582-10-10", "standard")


def test_fractions_zones_and_360_day_months() -> None:
    assert decode_cf_time("1.5", "hours since 2000-01-01T00:00:00Z") == "2000-01-01T01:30:00"
    assert decode_cf_time("0.1", "seconds since 2000-01-01") == "2000-01-01T00:00:00.100000"
    assert decode_cf_time(0, "days since 2000-01-01 00:00:00 +05:30") == "1999-12-31T18:30:00"
    assert decode_cf_time(0, "days since 2000-01-01 06:00 -6") == "2000-01-01T12:00:00"
    assert decode_cf_time("1e10", "seconds since 1970-01-01") == "2286-11-20T17:46:40"
    assert decode_cf_time(13, "months since 2000-01-01", "360_day") == "2001-02-01T00:00:00"
    assert decode_cf_time(2, "years since 2000-01-01", "360_day") == "2002-01-01T00:00:00"


@pytest.mark.parametrize(
    "units,calendar,message",
    [
        ("months since 2000-01-01", "standard", "not a fixed length"),
        ("days since 2000-01-01", "lunar", "not one of the CF calendars"),
        ("days since yesterday", None, "is not a date"),
        ("fortnights since 2000-01-01", None, "not a unit of time"),
        ("days since 2001-02-29", "noleap", "does not exist"),
        ("K", None, "not CF time units"),
    ],
)
def test_what_cannot_be_decoded_is_refused_not_guessed(units: str, calendar: str | None, message: str) -> None:
    with pytest.raises(CFTimeError, match=message):
        decode_cf_time(0, units, calendar)


def test_time_units_are_recognised_by_their_form() -> None:
    assert is_time_units("days since 2000-01-01") and is_time_units("Hours Since 1900-1-1 0:0:0")
    assert not is_time_units("hPa") and not is_time_units(None) and not is_time_units("degrees_north")
