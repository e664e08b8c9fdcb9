"""Terrain products from a DEM, like gdaldem: hillshade, slope, aspect, roughness, TRI, TPI and color-relief.

The formulas are gdaldem's (GDAL 3.x apps/gdaldem_lib.cpp): Horn's 3x3 gradient (or Zevenbergen & Thorne's
4-neighbour one, `algorithm`) for hillshade, slope and aspect; the hillshade modes standard, combined,
multidirectional (four lights weighted by aspect) and igor; Riley's TRI (the default since GDAL 3.3), TPI
as the centre minus the mean of its 8 neighbours, roughness as the largest difference within the 3x3
window. Output, nodata and edges follow gdaldem:

- hillshade is Byte with nodata 0 (lit pixels are 1..255, Igor's as gdaldem computes them 0..255);
  slope, aspect, TRI, TPI and roughness are Float32 with nodata -9999;
- a pixel is nodata when its centre is nodata, and, unless `compute_edges`, when any neighbour is nodata
  or lies outside the raster (so the outermost rows and columns are nodata);
- with `compute_edges` missing neighbours are replaced by the centre value, and neighbours beyond the
  raster are extrapolated linearly (2·edge − next) as gdaldem does (its corners reuse the edge column);
- aspect is an azimuth (0 = north, clockwise), or with `trigonometric` an angle counter-clockwise from
  east; flat pixels are nodata, or 0 with `zero_for_flat`;
- color-relief is 3 Byte bands (RGB, 4 with `alpha`) without nodata, coloured per pixel from a ramp of
  [value | "NN%" | "nv", r, g, b(, a)] entries or a named ramp (NAMED_RAMPS, in percentages of the band's
  min..max) by interpolation, nearest entry or exact entry (unmatched: 0,0,0,0), as GDAL >= 3.9.2 does.

Three deliberate differences: with `zero_for_flat` the edges and nodata pixels stay nodata (-9999; gdaldem
writes 0 there too and declares no nodata, which makes them look like flat or north-facing pixels); NaN
elevations always count as nodata (gdaldem lets NaN flow into the result when the band declares no
nodata); arithmetic is done in float64 (gdaldem reads Float32).
Color-relief follows GDAL >= 3.9.2 (OSGeo/gdal#10596): older gdaldem (3.6 in Debian 12) rounded
interpolated colours with +0.45 instead of +0.5, and its exact_color_entry mode missed most exact matches.
The output grid is split into tiles (engine/tiles.py, a one-pixel halo), each computed by `terrain_tile`
wherever the executor runs it, window by window; each window is read with a one-pixel halo. Every output pixel
depends only on its 3x3 neighbourhood and the raster's own edges, so the tiling never changes a pixel.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine import tiles
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    output_tiles,
    pixel_driver,
    summarize,
    write_tiles,
)
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

Product = Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief"]
PRODUCTS: tuple[str, ...] = ("hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief")
Algorithm = Literal["Horn", "ZevenbergenThorne"]
ALGORITHMS: tuple[str, ...] = ("Horn", "ZevenbergenThorne")
HillshadeMode = Literal["standard", "combined", "multidirectional", "igor"]
HILLSHADE_MODES: tuple[str, ...] = ("standard", "combined", "multidirectional", "igor")
ColorMode = Literal["interpolate", "nearest", "exact"]
COLOR_MODES: tuple[str, ...] = ("interpolate", "nearest", "exact")
#: Named colour ramps, in percentages of the band's range (min..max of its valid pixels) so that they fit any
#: DEM; "nv" (nodata) is transparent black.
NAMED_RAMPS: dict[str, list[list[Any]]] = {
    # matplotlib's "terrain": deep blue, light blue, green, pale yellow, brown, white
    "terrain": [
        ["0%", 51, 51, 153],
        ["15%", 0, 153, 255],
        ["25%", 0, 204, 102],
        ["50%", 255, 255, 153],
        ["75%", 128, 92, 84],
        ["100%", 255, 255, 255],
        ["nv", 0, 0, 0, 0],
    ],
    # hypsometric tints: dark green lowlands, tan, brown, white peaks
    "elevation": [
        ["0%", 0, 97, 71],
        ["20%", 86, 153, 62],
        ["40%", 212, 196, 120],
        ["60%", 168, 120, 66],
        ["80%", 130, 92, 72],
        ["100%", 255, 255, 255],
        ["nv", 0, 0, 0, 0],
    ],
    # depths: navy (deepest) to pale cyan (shallowest)
    "bathymetry": [["0%", 8, 29, 88], ["35%", 37, 52, 148], ["70%", 29, 145, 192], ["100%", 199, 233, 180], ["nv", 0, 0, 0, 0]],
    "gray": [["0%", 0, 0, 0], ["100%", 255, 255, 255], ["nv", 0, 0, 0, 0]],
}
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


def _zevenbergen_thorne(n: Neighbours, ewres: float, nsres: float) -> tuple[np.ndarray, np.ndarray]:
    """gdaldem's Zevenbergen & Thorne (1987) gradient: central differences of the 4 edge neighbours."""
    return (n[3] - n[5]) / (2 * ewres), (n[7] - n[1]) / (2 * nsres)


def _gradient(n: Neighbours, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """x, y as gdaldem's hillshade sees them: gradient x z_factor."""
    gradient = _horn if p["algorithm"] == "Horn" else _zevenbergen_thorne
    x, y = gradient(n, p["ewres"], p["nsres"])
    return x * p["z"], y * p["z"]


def _raw_differences(n: Neighbours, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """gdaldem's aspect differences (no resolution): dx grows eastwards, dy southwards."""
    if p["algorithm"] == "Horn":
        return (n[2] + 2 * n[5] + n[8]) - (n[0] + 2 * n[3] + n[6]), (n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2])
    return n[5] - n[3], n[7] - n[1]


def _slope(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _gradient(n, p)
    gradient = np.hypot(x, y)
    if p["percent"]:
        return 100.0 * gradient
    return np.degrees(np.arctan(gradient))


def _hillshade(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    x, y = _gradient(n, p)
    mode = p["hillshade_mode"]
    alt, az = math.radians(p["altitude"]), math.radians(p["azimuth"])
    sin_alt, cos_alt = math.sin(alt), math.cos(alt)
    xx_plus_yy = x * x + y * y
    if mode == "igor":
        return _igor(n, p, np.sqrt(xx_plus_yy))
    if mode == "multidirectional":
        # USGS OF 92-422: lights at 225, 270, 315 and 360 degrees, weighted by sin^2(aspect - azimuth);
        # the azimuth is not used.
        k = math.cos(math.radians(225)) * cos_alt
        lights = [
            np.maximum(sin_alt + (x - y) * k, 0),
            np.maximum(sin_alt - x * cos_alt, 0),
            np.maximum(sin_alt + (x + y) * k, 0),
            np.maximum(sin_alt - y * cos_alt, 0),
        ]
        w225 = 0.5 * xx_plus_yy - x * y
        weights = [w225, x * x, xx_plus_yy - w225, y * y]
        shade = sum((w * v for w, v in zip(weights, lights, strict=True)), np.zeros_like(x)) / xx_plus_yy
        value = 1.0 + 127.0 * shade / np.sqrt(1 + xx_plus_yy)
        return np.where(xx_plus_yy == 0, 1.0 + 254.0 * sin_alt, value)
    cang = (sin_alt - (y * math.cos(az) - x * math.sin(az)) * cos_alt) / np.sqrt(1 + xx_plus_yy)
    if mode == "combined":
        # slope-combined shading: the angle to the light, darkened by the slope
        cang = 1 - np.arccos(np.clip(cang, -1, 1)) * np.arctan(np.sqrt(xx_plus_yy)) / ((math.pi * math.pi) / 4)
    return np.where(cang <= 0, 1.0, 1.0 + 254.0 * cang)


def _igor(n: Neighbours, p: dict[str, Any], gradient: np.ndarray) -> np.ndarray:
    """Igor Sevastyanov's hillshading (as gdaldem -igor): darker with slope, lighter facing the light."""
    slope_strength = np.degrees(np.arctan(gradient)) / 90
    dx, dy = _raw_differences(n, p)
    aspect = np.arctan2(dy, -dx)
    # DifferenceBetweenAngles(aspect, 3/2 pi - azimuth, 2 pi)
    diff = np.abs(
        np.mod(aspect, 2 * math.pi) - math.fmod(3 * math.pi / 2 - math.radians(p["azimuth"]), 2 * math.pi) % (2 * math.pi)
    )
    diff = np.where(diff > math.pi, 2 * math.pi - diff, diff)
    return 255.0 * (1.0 - slope_strength * (1 - diff / math.pi))


def _aspect(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    dx, dy = _raw_differences(n, p)
    # gdaldem turns the angle into Float32 before making it an azimuth; doing the same keeps a
    # due-north pixel at 0 rather than 359.99999.
    angle = np.degrees(np.arctan2(dy, -dx)).astype(np.float32)
    if p["trigonometric"]:
        aspect = np.where(angle < 0, angle + np.float32(360), angle)
    else:
        aspect = np.where(angle > 90, np.float32(450) - angle, np.float32(90) - angle)
    aspect[aspect == 360] = 0
    aspect[(dx == 0) & (dy == 0)] = 0 if p["zero_for_flat"] else np.nan  # flat: nodata unless zero_for_flat
    return aspect


def _tri(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    """Riley et al. (1999): square root of the summed squared differences to the centre."""
    return np.sqrt(sum(((n[k] - n[4]) ** 2 for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])))


def _tpi(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return n[4] - sum((n[k] for k in (0, 1, 2, 3, 5, 6, 7, 8)), np.zeros_like(n[4])) / 8


def _roughness(n: Neighbours, p: dict[str, Any]) -> np.ndarray:
    return np.maximum.reduce(n) - np.minimum.reduce(n)


FORMULAS: dict[str, Callable[[Neighbours, dict[str, Any]], np.ndarray]] = {
    "hillshade": _hillshade,
    "slope": _slope,
    "aspect": _aspect,
    "tri": _tri,
    "tpi": _tpi,
    "roughness": _roughness,
}


def _apply(padded: np.ndarray, product: str, params: dict[str, Any], compute_edges: bool) -> np.ndarray:
    """The product for the interior of `padded` (a block with a one-pixel ring); NaN marks nodata in and out."""
    h, w = padded.shape[0] - 2, padded.shape[1] - 2
    n = [padded[r : r + h, c : c + w] for r in range(3) for c in range(3)]
    missing = np.isnan(padded)
    if not missing.any():
        invalid = None
    elif compute_edges:
        # gdaldem: a missing neighbour takes the centre's value.
        n = [np.where(missing[k // 3 : k // 3 + h, k % 3 : k % 3 + w], n[4], v) if k != 4 else v for k, v in enumerate(n)]
        invalid = missing[1:-1, 1:-1]
    else:
        invalid = missing[0:h, 0:w].copy()
        for k in range(1, 9):
            invalid |= missing[k // 3 : k // 3 + h, k % 3 : k % 3 + w]
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


def _window_values(
    ds: Any, band: int, w: Window, nodata: float | None, product: str, params: dict[str, Any], compute_edges: bool
) -> np.ndarray:
    """Product values (NaN = nodata) for output window `w`, read with a one-pixel halo."""
    width, height = ds.width, ds.height
    col, row, wh, ww = int(w.col_off), int(w.row_off), int(w.height), int(w.width)
    if width < 2 or height < 2:
        return np.full((wh, ww), np.nan)  # every pixel is an edge pixel and gdaldem cannot extrapolate
    r0, r1 = max(0, row - 1), min(height, row + wh + 1)
    c0, c1 = max(0, col - 1), min(width, col + ww + 1)
    padded = np.full((wh + 2, ww + 2), np.nan)
    pr, pc = r0 - (row - 1), c0 - (col - 1)
    padded[pr : pr + r1 - r0, pc : pc + c1 - c0] = _read(ds, band, Window(c0, r0, c1 - c0, r1 - r0), nodata)
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


# ---------------------------------------------------------------------------------------------- color relief

ColorEntry = tuple[float, int, int, int, int]


@dataclass(frozen=True)
class RangeTile:
    """One tile of the band's min/max pass (color-relief percentages)."""

    path: str
    band: int
    nodata: float | None
    window: tuple[int, int, int, int]


def range_tile(spec: RangeTile) -> tuple[float, float]:
    """(min, max) of the valid pixels of one tile; (inf, -inf) when it has none."""
    low, high = math.inf, -math.inf
    col, row, width, height = spec.window
    with open_raster(spec.path) as ds:
        for w in iter_windows(width, height, ds.block_shapes[spec.band - 1], 4 * WINDOW_PIXELS):
            values = _read(ds, spec.band, Window(col + w.col_off, row + w.row_off, w.width, w.height), spec.nodata)
            valid = values[~np.isnan(values)]
            if valid.size:
                low, high = min(low, float(valid.min())), max(high, float(valid.max()))
    return low, high


def _band_range(src: str, ds: Any, band: int, nodata: float | None) -> tuple[float, float]:
    """Exact min and max of the band's valid pixels (what gdaldem's ComputeStatistics gives), tile by tile."""
    low, high = math.inf, -math.inf
    plan = tiles.plan(ds.width, ds.height, bytes_per_pixel=8)
    specs = [RangeTile(path=src, band=band, nodata=nodata, window=t.window) for t in plan]
    for _, (lo, hi) in tiles.map_tiles(range_tile, specs):
        low, high = min(low, lo), max(high, hi)
    if low > high:
        raise GdalMcpError(
            "invalid-argument",
            "the band has no valid pixels, so percentages in colors cannot be resolved; give absolute elevations instead",
        )
    return low, high


def _parse_colors(
    colors: str | list[Any], nodata: float | None, value_range: Callable[[], tuple[float, float]], warnings: list[str]
) -> list[ColorEntry]:
    """gdaldem's colour text file as a list: [value | "NN%" | "nv", r, g, b(, a)] or a name in NAMED_RAMPS."""
    if isinstance(colors, str) and colors.strip().startswith("["):
        try:  # a JSON list sent as a string
            colors = json.loads(colors)
        except ValueError as e:
            raise GdalMcpError("invalid-argument", f"colors is not valid JSON: {e}") from None
    named = isinstance(colors, str)
    if named:
        key = str(colors).strip().lower()
        if key not in NAMED_RAMPS:
            raise GdalMcpError(
                "invalid-argument",
                f"unknown colour ramp {colors!r}; use one of {', '.join(NAMED_RAMPS)} or a list of [value, r, g, b(, a)] entries",
            )
        colors = NAMED_RAMPS[key]
    if not isinstance(colors, list) or not colors:
        raise GdalMcpError("invalid-argument", "colors must be a ramp name or a non-empty list of [value, r, g, b(, a)]")
    span: tuple[float, float] | None = None
    entries: list[ColorEntry] = []
    numeric = 0
    for k, entry in enumerate(colors):
        if not isinstance(entry, list | tuple) or len(entry) not in (4, 5):
            raise GdalMcpError("invalid-argument", f"colors[{k}] must be [value, r, g, b] or [value, r, g, b, a] (got {entry!r})")
        value, *rgba = entry
        if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in rgba):
            raise GdalMcpError("invalid-argument", f"colors[{k}]: r, g, b and a must be integers 0..255 (got {rgba!r})")
        text = value.strip() if isinstance(value, str) else None
        if text is not None and text.lower() == "nv":
            if nodata is None:
                if not named:
                    warnings.append(f"colors[{k}] is the nodata entry 'nv' but the band has no nodata value; ignored")
                continue
            v = float(nodata)
            numeric -= 1
        elif text is not None and text.endswith("%") and len(text) > 1:
            try:
                pct = float(text[:-1]) / 100.0
            except ValueError:
                pct = math.nan
            if not 0.0 <= pct <= 1.0:
                raise GdalMcpError("invalid-argument", f"colors[{k}]: a percentage must be 0%..100% (got {value!r})")
            if span is None:
                span = value_range()
            v = span[0] + pct * (span[1] - span[0])
        else:
            try:
                v = float(value) if not isinstance(value, bool) else math.nan
            except (TypeError, ValueError):
                v = math.nan
            if not math.isfinite(v):
                raise GdalMcpError(
                    "invalid-argument",
                    f'colors[{k}]: the value must be a number, "NN%" (of the band\'s min..max) or "nv" (nodata) (got {value!r})',
                )
        entries.append((v, rgba[0], rgba[1], rgba[2], rgba[3] if len(rgba) == 4 else 255))
        numeric += 1
    if numeric <= 0:
        raise GdalMcpError("invalid-argument", "colors needs at least one entry with a value besides 'nv'")
    return entries


def _process_colors(entries: list[ColorEntry], nodata: float | None, mode: str) -> list[list[float]]:
    """GDALColorReliefProcessColors: sort (NaN first), add entries just beside the nodata value so that it does
    not bleed into its neighbours, and spread repeated values by a few ulps so that a step stays a step."""
    table = sorted((list(e) for e in entries), key=lambda e: (not math.isnan(e[0]), e[0]))
    initial = len(table)
    repeated = 0
    eps = np.finfo(np.float64).eps
    for i in range(1, initial):
        prev, cur = table[i - 1], table[i]
        if mode != "exact" and nodata is not None and cur[0] == nodata:
            below = math.nextafter(cur[0], -math.inf)
            if below > prev[0]:
                table.append([below, *prev[1:]])
        elif mode != "exact" and nodata is not None and prev[0] == nodata:
            above = math.nextafter(prev[0], math.inf)
            if above < cur[0]:
                table.append([above, *cur[1:]])
        elif repeated == 0 and cur[0] == prev[0]:
            repeated = i
        elif repeated != 0 and cur[0] != prev[0]:
            left = 0.0
            if repeated >= 2:
                lower = table[repeated - 2]
                total, left = cur[0] - lower[0], prev[0] - lower[0]
            else:
                total = cur[0] - prev[0]
            count = i - repeated + 1
            if total > abs(prev[0]) * count * eps:
                multiplier = 0.5 - count * left / total
                shift = abs(prev[0])
                for j in range(repeated - 1, i):
                    table[j][0] += (shift * multiplier) * eps
                    multiplier += 1.0
            repeated = 0
    if len(table) != initial:
        table.sort(key=lambda e: (not math.isnan(e[0]), e[0]))
    return table


def _colorize(values: np.ndarray, table: list[list[float]], mode: str) -> np.ndarray:
    """GDALColorReliefGetRGBA on every pixel: (4, h, w) uint8."""
    vals = np.array([e[0] for e in table], dtype=np.float64)
    rgba = np.array([e[1:] for e in table], dtype=np.float64)
    size = len(vals)
    lower = 1 if math.isnan(vals[0]) else 0
    i = np.searchsorted(vals[lower:], values, side="left") + lower  # first entry >= value (NaN: past the end)
    out = np.zeros((4, *values.shape), dtype=np.float64)
    first, last = i == lower, i == size

    def bands(index: np.ndarray) -> np.ndarray:
        return np.moveaxis(rgba[index], -1, 0)  # (h, w, 4) -> (4, h, w)

    i_lo, i_hi = np.clip(i - 1, 0, size - 1), np.clip(i, 0, size - 1)
    lo, hi = vals[i_lo], vals[i_hi]
    with np.errstate(invalid="ignore", divide="ignore"):
        if mode == "exact":
            index = np.where(lo == values, i_lo, i_hi)
            hit = (lo == values) | (hi == values)
        elif mode == "nearest":
            index = np.where((lo == values) | ((hi != values) & (values - lo < hi - values)), i_lo, i_hi)
            hit = np.ones(values.shape, dtype=bool)
        else:
            ratio = (values - lo) / (hi - lo)
            interp = np.trunc(0.5 + bands(i_lo) + ratio * (bands(i_hi) - bands(i_lo)))
            step = (lo == values) | (hi == values) | np.isnan(lo)
            index = np.where(lo == values, i_lo, i_hi)
            out[:] = np.where(step, bands(index), np.clip(interp, 0, 255))
            hit = None
    if hit is not None:
        out[:] = np.where(hit, bands(index), 0)
    # Below the first or above the last entry: that entry's colour (exact: only when equal).
    for edge, k in ((first, lower), (last, size - 1)):
        if lower and k == lower:
            # gdaldem's search starts after the NaN entry: the first real entry is an interior case there.
            continue
        ok = edge if mode != "exact" else edge & (vals[k] == values)
        out[:, edge] = 0
        out[:, ok] = rgba[k][:, None]
    if lower:
        nan = np.isnan(values)
        out[:, nan] = rgba[0][:, None]
    return out.astype(np.uint8)


# ---------------------------------------------------------------------------------------------- checks


def _check_number(
    name: str, value: float, *, low: float | None = None, high: float | None = None, positive: bool = False
) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or (positive and v <= 0) or (low is not None and v < low) or (high is not None and v > high):
        need = (
            "a positive number"
            if positive
            else f"a number between {low:g} and {high:g}"
            if low is not None and high is not None
            else "a finite number"
        )
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
        warnings.append(
            f"the DEM's CRS is geographic (degrees): using scale={METRES_PER_DEGREE:g} metres per degree "
            "(gdaldem's suggested -s) so that elevations are taken as metres; pass scale= to override "
            "(370400 for elevations in feet), or reproject the DEM to a projected CRS for exact distances"
        )
        return METRES_PER_DEGREE
    try:
        unit, factor = crs.linear_units_factor
    except Exception:  # noqa: BLE001 - a CRS without linear units: nothing to suggest
        return 1.0
    if factor and not math.isclose(factor, 1.0):
        warnings.append(
            f"the CRS's unit is {unit} ({factor:g} m), not metre; {product} assumes elevations are in "
            f"{unit} too. If they are in metres pass scale={factor:g}"
        )
    return 1.0


def _unused(
    product: str, z_factor: float, azimuth: float, altitude: float, slope_units: str, extra: dict[str, Any], warnings: list[str]
) -> None:
    if z_factor != 1.0 and product not in ("hillshade", "slope"):
        reason = (
            "aspect does not depend on it"
            if product == "aspect"
            else "colours follow the elevations as they are"
            if product == "color-relief"
            else f"{product} is in the DEM's elevation units, as gdaldem computes it"
        )
        warnings.append(f"z_factor only applies to hillshade and slope; ignored ({reason})")
    if (azimuth != 315.0 or altitude != 45.0) and product != "hillshade":
        warnings.append(f"azimuth and altitude only apply to hillshade; ignored for {product}")
    elif product == "hillshade" and azimuth != 315.0 and extra["hillshade_mode"] == "multidirectional":
        warnings.append("azimuth is ignored by the multidirectional hillshade (lights at 225, 270, 315 and 360)")
    elif product == "hillshade" and altitude != 45.0 and extra["hillshade_mode"] == "igor":
        warnings.append("altitude is ignored by Igor's hillshade")
    if slope_units != "degrees" and product != "slope":
        warnings.append(f"slope_units only applies to slope; ignored for {product}")
    used_by = {
        "algorithm": ("hillshade", "slope", "aspect"),
        "hillshade_mode": ("hillshade",),
        "zero_for_flat": ("aspect",),
        "trigonometric": ("aspect",),
        "colors": ("color-relief",),
        "color_mode": ("color-relief",),
        "alpha": ("color-relief",),
        "compute_edges": PRODUCTS[:-1],
    }
    defaults = {
        "algorithm": "Horn",
        "hillshade_mode": "standard",
        "zero_for_flat": False,
        "trigonometric": False,
        "colors": None,
        "color_mode": "interpolate",
        "alpha": False,
        "compute_edges": False,
    }
    for name, products in used_by.items():
        if extra[name] != defaults[name] and product not in products:
            warnings.append(f"{name} only applies to {', '.join(products)}; ignored for {product}")


# ---------------------------------------------------------------------------------------------- terrain


@wrap_gdal_errors
def terrain(
    src: str,
    dst: str,
    *,
    product: Product,
    band: int = 1,
    z_factor: float = 1.0,
    azimuth: float = 315.0,
    altitude: float = 45.0,
    slope_units: Literal["degrees", "percent"] = "degrees",
    scale: float | None = None,
    algorithm: Algorithm = "Horn",
    hillshade_mode: HillshadeMode = "standard",
    zero_for_flat: bool = False,
    trigonometric: bool = False,
    colors: str | list[Any] | None = None,
    color_mode: ColorMode = "interpolate",
    alpha: bool = False,
    compute_edges: bool = False,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Compute one terrain product of band `band` of the DEM `src` into `dst`, as gdaldem does."""
    warnings: list[str] = []
    for name, value, allowed in (
        ("product", product, PRODUCTS),
        ("algorithm", algorithm, ALGORITHMS),
        ("hillshade_mode", hillshade_mode, HILLSHADE_MODES),
        ("color_mode", color_mode, COLOR_MODES),
    ):
        if value not in allowed:
            raise GdalMcpError("invalid-argument", f"unknown {name} {value!r}; use one of {', '.join(allowed)}")
    if slope_units not in ("degrees", "percent"):
        raise GdalMcpError("invalid-argument", f"slope_units must be 'degrees' or 'percent' (got {slope_units!r})")
    relief = product == "color-relief"
    if relief and colors is None:
        raise GdalMcpError(
            "invalid-argument",
            "color-relief needs colors: a ramp name ("
            + ", ".join(NAMED_RAMPS)
            + ') or a list such as [[0, 0, 128, 0], [500, 255, 255, 0], ["100%", 255, 255, 255]]',
        )
    z = _check_number("z_factor", z_factor, positive=True)
    az = _check_number("azimuth", azimuth, low=0.0, high=360.0)
    alt = _check_number("altitude", altitude, low=0.0, high=90.0)
    extra = {
        "algorithm": algorithm,
        "hillshade_mode": hillshade_mode,
        "zero_for_flat": zero_for_flat,
        "trigonometric": trigonometric,
        "colors": colors,
        "color_mode": color_mode,
        "alpha": alpha,
        "compute_edges": compute_edges,
    }
    _unused(product, z, az, alt, slope_units, extra, warnings)
    driver = pixel_driver(dst, format, "terrain")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if not 1 <= band <= ds.count:
            raise GdalMcpError("invalid-argument", f"band {band} does not exist; the raster has {ds.count} band(s)")
        nodata = ds.nodatavals[band - 1]
        if relief:
            assert colors is not None
            _color_relief(
                src,
                ds,
                band,
                dst,
                driver,
                options,
                nodata=nodata,
                colors=colors,
                mode=color_mode,
                alpha=alpha,
                warnings=warnings,
                progress=progress,
            )
            return summarize(dst), warnings
        t = ds.transform
        if t.b or t.d:
            raise GdalMcpError(
                "unsupported", "the DEM's geotransform is rotated or sheared; warp it to a north-up grid first (raster_reproject)"
            )
        if ds.transform.is_identity and not (ds.crs and ds.crs.to_wkt()):
            warnings.append("the DEM has no georeferencing: pixels are taken as 1 x 1 elevation units")
        params = {
            "ewres": t.a,
            "nsres": t.e,
            "z": z,
            "azimuth": az,
            "altitude": alt,
            "percent": slope_units == "percent",
            "scale": _scale(ds, scale, product, warnings),
            "algorithm": algorithm,
            "hillshade_mode": hillshade_mode,
            "zero_for_flat": zero_for_flat,
            "trigonometric": trigonometric,
        }
        params["ewres"] *= params["scale"]
        params["nsres"] *= params["scale"]
        hillshade = product == "hillshade"
        out_dtype = "uint8" if hillshade else "float32"
        out_nodata = float(HILLSHADE_NODATA) if hillshade else TERRAIN_NODATA
        plan = output_tiles(driver, options, ds.width, ds.height, bytes_per_pixel=np.dtype(out_dtype).itemsize, halo=1)
        specs = [
            TerrainTile(
                path=src,
                band=band,
                nodata=nodata,
                product=product,
                params=params,
                compute_edges=compute_edges,
                dtype=out_dtype,
                out_nodata=out_nodata,
                window=t.window,
                window_pixels=WINDOW_PIXELS,
                block=OUTPUT_BLOCK,
            )
            for t in plan
        ]
        write_tiles(
            dst,
            driver,
            options,
            width=ds.width,
            height=ds.height,
            count=1,
            dtype=out_dtype,
            crs=ds.crs,
            transform=ds.transform,
            nodata=out_nodata,
            fn=terrain_tile,
            specs=specs,
            windows=[t.window for t in plan],
            progress=progress,
            what=product,
        )
    return summarize(dst), warnings


@dataclass(frozen=True)
class TerrainTile:
    """One output tile of a terrain product (picklable: what a worker needs to compute it)."""

    path: str
    band: int
    nodata: float | None
    product: str
    params: dict[str, Any]
    compute_edges: bool
    dtype: str
    out_nodata: float
    #: (col_off, row_off, width, height) in the DEM's grid
    window: tuple[int, int, int, int]
    window_pixels: int
    block: tuple[int, int]


def terrain_tile(spec: TerrainTile) -> np.ndarray:
    """The (h, w) output pixels of one tile, computed window by window, each window read with its one-pixel halo
    (the raster's own edges handled as gdaldem does, wherever the tile lies)."""
    col, row, width, height = spec.window
    out = np.empty((height, width), dtype=spec.dtype)
    with open_raster(spec.path) as ds:
        for w in iter_windows(width, height, spec.block, spec.window_pixels):
            r0, c0, h, ww = int(w.row_off), int(w.col_off), int(w.height), int(w.width)
            values = _window_values(
                ds, spec.band, Window(col + c0, row + r0, ww, h), spec.nodata, spec.product, spec.params, spec.compute_edges
            )
            missing = np.isnan(values)
            if spec.product == "hillshade":
                # gdaldem hands GDAL a Float32 that GDAL writes to Byte as (GByte)(clamp(v) + 0.5f), in float32
                shade = np.clip(values.astype(np.float32), 0, 255)
                values = np.floor(shade + np.float32(0.5)).astype(np.float64)
            values[missing] = spec.out_nodata
            out[r0 : r0 + h, c0 : c0 + ww] = values.astype(spec.dtype)
    return out


@dataclass(frozen=True)
class ReliefTile:
    """One output tile of color-relief."""

    path: str
    band: int
    table: list[list[float]]
    mode: str
    count: int
    window: tuple[int, int, int, int]
    window_pixels: int
    block: tuple[int, int]


def relief_tile(spec: ReliefTile) -> np.ndarray:
    """The (count, h, w) colours of one tile, window by window."""
    col, row, width, height = spec.window
    out = np.empty((spec.count, height, width), dtype=np.uint8)
    # gdaldem reads Byte, Int16 and UInt16 as integers and everything else as Float32.
    exact_types = ("uint8", "int16", "uint16")
    with open_raster(spec.path) as ds:
        dtype = ds.dtypes[spec.band - 1]
        for w in iter_windows(width, height, spec.block, spec.window_pixels):
            r0, c0, h, ww = int(w.row_off), int(w.col_off), int(w.height), int(w.width)
            data = ds.read(spec.band, window=Window(col + c0, row + r0, ww, h))
            values = data.astype(np.float64) if dtype in exact_types else data.astype(np.float32).astype(np.float64)
            out[:, r0 : r0 + h, c0 : c0 + ww] = _colorize(values, spec.table, spec.mode)[: spec.count]
    return out


def _color_relief(
    src: str,
    ds: Any,
    band: int,
    dst: str,
    driver: str,
    options: dict[str, str],
    *,
    nodata: float | None,
    colors: str | list[Any],
    mode: str,
    alpha: bool,
    warnings: list[str],
    progress: Progress,
) -> None:
    if nodata is not None and math.isnan(nodata):
        nodata = math.nan
    entries = _parse_colors(colors, nodata, lambda: _band_range(src, ds, band, nodata), warnings)
    table = _process_colors(entries, nodata, mode)
    count = 4 if alpha else 3
    plan = output_tiles(driver, options, ds.width, ds.height, bytes_per_pixel=count)
    specs = [
        ReliefTile(
            path=src,
            band=band,
            table=table,
            mode=mode,
            count=count,
            window=t.window,
            window_pixels=max(1, WINDOW_PIXELS // count),
            block=OUTPUT_BLOCK,
        )
        for t in plan
    ]

    def prepare(out: Any) -> None:
        from rasterio.enums import ColorInterp

        out.colorinterp = [ColorInterp.red, ColorInterp.green, ColorInterp.blue, ColorInterp.alpha][:count]

    write_tiles(
        dst,
        driver,
        options,
        width=ds.width,
        height=ds.height,
        count=count,
        dtype="uint8",
        crs=ds.crs,
        transform=ds.transform,
        nodata=None,
        fn=relief_tile,
        specs=specs,
        windows=[t.window for t in plan],
        progress=progress,
        what="color-relief",
        prepare=prepare,
    )
