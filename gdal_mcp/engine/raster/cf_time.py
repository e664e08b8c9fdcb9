"""CF time coordinates ("days since 2000-01-01", calendar "noleap" …) decoded to ISO 8601 date-times in plain Python.

The calendars of the CF conventions (section 4.4.1): standard/gregorian (Julian before 1582-10-15, Gregorian from
then on), proleptic_gregorian, julian, noleap/365_day, all_leap/366_day and 360_day. Arithmetic is exact: a value
is read from its text as a fraction and rounded to the microsecond once. Months and years are not fixed lengths
of time except in the 360_day calendar (30 and 360 days, as cftime counts them); elsewhere they are refused rather
than guessed. A date is written as ISO 8601 in its own calendar (a 360_day file can have 2000-02-30).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

US_PER_DAY = 86_400_000_000

#: microseconds per unit, by the unit names udunits accepts for time
UNITS_US = {
    **dict.fromkeys(("microseconds", "microsecond", "microsec", "microsecs", "us"), 1),
    **dict.fromkeys(("milliseconds", "millisecond", "millisec", "millisecs", "msec", "msecs", "ms"), 1_000),
    **dict.fromkeys(("seconds", "second", "sec", "secs", "s"), 1_000_000),
    **dict.fromkeys(("minutes", "minute", "min", "mins"), 60_000_000),
    **dict.fromkeys(("hours", "hour", "hr", "hrs", "h"), 3_600_000_000),
    **dict.fromkeys(("days", "day", "d"), US_PER_DAY),
}
#: lengths that only the 360_day calendar fixes
UNITS_360_DAY_US = {
    **dict.fromkeys(("months", "month"), 30 * US_PER_DAY),
    **dict.fromkeys(("years", "year", "yr", "yrs"), 360 * US_PER_DAY),
}
CALENDARS = {
    "standard": "standard",
    "gregorian": "standard",
    "proleptic_gregorian": "proleptic_gregorian",
    "julian": "julian",
    "noleap": "noleap",
    "365_day": "noleap",
    "all_leap": "all_leap",
    "366_day": "all_leap",
    "360_day": "360_day",
}

_SINCE = re.compile(r"^\s*([A-Za-z]+)\s+since\s+(.+?)\s*$", re.IGNORECASE)
_DATE = re.compile(
    r"^(-?\d{1,6})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ]\s*(\d{1,2}):(\d{1,2})(?::(\d{1,2}(?:\.\d*)?))?)?"
    r"\s*(Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2})?)?\s*$",
    re.IGNORECASE,
)
_CUMULATIVE_365 = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365]
_CUMULATIVE_366 = [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366]
_GREGORIAN_START_JDN = 2299161  # 1582-10-15, the first day of the Gregorian calendar in the standard calendar


class CFTimeError(ValueError):
    """Units or a calendar this module cannot decode (the message says why)."""


def is_time_units(units: str | None) -> bool:
    """Whether `units` has the CF time form '<unit> since <date>'."""
    return bool(units and _SINCE.match(units))


def canonical_calendar(calendar: str | None) -> str:
    """The calendar's canonical name ('standard' when absent, as CF defines); CFTimeError for an unknown one."""
    name = (calendar or "standard").strip().lower()
    if name not in CALENDARS:
        raise CFTimeError(f"calendar '{calendar}' is not one of the CF calendars ({', '.join(sorted(CALENDARS))})")
    return CALENDARS[name]


@dataclass(frozen=True)
class TimeUnits:
    """Parsed CF time units: the length of one unit and the reference instant (UTC), in one calendar."""

    unit_us: int
    reference_us: int  # microseconds from day 0 of `calendar` to the reference instant
    calendar: str

    @classmethod
    def parse(cls, units: str, calendar: str | None = None) -> TimeUnits:
        cal = canonical_calendar(calendar)
        m = _SINCE.match(units or "")
        if not m:
            raise CFTimeError(f"units '{units}' are not CF time units ('<unit> since <date>')")
        unit = m.group(1).lower()
        if unit in UNITS_US:
            unit_us = UNITS_US[unit]
        elif unit in UNITS_360_DAY_US and cal == "360_day":
            unit_us = UNITS_360_DAY_US[unit]
        elif unit in UNITS_360_DAY_US:
            raise CFTimeError(f"'{unit}' is not a fixed length of time in the {cal} calendar (only in 360_day)")
        else:
            raise CFTimeError(f"'{unit}' is not a unit of time")
        d = _DATE.match(m.group(2))
        if not d:
            raise CFTimeError(f"reference date '{m.group(2)}' is not a date (expected e.g. 2000-01-01 00:00:00)")
        year, month, day = int(d.group(1)), int(d.group(2)), int(d.group(3))
        hour, minute = int(d.group(4) or 0), int(d.group(5) or 0)
        second = Fraction(d.group(6) or 0)
        if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 61):
            raise CFTimeError(f"reference time in '{units}' is not a time of day")
        days = day_number(year, month, day, cal)
        reference = days * US_PER_DAY + (hour * 3600 + minute * 60) * 1_000_000 + round(second * 1_000_000)
        return cls(unit_us, reference - _zone_offset_us(d.group(7)), cal)

    def decode(self, value: str | float) -> str:
        """The ISO 8601 date-time (UTC, in this calendar) `value` units after the reference."""
        try:
            amount = Fraction(str(value).strip())
        except (ValueError, ZeroDivisionError):
            raise CFTimeError(f"'{value}' is not a number") from None
        total = self.reference_us + round(amount * self.unit_us)
        days, us = divmod(total, US_PER_DAY)
        year, month, day = date_of(days, self.calendar)
        seconds, micro = divmod(us, 1_000_000)
        text = f"{_year(year)}-{month:02d}-{day:02d}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return text + (f".{micro:06d}" if micro else "")


def decode_cf_time(value: str | float, units: str, calendar: str | None = None) -> str:
    """One CF time value as an ISO 8601 date-time, e.g. decode_cf_time(59, 'days since 2020-01-01', 'noleap')."""
    return TimeUnits.parse(units, calendar).decode(value)


def _year(year: int) -> str:
    return f"{year:04d}" if year >= 0 else f"-{-year:04d}"


def _zone_offset_us(zone: str | None) -> int:
    """Microseconds the reference's time zone is ahead of UTC ('+05:30', '-6', 'Z', 'UTC')."""
    if not zone or zone.upper() in ("Z", "UTC", "GMT"):
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    hours, minutes = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
    return sign * (hours * 60 + minutes) * 60_000_000


def _check_date(year: int, month: int, day: int, cal: str) -> None:
    if not 1 <= month <= 12:
        raise CFTimeError(f"month {month} does not exist")
    if cal == "360_day":
        length = 30
    elif cal == "noleap":
        length = _CUMULATIVE_365[month] - _CUMULATIVE_365[month - 1]
    elif cal == "all_leap":
        length = _CUMULATIVE_366[month] - _CUMULATIVE_366[month - 1]
    else:
        leap = year % 4 == 0 if cal == "julian" or (cal == "standard" and year < 1582) else _gregorian_leap(year)
        table = _CUMULATIVE_366 if leap else _CUMULATIVE_365
        length = table[month] - table[month - 1]
    if not 1 <= day <= length:
        raise CFTimeError(f"{_year(year)}-{month:02d}-{day:02d} does not exist in the {cal} calendar")
    if cal == "standard" and (year, month) == (1582, 10) and 4 < day < 15:
        raise CFTimeError(f"1582-10-{day:02d} does not exist in the standard calendar (Julian to Gregorian)")


def _gregorian_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def day_number(year: int, month: int, day: int, cal: str) -> int:
    """Days from the calendar's day 0 (a Julian Day Number for the real-world calendars)."""
    _check_date(year, month, day, cal)
    if cal == "360_day":
        return year * 360 + (month - 1) * 30 + day - 1
    if cal == "noleap":
        return year * 365 + _CUMULATIVE_365[month - 1] + day - 1
    if cal == "all_leap":
        return year * 366 + _CUMULATIVE_366[month - 1] + day - 1
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    base = day + (153 * m + 2) // 5 + 365 * y + y // 4
    gregorian = cal == "proleptic_gregorian" or (cal == "standard" and (year, month, day) >= (1582, 10, 15))
    return base - y // 100 + y // 400 - 32045 if gregorian else base - 32083


def date_of(days: int, cal: str) -> tuple[int, int, int]:
    """(year, month, day) of a day number of `cal` (the inverse of day_number)."""
    if cal in ("360_day", "noleap", "all_leap"):
        length = {"360_day": 360, "noleap": 365, "all_leap": 366}[cal]
        year, rest = divmod(days, length)
        if cal == "360_day":
            return year, rest // 30 + 1, rest % 30 + 1
        table = _CUMULATIVE_365 if cal == "noleap" else _CUMULATIVE_366
        month = next(m for m in range(1, 13) if rest < table[m])
        return year, month, rest - table[month - 1] + 1
    gregorian = cal == "proleptic_gregorian" or (cal == "standard" and days >= _GREGORIAN_START_JDN)
    if gregorian:
        a = days + 32044
        b = (4 * a + 3) // 146097
        c = a - 146097 * b // 4
    else:
        b, c = 0, days + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return 100 * b + d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1
