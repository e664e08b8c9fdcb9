"""Class areas: per value of a categorical band, its pixel count, ground area and fraction, streamed.

Pixel areas come from engine/raster/pixel_areas.py (`PixelAreas`: geodesic per row on lon/lat grids, planar on
projected ones), shared with thresholds, area weights and zonal statistics.
"""

from __future__ import annotations

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
from gdal_mcp.engine.raster.pixel_areas import M2_PER_HA, pixel_areas
from gdal_mcp.engine.raster.region import bbox_window, read_bands, select_bands
from gdal_mcp.engine.raster.stats import reduction_windows
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import BandCategories, CategoriesResult, ClassArea

MAX_CLASSES = 10_000


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
            tiles.check_stop()
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
        with tiles.mapped(categories_tile, specs) as done:
            for _, parts in tiles.in_order(arrived(done)):
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
