"""gdaldem color-relief: 3 Byte bands (RGB, 4 with `alpha`) without nodata, coloured per pixel from a ramp of
[value | "NN%" | "nv", r, g, b(, a)] entries or a named ramp (NAMED_RAMPS, in percentages of the band's min..max)
by interpolation, nearest entry or exact entry (unmatched: 0,0,0,0), as GDAL >= 3.9.2 does.

Color-relief follows GDAL >= 3.9.2 (OSGeo/gdal#10596): older gdaldem (3.6 in Debian 12) rounded interpolated
colours with +0.45 instead of +0.5, and its exact_color_entry mode missed most exact matches. Percentages take the
exact min and max of the band's valid pixels (a first pass, tile by tile). Each pixel's colour depends on its value
only, so the output is written tile by tile, window by window, like the other terrain products (terrain.py).
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
from gdal_mcp.engine.progress import Progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import output_tiles, write_tiles
from gdal_mcp.engine.raster.windows import iter_windows
from gdal_mcp.errors import GdalMcpError

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
# Output pixels per window (tests lower it to exercise many windows) and the output tiles' block.
WINDOW_PIXELS = 1024 * 1024
OUTPUT_BLOCK = (256, 256)

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
            data = ds.read(spec.band, window=Window(col + w.col_off, row + w.row_off, w.width, w.height))
            missing = np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.shape, dtype=bool)
            if spec.nodata is not None and not math.isnan(spec.nodata):
                missing |= data == spec.nodata
            valid = data[~missing].astype(np.float64)
            if valid.size:
                low, high = min(low, float(valid.min())), max(high, float(valid.max()))
    return low, high


def _band_range(src: str, ds: Any, band: int, nodata: float | None) -> tuple[float, float]:
    """Exact min and max of the band's valid pixels (what gdaldem's ComputeStatistics gives), tile by tile."""
    low, high = math.inf, -math.inf
    plan = tiles.plan(ds.width, ds.height, bytes_per_pixel=8)
    specs = [RangeTile(path=src, band=band, nodata=nodata, window=t.window) for t in plan]
    with tiles.mapped(range_tile, specs) as done:
        for _, (lo, hi) in done:
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


def color_relief(
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
    """Write the color-relief of band `band` of `ds` (opened from `src`) into `dst`, tile by tile."""
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
        source=ds,
    )
