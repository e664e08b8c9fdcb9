"""Ground area (m²) of a raster's pixels, shared by class areas, thresholds, area weights and zonal statistics.

- projected CRS: |a*e - b*d| of the geotransform, in the CRS's linear unit squared, converted to m²
  (the map area: true on an equal-area projection, inflated by 1/cos²(lat) on Mercator, which is warned);
- geographic CRS: the geodesic area of one pixel on the CRS's ellipsoid (pyproj.Geod's
  polygon_area_perimeter of its corners, with points along its top and bottom edges), computed once per
  row, since on a north-up (or x-sheared) grid every pixel of a row has the same latitudes and so the same
  area. A grid rotated so that latitude changes along a row gets each pixel's area from the local scale at
  its centre (a close approximation);
- no CRS: no areas (counts and fractions only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.errors import GdalMcpError

EDGE_POINTS = 9  # points along a pixel's top and bottom edges (corners included)
M2_PER_HA = 10_000.0


@dataclass
class PixelAreas:
    """Ground area (m²) of the pixels of one raster: `for_window(w)` broadcasts to the window's (h, w)."""

    method: str  # "projected", "geodesic" or "none"
    transform: Any
    height: int
    constant: float | None = None  # projected: every pixel has this area
    geod: Any = None
    deg_per_unit: float = 1.0
    per_pixel: bool = False  # geographic grid rotated so that latitude changes along a row
    warnings: list[str] = field(default_factory=list)
    _rows: np.ndarray | None = None

    def for_window(self, window: Window) -> np.ndarray | None:
        """Areas in m² for the pixels of `window`: shape (1, 1), (h, 1) or (h, w); None without a CRS."""
        if self.method == "none":
            return None
        if self.method == "projected":
            return np.full((1, 1), self.constant)
        r0, h = int(window.row_off), int(window.height)
        if self.per_pixel:
            return self._local_scale(window)
        return self.rows(r0, r0 + h)[:, None]

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Geodesic area of one pixel of each row in [start, stop) (computed once per row, then cached)."""
        if self._rows is None:
            self._rows = np.full(self.height, np.nan)
        part = self._rows[start:stop]
        todo = np.flatnonzero(np.isnan(part))
        if todo.size:
            lons, lats = self.outlines(start + todo)
            for i, lon, lat in zip(todo, lons, lats, strict=True):
                area, _ = self.geod.polygon_area_perimeter(lon, lat)
                part[i] = abs(float(area))
        return part

    def outlines(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lon/lat outline (degrees) of the pixel at column 0 of each row: its corners, with EDGE_POINTS points
        along its top and bottom edges so that they follow the parallels (a geodesic between two corners
        bulges poleward: 5e-6 of a 0.5-degree pixel's area; 1e-7 with the points)."""
        t = self.transform
        steps = np.linspace(0.0, 1.0, EDGE_POINTS)
        cols = np.concatenate([steps, steps[::-1]])[None, :]
        r = rows[:, None] + np.concatenate([np.zeros(EDGE_POINTS), np.ones(EDGE_POINTS)])[None, :]
        lons = (t.a * cols + t.b * r + t.c) * self.deg_per_unit
        lats = np.clip((t.d * cols + t.e * r + t.f) * self.deg_per_unit, -90.0, 90.0)
        return lons, lats

    def _local_scale(self, window: Window) -> np.ndarray:
        """Per pixel of a rotated geographic grid: |det| (deg²) times the meridian and parallel scales at its
        centre latitude."""
        t = self.transform
        h, w = int(window.height), int(window.width)
        cols = np.arange(w) + int(window.col_off) + 0.5
        rows = np.arange(h)[:, None] + int(window.row_off) + 0.5
        lat = np.radians(np.clip((t.d * cols + t.e * rows + t.f) * self.deg_per_unit, -90, 90))
        a, f = self.geod.a, self.geod.f
        e2 = f * (2 - f)
        s2 = 1 - e2 * np.sin(lat) ** 2
        meridian = a * (1 - e2) / s2**1.5
        parallel = a / np.sqrt(s2) * np.cos(lat)
        det = abs(t.a * t.e - t.b * t.d) * self.deg_per_unit**2
        return det * (math.pi / 180) ** 2 * meridian * parallel


def pixel_areas(ds: Any) -> PixelAreas:
    """How to compute the ground area of `ds`'s pixels (see the module docstring)."""
    t = ds.transform
    if ds.crs is None or not ds.crs.to_wkt():
        return PixelAreas(
            "none",
            t,
            ds.height,
            warnings=[
                "the raster has no CRS: pixel areas are unknown, so only counts and fractions are given (area_m2 is "
                "null); assign a CRS with raster_edit to get areas"
            ],
        )
    from pyproj import CRS

    crs = CRS.from_wkt(ds.crs.to_wkt())
    if crs.is_geographic:
        geod = crs.get_geod()
        if geod is None:
            raise GdalMcpError(
                "unsupported", "the raster's geographic CRS has no ellipsoid, so geodesic pixel areas cannot be computed"
            )
        unit = crs.axis_info[0].unit_conversion_factor if crs.axis_info else math.pi / 180
        return PixelAreas(
            "geodesic",
            t,
            ds.height,
            geod=geod,
            deg_per_unit=math.degrees(unit),
            per_pixel=abs(t.d) > 1e-12 * max(abs(t.a), abs(t.e)),
        )
    try:
        _, factor = ds.crs.linear_units_factor
    except Exception:  # noqa: BLE001 - a CRS with no linear unit
        factor = 1.0
    warnings = []
    method = (crs.coordinate_operation.method_name if crs.coordinate_operation else "") or ""
    if "mercator" in method.lower() and "transverse" not in method.lower():
        warnings.append(
            f"the raster's CRS is a Mercator projection ({crs.name}): areas are map areas, which "
            "exceed true ground areas by 1/cos²(latitude); reproject to an equal-area CRS (e.g. "
            "EPSG:6933) or use a lon/lat raster for true areas"
        )
    return PixelAreas("projected", t, ds.height, constant=abs(t.a * t.e - t.b * t.d) * factor * factor, warnings=warnings)
