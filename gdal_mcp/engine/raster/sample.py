"""Pixel values at points (gdallocationinfo), reading one small window per group of nearby points."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.region import crs_text, points_in_raster_crs, read_bands, select_bands
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import PointSample, SampleResult

MAX_POINTS = 10_000
GROUP_PIXELS = 256 * 256  # the largest window read for one group of points


def _check_points(points) -> list[tuple[float, float]]:
    if not isinstance(points, list | tuple) or not points:
        raise GdalMcpError("invalid-argument", "points must be a non-empty list of [x, y] pairs")
    if len(points) > MAX_POINTS:
        raise GdalMcpError(
            "invalid-argument", f"at most {MAX_POINTS} points per call; got {len(points)} (split them into several calls)"
        )
    out: list[tuple[float, float]] = []
    for i, p in enumerate(points):
        try:
            x, y = (float(v) for v in p)
        except (TypeError, ValueError):
            raise GdalMcpError("invalid-argument", f"point {i} is {p!r}; each point must be [x, y]") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise GdalMcpError("invalid-argument", f"point {i} ({x}, {y}) is not finite")
        out.append((x, y))
    return out


@wrap_gdal_errors
def sample(
    path: str,
    points: list[tuple[float, float]],
    points_crs: str | None = None,
    bands: list[int] | None = None,
    progress: Progress = no_progress,
) -> SampleResult:
    """Values of `bands` at each point, like gdallocationinfo -geoloc.

    Points are in `points_crs` (default: the raster's CRS) and are echoed as given; row/col are those of
    the pixel containing the point (floor of the inverse geotransform). Nodata, masked and NaN values are
    null; points off the raster have inside=false and null row, col and values.
    """
    pts = _check_points(points)
    with open_raster(path) as ds:
        indexes = select_bands(ds, bands)
        xs, ys, _ = points_in_raster_crs(
            ds, [p[0] for p in pts], [p[1] for p in pts], points_crs, argument="points_crs", points="points", raster="raster"
        )
        try:
            inverse = ~ds.transform
            if not all(math.isfinite(v) for v in tuple(inverse)[:6]):
                raise ValueError("the inverse overflows")  # e.g. a pixel size of 5e-324
        except Exception:  # noqa: BLE001 - a degenerate geotransform
            raise GdalMcpError(
                "invalid-argument", "the raster's geotransform cannot be inverted, so points cannot be placed on it"
            ) from None

        # Pixel of each point; points grouped by tile so that each group costs one small read.
        bh, bw = ds.block_shapes[0] if ds.block_shapes else (256, 256)
        if bh * bw > GROUP_PIXELS:
            bh, bw = min(bh, 256), min(bw, 256)
        pixels: list[tuple[int, int] | None] = []
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if not (math.isfinite(x) and math.isfinite(y)):
                pixels.append(None)
                continue
            c, r = inverse @ (x, y)
            col, row = math.floor(c), math.floor(r)
            if 0 <= col < ds.width and 0 <= row < ds.height:
                pixels.append((row, col))
                groups.setdefault((row // bh, col // bw), []).append(i)
            else:
                pixels.append(None)

        values: dict[int, list[float | None]] = {}
        for gi, members in enumerate(groups.values()):
            rows = [pixels[i][0] for i in members]  # type: ignore[index]
            cols = [pixels[i][1] for i in members]  # type: ignore[index]
            r0, c0 = min(rows), min(cols)
            window = Window(c0, r0, max(cols) - c0 + 1, max(rows) - r0 + 1)
            chunk = read_bands(ds, indexes, window=window, masked=True)
            data = np.ma.getdata(chunk)
            mask = np.ma.getmaskarray(chunk)
            for i, row, col in zip(members, rows, cols, strict=True):
                px = data[:, row - r0, col - c0]
                bad = mask[:, row - r0, col - c0]
                values[i] = [
                    None if m or (isinstance(v, np.floating) and np.isnan(v)) else float(v) for v, m in zip(px, bad, strict=True)
                ]
            progress((gi + 1) / len(groups), f"sample: window {gi + 1}/{len(groups)}")

        samples = []
        for i, (x, y) in enumerate(pts):
            cell = pixels[i]
            if cell is None:
                samples.append(PointSample(x=x, y=y, inside=False, values=[None] * len(indexes)))
            else:
                samples.append(PointSample(x=x, y=y, row=cell[0], col=cell[1], inside=True, values=values[i]))
        warnings = []
        outside = sum(1 for p in pixels if p is None)
        if outside:
            b = ds.bounds
            warnings.append(
                f"{outside} of {len(pts)} point(s) lie outside the raster, whose bounds are "
                f"[{b.left}, {b.bottom}, {b.right}, {b.top}] in {crs_text(ds.crs)}"
                + ("" if points_crs is None else f" (points were given in {points_crs})")
            )
        return SampleResult(path=path, crs=crs_label(ds.crs), bands=indexes, points=samples, warnings=warnings)


# ---------------------------------------------------------------------------------------------- a point layer


def values_at(ds: Any, indexes: list[int], rows: np.ndarray, cols: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Values (n, bands) of `dtype` and a null mask (n, bands) at pixels (rows, cols), all inside the raster.

    Points are grouped by tile (as `sample` groups them), so each group costs one small windowed read.
    """
    n = rows.size
    values = np.zeros((n, len(indexes)), dtype=dtype)
    null = np.ones((n, len(indexes)), dtype=bool)
    if n == 0:
        return values, null
    bh, bw = ds.block_shapes[0] if ds.block_shapes else (256, 256)
    if bh * bw > GROUP_PIXELS:
        bh, bw = min(bh, 256), min(bw, 256)
    keys = (rows // bh) * (ds.width // bw + 1) + cols // bw
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    for members in np.split(order, bounds):
        r, c = rows[members], cols[members]
        r0, c0 = int(r.min()), int(c.min())
        window = Window(c0, r0, int(c.max()) - c0 + 1, int(r.max()) - r0 + 1)
        chunk = read_bands(ds, indexes, window=window, masked=True)
        data = np.ma.getdata(chunk)[:, r - r0, c - c0].T
        bad = np.ma.getmaskarray(chunk)[:, r - r0, c - c0].T
        if data.dtype.kind == "f":
            bad = bad | np.isnan(data)
        values[members] = data
        null[members] = bad
    return values, null
