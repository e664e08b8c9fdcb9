"""Thresholds: per value t, the valid pixels above it (value > t) and at or below it (value <= t), with their count,
share of the valid pixels, ground area (m², ha) and share of the valid area. raster_stats tallies them per band,
zonal_stats per zone, chunk by chunk (`ThresholdTally.add`), tiles merged in tile order (`merge`).

Areas are those of engine/raster/pixel_areas.py (geodesic per row on lon/lat grids, planar on projected ones): per
chunk the pixels of each side are counted per row and the counts multiplied by the row's pixel area (per pixel on a
rotated lon/lat grid); on a projected grid the area is the count times the pixel area, once, at the end. Every valid
value is either > t or <= t (NaN is never valid), so at_or_below is the valid count minus above, exactly, and its
area sums the same rows' complements.

Zonal fields are named `<side>_<t>_<measure>`: side `above` or `at_or_below`, t written with `_` for the decimal
point and `m` for a minus sign (`threshold_token`), measure one of THRESHOLD_MEASURES: above_0_3_share for the
share above 0.3, at_or_below_m5_count for the count at or below -5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gdal_mcp.engine.raster.pixel_areas import M2_PER_HA, PixelAreas
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import ThresholdSide, ThresholdStats

MAX_THRESHOLDS = 100
SIDES = ("above", "at_or_below")
#: the zonal fields of each side of each threshold, and whether they are integers
THRESHOLD_MEASURES = (("count", True), ("share", False), ("area_m2", False), ("area_ha", False), ("area_share", False))


def check_thresholds(thresholds: Any) -> list[float]:
    """The thresholds as floats, in the order given, without repeats ([] for None)."""
    if thresholds is None:
        return []
    if not isinstance(thresholds, list | tuple):
        raise GdalMcpError("invalid-argument", "thresholds must be a list of numbers, e.g. thresholds=[0.3]")
    if len(thresholds) > MAX_THRESHOLDS:
        raise GdalMcpError("invalid-argument", f"at most {MAX_THRESHOLDS} thresholds at once; got {len(thresholds)}")
    out: list[float] = []
    for t in thresholds:
        if isinstance(t, bool) or not isinstance(t, int | float | np.number) or not math.isfinite(float(t)):
            raise GdalMcpError("invalid-argument", f"threshold {t!r} is not a finite number (e.g. thresholds=[0.3, 0.6])")
        if float(t) not in out:
            out.append(float(t))
    return out


def threshold_token(t: float) -> str:
    """`t` as a field-name part: 0.3 -> 0_3, -5 -> m5, 100 -> 100, 1e-05 -> 1em05."""
    t = float(t)
    text = str(int(t)) if t.is_integer() and abs(t) < 1e15 else repr(t)
    return text.replace("-", "m").replace("+", "").replace(".", "_")


def field_names(thresholds: list[float]) -> list[tuple[str, bool]]:
    """The zonal fields of `thresholds`, in order, each with whether it holds integers."""
    names = [
        (f"{side}_{threshold_token(t)}_{m}", is_int) for t in thresholds for side in SIDES for m, is_int in THRESHOLD_MEASURES
    ]
    if len({n for n, _ in names}) != len(names):
        raise GdalMcpError(
            "invalid-argument", "two thresholds give the same field name (they differ beyond 17 significant digits); drop one"
        )
    return names


@dataclass
class ThresholdTally:
    """Per threshold: the valid pixels above it (count, summed area); the valid pixels (count, summed area)."""

    thresholds: tuple[float, ...]
    above: np.ndarray = field(init=False)
    above_area: np.ndarray = field(init=False)
    valid: int = 0
    valid_area: float = 0.0
    below_area: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        k = len(self.thresholds)
        self.above = np.zeros(k, dtype=np.int64)
        self.above_area = np.zeros(k)
        self.below_area = np.zeros(k)

    def add(self, data: np.ndarray, valid: np.ndarray, areas: np.ndarray | None) -> None:
        """Tally the pixels of a 2-D chunk where `valid`; `areas` as PixelAreas.for_window gives them: None (no
        CRS), (1, 1) (projected, or a one-row chunk), (h, 1) per row or (h, w) per pixel. On a projected grid the
        areas summed here are not used: `result` takes the counts times the pixel area."""
        n = int(np.count_nonzero(valid))
        if n == 0:
            return
        self.valid += n
        cells = None if areas is None else np.broadcast_to(areas, (data.shape[0], areas.shape[1]))
        rows = valid.sum(axis=1) if cells is not None and cells.shape[1] == 1 else None
        if cells is not None:
            self.valid_area += float((rows * cells[:, 0]).sum()) if rows is not None else float(cells[valid].sum())
        for i, t in enumerate(self.thresholds):
            with np.errstate(invalid="ignore"):
                above = valid & (data > t)
            self.above[i] += int(np.count_nonzero(above))
            if cells is None:
                continue
            if rows is not None:
                up = above.sum(axis=1)
                self.above_area[i] += float((up * cells[:, 0]).sum())  # not `@`: BLAS's order may depend on alignment
                self.below_area[i] += float(((rows - up) * cells[:, 0]).sum())
            else:
                self.above_area[i] += float(cells[above].sum())
                self.below_area[i] += float(cells[valid & ~above].sum())

    def merge(self, other: ThresholdTally) -> None:
        """Add the tally of another part of the raster (areas: in the order merged)."""
        self.valid += other.valid
        self.valid_area += other.valid_area
        self.above += other.above
        self.above_area += other.above_area
        self.below_area += other.below_area

    def _areas(self, areas: PixelAreas | None) -> tuple[float | None, np.ndarray | None, np.ndarray | None]:
        """Valid area, above areas, at-or-below areas (None without a CRS)."""
        if areas is None or areas.method == "none":
            return None, None, None
        if areas.method == "projected":
            assert areas.constant is not None
            return self.valid * areas.constant, self.above * areas.constant, (self.valid - self.above) * areas.constant
        return self.valid_area, self.above_area, self.below_area

    def valid_area_m2(self, areas: PixelAreas | None) -> float | None:
        return self._areas(areas)[0]

    def result(self, areas: PixelAreas | None) -> list[ThresholdStats]:
        """One entry per threshold (raster_stats' form)."""
        total, above_a, below_a = self._areas(areas)

        def side(count: int, area: float | None) -> ThresholdSide:
            return ThresholdSide(
                count=count,
                share=count / self.valid if self.valid else None,
                area_m2=area,
                area_ha=None if area is None else area / M2_PER_HA,
                area_share=(area / total if total else None) if area is not None else None,
            )

        return [
            ThresholdStats(
                threshold=t,
                above=side(int(self.above[i]), None if above_a is None else float(above_a[i])),
                at_or_below=side(self.valid - int(self.above[i]), None if below_a is None else float(below_a[i])),
            )
            for i, t in enumerate(self.thresholds)
        ]

    def fields(self, areas: PixelAreas | None) -> dict[str, Any]:
        """The flat fields (zonal_stats' form): above_<t>_count … at_or_below_<t>_area_share, in field_names order."""
        out: dict[str, Any] = {}
        for entry in self.result(areas):
            token = threshold_token(entry.threshold)
            for name, side in (("above", entry.above), ("at_or_below", entry.at_or_below)):
                for measure, _ in THRESHOLD_MEASURES:
                    out[f"{name}_{token}_{measure}"] = getattr(side, measure)
        return out
