"""Class areas: per value of a categorical band, its pixel count, ground area and fraction, streamed.

Pixel areas (`PixelAreas`, shared with zonal statistics):

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster import region
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
from gdal_mcp.engine.raster.stats import reduction_windows
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import BandCategories, CategoriesResult, ClassArea

MAX_CLASSES = 10_000
EDGE_POINTS = 9  # points along a pixel's top and bottom edges (corners included)
M2_PER_HA = 10_000.0


# ---------------------------------------------------------------------------------------------- pixel areas


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


# ---------------------------------------------------------------------------------------------- class tallies


@dataclass
class ClassTally:
    """Per value: pixel count and summed area, merged chunk by chunk."""

    label: str
    counts: dict[Any, int] = field(default_factory=dict)
    areas: dict[Any, float] = field(default_factory=dict)
    invalid: int = 0

    def add(self, data: np.ndarray, invalid: np.ndarray, areas: np.ndarray | None) -> None:
        """Count the valid pixels of a 2-D chunk (`invalid`: nodata/masked/NaN), with their areas when known."""
        self.invalid += int(np.count_nonzero(invalid))
        valid = ~invalid
        values = data[valid]
        if values.size == 0:
            return
        # One area for every pixel (projected): counts times it, exactly; else each pixel's own area.
        constant = None if areas is None or areas.size != 1 else float(areas.flat[0])
        weights = None if areas is None or constant is not None else np.broadcast_to(areas, data.shape)[valid]
        sums: np.ndarray | None
        if values.dtype.kind in "ub" and values.dtype.itemsize <= 2:
            counts = np.bincount(values, minlength=1)
            keys = np.flatnonzero(counts)
            sums = np.bincount(values, weights=weights)[keys] if weights is not None else None
            counts = counts[keys]
        else:
            keys, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
            sums = np.bincount(inverse.ravel(), weights=weights) if weights is not None else None
        if constant is not None:
            sums = counts * constant
        for i, k in enumerate(keys.tolist()):
            self.counts[k] = self.counts.get(k, 0) + int(counts[i])
            if sums is not None:
                self.areas[k] = self.areas.get(k, 0.0) + float(sums[i])
        self._check()

    def merge(self, other: ClassTally) -> None:
        """Add another tally (of another part of the raster): counts exactly, areas in the order merged."""
        self.invalid += other.invalid
        for k, c in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + c
        for k, a in other.areas.items():
            self.areas[k] = self.areas.get(k, 0.0) + a
        self._check()

    def _check(self) -> None:
        if len(self.counts) > MAX_CLASSES:
            raise GdalMcpError(
                "invalid-argument",
                f"{self.label} has more than {MAX_CLASSES} distinct values: it "
                "does not look categorical. Group the values into classes first with "
                "raster_reclassify (ranges -> class values), or use raster_stats without "
                "categorical for continuous data",
            )

    @property
    def valid(self) -> int:
        return sum(self.counts.values())

    def classes(self, with_area: bool) -> list[ClassArea]:
        """One entry per value, in value order."""
        total = self.valid
        total_area = sum(self.areas.values()) if with_area else 0.0
        out = []
        for k in sorted(self.counts):
            area = self.areas.get(k, 0.0) if with_area else None
            out.append(
                ClassArea(
                    value=k,
                    count=self.counts[k],
                    area_m2=area,
                    area_ha=None if area is None else area / M2_PER_HA,
                    fraction=self.counts[k] / total if total else 0.0,
                    area_fraction=(area / total_area if total_area else 0.0) if area is not None else None,
                )
            )
        return out

    def as_json(self, with_area: bool) -> dict[str, dict[str, Any]]:
        """The classes as {value: {count, area_m2, area_ha, fraction}} (zonal statistics' form)."""
        return {
            _key(c.value): {"count": c.count, "area_m2": c.area_m2, "area_ha": c.area_ha, "fraction": c.fraction}
            for c in self.classes(with_area)
        }


def _key(value: Any) -> str:
    """A class value as a mapping key: 3 (not 3.0) for whole numbers."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_categorical_dtype(dtype: np.dtype, band: int) -> None:
    if dtype.kind not in "uifb":
        raise GdalMcpError("unsupported", f"band {band} is {dtype.name}; class areas need real-valued bands")


# ---------------------------------------------------------------------------------------------- tiles


@dataclass(frozen=True)
class CategoriesTile:
    """One tile of the class-area pass (picklable)."""

    path: str
    bands: tuple[int, ...]
    #: (col_off, row_off, width, height) in the raster's pixels
    window: tuple[int, int, int, int]
    #: pixels (all bands) per chunk read inside the tile: the chunk by chunk area sums depend on it
    window_pixels: int


def categories_tile(spec: CategoriesTile) -> list[ClassTally]:
    """Per band, the class counts and areas of one tile, streamed in chunks."""
    bands = list(spec.bands)
    col, row, width, height = spec.window
    with rasterio.Env(GDAL_NUM_THREADS="ALL_CPUS"), open_raster(spec.path) as ds:
        areas = pixel_areas(ds)
        tallies = [ClassTally(f"band {b}") for b in spec.bands]
        block = ds.block_shapes[0] if ds.block_shapes else (256, 256)
        for sub in iter_windows(width, height, block, max(1, spec.window_pixels // len(bands))):
            w = Window(col + sub.col_off, row + sub.row_off, sub.width, sub.height)
            chunk = read_bands(ds, bands, window=w, masked=True)
            pixel = areas.for_window(w)
            for j, tally in enumerate(tallies):
                data = np.ma.getdata(chunk[j])
                invalid = np.ma.getmaskarray(chunk[j])
                if data.dtype.kind == "f":
                    invalid = invalid | np.isnan(data)
                tally.add(data, invalid, pixel)
    return tallies


# ---------------------------------------------------------------------------------------------- raster_stats


@wrap_gdal_errors
def categories(
    path: str,
    bands: list[int] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    progress: Progress = no_progress,
) -> CategoriesResult:
    """Per band and per value: pixel count, area (m², ha) and fraction of the valid pixels, streamed.

    Nodata, masked and NaN pixels are left out. Values are the stored ones (scale/offset not applied).
    """
    with open_raster(path) as ds:
        indexes = list(dict.fromkeys(select_bands(ds, bands)))
        window = bbox_window(ds, bbox, bbox_crs)
        for b in indexes:
            check_categorical_dtype(np.dtype(ds.dtypes[b - 1]), b)
        areas = pixel_areas(ds)
        warnings = list(areas.warnings)
        warnings += [
            f"band {b}: scale {ds.scales[b - 1]} / offset {ds.offsets[b - 1]} are not applied; classes are the stored values"
            for b in indexes
            if (ds.scales[b - 1], ds.offsets[b - 1]) != (1.0, 0.0)
        ]
        tallies = [ClassTally(f"band {b}") for b in indexes]
        bytes_per_pixel = sum(np.dtype(ds.dtypes[b - 1]).itemsize for b in indexes)
        specs = [
            CategoriesTile(path=path, bands=tuple(indexes), window=win, window_pixels=region.DEFAULT_WINDOW_PIXELS)
            for win in reduction_windows(ds, window, bytes_per_pixel)
        ]

        def arrived(results: Iterator[tuple[int, list[ClassTally]]]) -> Iterator[tuple[int, list[ClassTally]]]:
            for k, result in enumerate(results, start=1):
                progress(k / len(specs), f"class areas: tile {k}/{len(specs)}")
                yield result

        # Areas are float sums: merged in tile order, they are the same whichever order the tiles finished in.
        for _, parts in tiles.in_order(arrived(tiles.map_tiles(categories_tile, specs))):
            for tally, part in zip(tallies, parts, strict=True):
                tally.merge(part)
        with_area = areas.method != "none"
        out = []
        for b, tally in zip(indexes, tallies, strict=True):
            if tally.valid == 0:
                warnings.append(f"band {b} has no valid pixels in the area read (all nodata/masked)")
            total_area = sum(tally.areas.values()) if with_area else None
            out.append(
                BandCategories(
                    index=b,
                    dtype=ds.dtypes[b - 1],
                    valid_count=tally.valid,
                    nodata_count=tally.invalid,
                    area_m2=total_area,
                    area_ha=None if total_area is None else total_area / M2_PER_HA,
                    classes=tally.classes(with_area),
                )
            )
        return CategoriesResult(
            path=path,
            crs=crs_label(ds.crs),
            area_method=areas.method,  # type: ignore[arg-type]
            pixel_area_m2=areas.constant,
            window=(int(window.col_off), int(window.row_off), int(window.width), int(window.height)),
            bands=out,
            warnings=warnings,
        )
