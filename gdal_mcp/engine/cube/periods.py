"""Time steps grouped into periods (months, seasons, years, N days …) or climatological slots, in the file's calendar.

A period is named by an ISO 8601 label that says its span: '2005' (a year), '2005-01' (a month), '2005-01-15'
(a day), '2004-12/2005-02' (a season: DJF from December to February, the December of the year before), and
'2005-01-01/2005-01-10' (a custom span of days or hours, counted from the first step's day, or of months/years,
counted from the first step's month). A climatology groups the steps by their slot in the year: the month
('01' … '12'), the season ('DJF' …) or the day ('01-31'), across all years.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gdal_mcp.engine.cube.source import Step, seconds_of
from gdal_mcp.engine.raster.cf_time import canonical_calendar, date_of, day_number
from gdal_mcp.errors import GdalMcpError

SEASONS = {
    12: "DJF",
    1: "DJF",
    2: "DJF",
    3: "MAM",
    4: "MAM",
    5: "MAM",
    6: "JJA",
    7: "JJA",
    8: "JJA",
    9: "SON",
    10: "SON",
    11: "SON",
}
SEASON_FIRST = {"DJF": 12, "MAM": 3, "JJA": 6, "SON": 9}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_CUSTOM = re.compile(r"^(\d{1,5})\s*(D|h|H|M|MS|Y|YS|A|AS)$")
NAMED = ("all", "year", "season", "month", "day", "hour")


@dataclass
class Group:
    """The steps of one output band."""

    label: str
    steps: list[Step] = field(default_factory=list)
    slot: str = ""  # the climatological slot an anomaly compares it with (month '01', season 'DJF', day '01-31', or '')
    start: str | None = None  # first and last step's time
    end: str | None = None


def _season_year(y: int, m: int) -> int:
    return y + 1 if m == 12 else y


def _slot(period: str, key: tuple[int, int, int, int, int, float]) -> str:
    m, d = key[1], key[2]
    if period == "month":
        return f"{m:02d}"
    if period == "season":
        return SEASONS[m]
    if period == "day":
        return f"{m:02d}-{d:02d}"
    if period == "hour":
        return f"{m:02d}-{d:02d}T{key[3]:02d}"
    return ""


def _label(period: str, key: tuple[int, int, int, int, int, float]) -> str:
    y, m, d, h = key[0], key[1], key[2], key[3]
    if period == "year":
        return f"{y:04d}"
    if period == "month":
        return f"{y:04d}-{m:02d}"
    if period == "day":
        return f"{y:04d}-{m:02d}-{d:02d}"
    if period == "hour":
        return f"{y:04d}-{m:02d}-{d:02d}T{h:02d}"
    if period == "season":
        sy = _season_year(y, m)
        first = SEASON_FIRST[SEASONS[m]]
        y0 = sy - 1 if first == 12 else sy
        last = (first + 2 - 1) % 12 + 1
        y1 = sy
        return f"{y0:04d}-{first:02d}/{y1:04d}-{last:02d}"
    raise GdalMcpError("internal-error", f"no label for period {period}")


def parse_period(period: str) -> tuple[str, int, str]:
    """('named', 0, name) or ('custom', n, unit) with unit D, h, M or Y."""
    p = period.strip()
    if p.lower() in NAMED:
        return "named", 0, p.lower()
    m = _CUSTOM.match(p)
    if not m or int(m.group(1)) < 1:
        hint = ""
        if p.upper() in SEASON_FIRST:
            first = SEASON_FIRST[p.upper()]
            hint = (
                f"; for {p.upper()} alone use period='season' with start and end around it (e.g. start='2005-"
                f"{first:02d}', end='{'2006' if first == 12 else '2005'}-{(first + 1) % 12 + 1:02d}'), or climatology=true "
                "for every year's together"
            )
        elif p.capitalize() in MONTHS or p.lower()[:3] in [m_[:3].lower() for m_ in MONTHS]:
            hint = "; for one month use period='month' with start and end (e.g. start='2005-07', end='2005-07')"
        raise GdalMcpError(
            "invalid-argument",
            f"period {period!r} is not one of {', '.join(NAMED)} nor a frequency like 10D (days), 6h (hours), "
            f"3M (months) or 2Y (years){hint}",
        )
    unit = {"D": "D", "h": "h", "H": "h", "M": "M", "MS": "M", "Y": "Y", "YS": "Y", "A": "Y", "AS": "Y"}[m.group(2)]
    return "custom", int(m.group(1)), unit


def group_steps(steps: list[Step], period: str, calendar: str | None, climatology: bool = False) -> list[Group]:
    """The steps (sorted by time) grouped into output bands, in time order (climatology: in slot order)."""
    kind, n, unit = parse_period(period)
    if any(s.key is None for s in steps) and not (kind == "named" and unit == "all"):
        raise GdalMcpError("invalid-argument", "the variable has no decoded time dimension; only period='all' applies")
    groups: dict[str, Group] = {}
    if kind == "named" and unit == "all":
        g = Group(label=_span(steps), steps=list(steps))
        groups[g.label] = g
    elif climatology:
        if kind != "named" or unit not in ("month", "season", "day"):
            raise GdalMcpError(
                "invalid-argument", "climatology groups by month, season or day; use period='month', 'season' or 'day'"
            )
        for s in steps:
            slot = _slot(unit, s.key)  # type: ignore[arg-type]
            groups.setdefault(slot, Group(label=_clim_label(unit, slot), slot=slot)).steps.append(s)
        order = [SEASONS[m] for m in (12, 3, 6, 9)] if unit == "season" else sorted(groups)  # DJF, MAM, JJA, SON / months / days
        groups = {k: groups[k] for k in order if k in groups}
    elif kind == "named":
        for s in steps:
            label = _label(unit, s.key)  # type: ignore[arg-type]
            groups.setdefault(label, Group(label=label, slot=_slot(unit, s.key))).steps.append(s)  # type: ignore[arg-type]
    else:
        cal = canonical_calendar(calendar)
        first = steps[0].key
        assert first is not None
        for s in steps:
            assert s.key is not None
            if unit in ("D", "h"):
                day0 = day_number(first[0], first[1], first[2], cal)
                day = day_number(s.key[0], s.key[1], s.key[2], cal)
                if unit == "D":
                    index = (day - day0) // n
                    a = date_of(day0 + index * n, cal)
                    b = date_of(day0 + index * n + n - 1, cal)
                    label = f"{a[0]:04d}-{a[1]:02d}-{a[2]:02d}/{b[0]:04d}-{b[1]:02d}-{b[2]:02d}"
                else:
                    hours = (day - day0) * 24 + s.key[3]
                    index = hours // n
                    start_h = index * n
                    a = date_of(day0 + start_h // 24, cal)
                    label = f"{a[0]:04d}-{a[1]:02d}-{a[2]:02d}T{start_h % 24:02d}/PT{n}H"
            else:
                months = n * (12 if unit == "Y" else 1)
                m0 = (first[0] if unit == "Y" else first[0]) * 12 + ((first[1] - 1) if unit == "M" else 0)
                mi = s.key[0] * 12 + s.key[1] - 1
                index = (mi - m0) // months
                a_m = m0 + index * months
                b_m = a_m + months - 1
                label = f"{a_m // 12:04d}-{a_m % 12 + 1:02d}/{b_m // 12:04d}-{b_m % 12 + 1:02d}"
                if unit == "Y":
                    label = f"{a_m // 12:04d}/{b_m // 12:04d}" if n > 1 else f"{a_m // 12:04d}"
            groups.setdefault(label, Group(label=label)).steps.append(s)
    out = list(groups.values())
    for g in out:
        g.start, g.end = g.steps[0].time, g.steps[-1].time
    return out


def _clim_label(unit: str, slot: str) -> str:
    if unit == "month":
        return MONTHS[int(slot) - 1]
    return slot


def _span(steps: list[Step]) -> str:
    if steps and steps[0].time and steps[-1].time:
        return f"{steps[0].time}/{steps[-1].time}"
    return "all"


def reference_slots(period: str, climatology: bool) -> str:
    """How an anomaly matches a period with the reference: by its month, season or day of the year, or not at all."""
    kind, _, unit = parse_period(period)
    if kind == "named" and unit in ("month", "season", "day", "hour"):
        return unit
    return ""


def _bounds(unit: str, key: tuple[int, int, int, int, int, float], cal: str) -> tuple[float, float]:
    """Start and end (exclusive), in seconds of `cal`, of the named period (month, season, year, day, hour) holding key."""
    y, m, d, h = key[0], key[1], key[2], key[3]
    if unit == "hour":
        start = seconds_of((y, m, d, h, 0, 0.0), cal)
        return start, start + 3600
    if unit == "day":
        start = seconds_of((y, m, d, 0, 0, 0.0), cal)
        return start, start + 86400
    if unit == "month":
        first, months = (y, m), 1
    elif unit == "year":
        first, months = (y, 1), 12
    else:  # season
        f = SEASON_FIRST[SEASONS[m]]
        first, months = ((y - 1 if m != 12 else y), 12) if f == 12 else (y, f), 3
    end_m = first[0] * 12 + first[1] - 1 + months
    return seconds_of((first[0], first[1], 1, 0, 0, 0.0), cal), seconds_of((end_m // 12, end_m % 12 + 1, 1, 0, 0, 0.0), cal)


def partial_periods(steps: list[Step], period: str, calendar: str | None) -> list[str]:
    """Labels of the month/season/year/day/hour periods the steps cover only in part: the data start after the period
    starts, or end before it ends, by more than the steps' usual spacing (a mid-month monthly value is a whole month;
    a January-February 'DJF' is not a season)."""
    kind, _, unit = parse_period(period)
    keys = [s.key for s in steps if s.key is not None]
    if kind != "named" or unit == "all" or len(keys) < 2 or len(keys) != len(steps):
        return []
    cal = canonical_calendar(calendar)
    stamps = [seconds_of(k, cal) for k in keys]
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a)
    if not gaps:
        return []
    spacing = gaps[len(gaps) // 2] * 1.01
    out: list[str] = []
    by_label: dict[str, list[float]] = {}
    for k, t in zip(keys, stamps, strict=True):
        by_label.setdefault(_label(unit, k), []).append(t)
    for label, times in by_label.items():
        k = keys[stamps.index(times[0])]
        start, end = _bounds(unit, k, cal)
        if times[0] - start > spacing or end - times[-1] > spacing:
            out.append(label)
    return out
