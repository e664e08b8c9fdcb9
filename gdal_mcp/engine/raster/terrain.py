"""Terrain products from a DEM, like gdaldem: hillshade, slope, aspect, roughness, TRI and TPI.

The formulas are gdaldem's defaults (GDAL 3.x): Horn's 3x3 gradient for hillshade, slope and aspect,
Riley's TRI (the default since GDAL 3.3), TPI as the centre minus the mean of its 8 neighbours,
roughness as the largest difference within the 3x3 window. Output, nodata and edges follow gdaldem:

- hillshade is Byte with nodata 0 (lit pixels are 1..255); the others are Float32 with nodata -9999;
- a pixel is nodata when its centre is nodata, and, unless `compute_edges`, when any neighbour is nodata
  or lies outside the raster (so the outermost rows and columns are nodata);
- with `compute_edges` missing neighbours are replaced by the centre value, and neighbours beyond the
  raster are extrapolated linearly (2·edge − next) as gdaldem does (its corners reuse the edge column);
- aspect is an azimuth (0 = north, clockwise) and flat pixels are nodata.

Two deliberate differences: NaN elevations always count as nodata (gdaldem lets NaN flow into the
result when the band declares no nodata), and arithmetic is done in float64 (gdaldem reads Float32).
The raster is streamed window by window; each window is read with a one-pixel halo.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import creation_options as normalize_options
from gdal_mcp.engine.raster.output import (
    infer_driver,
    summarize,
    write_windows,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

Product = Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi"]
PRODUCTS: tuple[str, ...] = ("hillshade", "slope", "aspect", "roughness", "tri", "tpi")
# Metres per degree: gdaldem's documented -s value for lon/lat DEMs with elevations in metres.
METRES_PER_DEGREE = 111120.0
TERRAIN_NODATA = -9999.0
HILLSHADE_NODATA = 0
# Output pixels per window (tests lower it to exercise many windows); the 3x3 arithmetic holds ~10
# float64 arrays of this size at once.
WINDOW_PIXELS = 1024 * 1024
OUTPUT_BLOCK = (256, 256)

# The 3x3 neighbourhood as gdaldem numbers it:  0 1 2 / 3 4 5 / 6 7 8 (row 0 is north).
Neighbours = list[np.ndarray]


# ---------------------------------------------------------------------------------------------- writing

# ---------------------------------------------------------------------------------------------- formulas

def _horn(n: Neighbours, ewres: float, nsres: float) -> tuple[np.ndarray, np.ndarray]:
    """gdaldem's Horn gradient: x = -dz/d(column), y = -dz/d(row), each over one step of the geotransform
    (with north-up rasters nsres < 0, so y is dz/d(north))."""
    x = ((n[0] + 2 * n[3] + n[6]) - (n[2] + 2 * n[5] + n[8])) / (8 * ewres)
    y = ((n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2])) / (8 * nsres)
    return x, y


def _slope(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _horn(n, p["ewres"], p["nsres"])
    gradient = np.hypot(x, y) * p["z"]
    if p["percent"]:
        return 100.0 * gradient
    return np.degrees(np.arctan(gradient))


def _hillshade(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _horn(n, p["ewres"], p["nsres"])
    x, y = x * p["z"], y * p["z"]
    alt, az = math.radians(p["altitude"]), math.radians(p["azimuth"])
    cang = (math.sin(alt) - (y * math.cos(az) - x * math.sin(az)) * math.cos(alt)) / np.sqrt(1 + x * x + y * y)
    return np.where(cang <= 0, 1.0, 1.0 + 254.0 * cang)


def _aspect(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    dx = (n[2] + 2 * n[5] + n[8]) - (n[0] + 2 * n[3] + n[6])
    dy = (n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2])
    # gdaldem turns the angle into Float32 before making it an azimuth; doing the same keeps a
    # due-north pixel at 0 rather than 359.99999.
    angle = np.degrees(np.arctan2(dy, -dx)).astype(np.float32)
    azimuth = np.where(angle > 90, np.float32(450) - angle, np.float32(90) - angle)
    azimuth[azimuth == 360] = 0
    azimuth[(dx == 0) & (dy == 0)] = np.nan  # flat: nodata
    return azimuth


def _tri(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    """Riley et al. (1999): square root of the summed squared differences to the centre."""
    return np.sqrt(sum(((n[k] - n[4]) ** 2 for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])))


def _tpi(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return n[4] - sum((n[k] for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])) / 8


def _roughness(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return np.maximum.reduce(n) - np.minimum.reduce(n)


FORMULAS: dict[str, Callable[[Neighbours, dict[str, Any]], np.ndarray]] = {
    "hillshade": _hillshade, "slope": _slope, "aspect": _aspect, "tri": _tri, "tpi": _tpi, "roughness": _roughness,
}


def _apply(padded: np.ndarray, product: str, params: dict[str, Any], compute_edges: bool) -> np.ndarray:
    """The product for the interior of `padded` (a block with a one-pixel ring); NaN marks nodata in and out."""
    h, w = padded.shape[0] - 2, padded.shape[1] - 2
    n = [padded[r:r + h, c:c + w] for r in range(3) for c in range(3)]
    missing = np.isnan(padded)
    if not missing.any():
        invalid = None
    elif compute_edges:
        # gdaldem: a missing neighbour takes the centre's value.
        n = [np.where(missing[k // 3:k // 3 + h, k % 3:k % 3 + w], n[4], v) if k != 4 else v for k, v in enumerate(n)]
        invalid = missing[1:-1, 1:-1]
    else:
        invalid = missing[0:h, 0:w].copy()
        for k in range(1, 9):
            invalid |= missing[k // 3:k // 3 + h, k % 3:k % 3 + w]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = FORMULAS[product](n, params)
    out = np.asarray(out, dtype=np.float64)
    if invalid is not None:
        out[invalid] = np.nan
    return out


# ---------------------------------------------------------------------------------------------- windows

def _read(ds: Any, band: int, window: Window, nodata: float | None) -> np.ndarray:
    data = ds.read(band, window=window)
    missing = np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.shape, dtype=bool)
    if nodata is not None and not math.isnan(nodata):
        missing |= data == nodata
    out = data.astype(np.float64)
    out[missing] = np.nan
    return out


def _window_values(ds: Any, band: int, w: Window, nodata: float | None, product: str, params: dict[str, Any],
                   compute_edges: bool) -> np.ndarray:
    """Product values (NaN = nodata) for output window `w`, read with a one-pixel halo."""
    width, height = ds.width, ds.height
    col, row, wh, ww = int(w.col_off), int(w.row_off), int(w.height), int(w.width)
    if width < 2 or height < 2:
        return np.full((wh, ww), np.nan)  # every pixel is an edge pixel and gdaldem cannot extrapolate
    r0, r1 = max(0, row - 1), min(height, row + wh + 1)
    c0, c1 = max(0, col - 1), min(width, col + ww + 1)
    padded = np.full((wh + 2, ww + 2), np.nan)
    pr, pc = r0 - (row - 1), c0 - (col - 1)
    padded[pr:pr + r1 - r0, pc:pc + c1 - c0] = _read(ds, band, Window(c0, r0, c1 - c0, r1 - r0), nodata)
    left, right = col == 0, col + ww == width
    if compute_edges:
        # Columns beyond the raster: linear extrapolation (NaN if either source pixel is nodata).
        if left:
            padded[:, 0] = 2 * padded[:, 1] - padded[:, 2]
        if right:
            padded[:, -1] = 2 * padded[:, -2] - padded[:, -3]
    out = _apply(padded, product, params, compute_edges)
    if compute_edges:
        # The first and last raster rows: gdaldem extrapolates the missing row and repeats the edge
        # column at the corners (instead of extrapolating it).
        for top, at_edge, centre, inner in ((True, row == 0, 1, 2), (False, row + wh == height, wh, wh - 1)):
            if not at_edge:
                continue
            rows = padded[[centre, inner]].copy()
            if left:
                rows[:, 0] = rows[:, 1]
            if right:
                rows[:, -1] = rows[:, -2]
            beyond = 2 * rows[0] - rows[1]
            block = np.stack([beyond, rows[0], rows[1]] if top else [rows[1], rows[0], beyond])
            out[centre - 1] = _apply(block, product, params, compute_edges)[0]
    return out


# ---------------------------------------------------------------------------------------------- checks

def _check_number(name: str, value: float, *, low: float | None = None, high: float | None = None,
                  positive: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or (positive and v <= 0) or (low is not None and v < low) or (high is not None and v > high):
        need = "a positive number" if positive else f"a number between {low:g} and {high:g}" if low is not None \
            and high is not None else "a finite number"
        raise GdalMcpError("invalid-argument", f"{name} must be {need} (got {value!r})")
    return v


def _scale(ds: Any, scale: float | None, product: str, warnings: list[str]) -> float:
    """gdaldem's -s: vertical units per horizontal unit; 111120 by default on lon/lat DEMs."""
    uses_scale = product in ("hillshade", "slope")
    if scale is not None:
        value = _check_number("scale", scale, positive=True)
        if not uses_scale:
            warnings.append(f"scale only changes hillshade and slope; it has no effect on {product}")
        return value
    crs = ds.crs
    if not uses_scale or crs is None or not crs.to_wkt():
        return 1.0
    if crs.is_geographic:
        warnings.append(f"the DEM's CRS is geographic (degrees): using scale={METRES_PER_DEGREE:g} metres per degree "
                        "(gdaldem's suggested -s) so that elevations are taken as metres; pass scale= to override "
                        "(370400 for elevations in feet), or reproject the DEM to a projected CRS for exact distances")
        return METRES_PER_DEGREE
    try:
        unit, factor = crs.linear_units_factor
    except Exception:  # noqa: BLE001 - a CRS without linear units: nothing to suggest
        return 1.0
    if factor and not math.isclose(factor, 1.0):
        warnings.append(f"the CRS's unit is {unit} ({factor:g} m), not metre; {product} assumes elevations are in "
                        f"{unit} too. If they are in metres pass scale={factor:g}")
    return 1.0


def _unused(product: str, z_factor: float, azimuth: float, altitude: float, slope_units: str,
            warnings: list[str]) -> None:
    if z_factor != 1.0 and product not in ("hillshade", "slope"):
        reason = "aspect does not depend on it" if product == "aspect" else \
            f"{product} is in the DEM's elevation units, as gdaldem computes it"
        warnings.append(f"z_factor only applies to hillshade and slope; ignored ({reason})")
    if (azimuth != 315.0 or altitude != 45.0) and product != "hillshade":
        warnings.append(f"azimuth and altitude only apply to hillshade; ignored for {product}")
    if slope_units != "degrees" and product != "slope":
        warnings.append(f"slope_units only applies to slope; ignored for {product}")


# ---------------------------------------------------------------------------------------------- terrain

@wrap_gdal_errors
def terrain(src: str, dst: str, *, product: Product, band: int = 1, z_factor: float = 1.0, azimuth: float = 315.0,
            altitude: float = 45.0, slope_units: Literal["degrees", "percent"] = "degrees", scale: float | None = None,
            compute_edges: bool = False, format: str | None = None, creation_options: dict[str, Any] | None = None,
            progress: Progress = no_progress) -> tuple[RasterSummary, list[str]]:
    """Compute one terrain product of band `band` of the DEM `src` into `dst`, as gdaldem does."""
    warnings: list[str] = []
    if product not in PRODUCTS:
        raise GdalMcpError("invalid-argument", f"unknown product {product!r}; use one of {', '.join(PRODUCTS)}")
    if slope_units not in ("degrees", "percent"):
        raise GdalMcpError("invalid-argument", f"slope_units must be 'degrees' or 'percent' (got {slope_units!r})")
    z = _check_number("z_factor", z_factor, positive=True)
    az = _check_number("azimuth", azimuth, low=0.0, high=360.0)
    alt = _check_number("altitude", altitude, low=0.0, high=90.0)
    _unused(product, z, az, alt, slope_units, warnings)
    driver = infer_driver(dst, format)
    if driver in ("VRT", "MEM"):
        raise GdalMcpError("unsupported", f"terrain cannot write {driver}; write GTiff or COG instead")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if not 1 <= band <= ds.count:
            raise GdalMcpError("invalid-argument", f"band {band} does not exist; the raster has {ds.count} band(s)")
        t = ds.transform
        if t.b or t.d:
            raise GdalMcpError("unsupported", "the DEM's geotransform is rotated or sheared; warp it to a north-up "
                               "grid first (raster_reproject)")
        if ds.transform.is_identity and not (ds.crs and ds.crs.to_wkt()):
            warnings.append("the DEM has no georeferencing: pixels are taken as 1 x 1 elevation units")
        params = {"ewres": t.a, "nsres": t.e, "z": z, "azimuth": az, "altitude": alt,
                  "percent": slope_units == "percent", "scale": _scale(ds, scale, product, warnings)}
        params["ewres"] *= params["scale"]
        params["nsres"] *= params["scale"]
        nodata = ds.nodatavals[band - 1]
        hillshade = product == "hillshade"
        out_dtype = "uint8" if hillshade else "float32"
        out_nodata = float(HILLSHADE_NODATA) if hillshade else TERRAIN_NODATA

        def compute(w: Window) -> np.ndarray:
            values = _window_values(ds, band, w, nodata, product, params, compute_edges)
            missing = np.isnan(values)
            if hillshade:
                values = np.floor(np.clip(values, 1, 255) + 0.5)  # GDAL rounds half up when writing Byte
            values[missing] = out_nodata
            return values.astype(out_dtype)

        write_windows(dst, driver, options, width=ds.width, height=ds.height, count=1, dtype=out_dtype, crs=ds.crs,
                      transform=ds.transform, nodata=out_nodata, compute=compute, progress=progress, what=product,
                      window_pixels=WINDOW_PIXELS, block=OUTPUT_BLOCK)
    return summarize(dst), warnings
