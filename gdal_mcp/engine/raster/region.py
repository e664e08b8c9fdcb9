"""Which part of a raster a job reads: bands, a bbox as a pixel window, and the chunks to stream."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.bbox import check_bbox, transform_bbox
from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS, count_windows, iter_windows
from gdal_mcp.errors import GdalMcpError


def select_bands(ds, bands: list[int] | None) -> list[int]:
    """1-based band numbers to work on (all when None), validated against the raster."""
    if ds.count == 0:
        raise GdalMcpError(
            "invalid-argument",
            "the dataset has no raster bands; if it is a container "
            "(HDF5, netCDF), use one of its subdatasets listed by raster_info",
        )
    if bands is None:
        return list(range(1, ds.count + 1))
    if not isinstance(bands, list | tuple) or not bands:
        raise GdalMcpError(
            "invalid-argument", f"bands must be a non-empty list of 1-based band numbers (1..{ds.count}); omit it for all bands"
        )
    bad = [b for b in bands if isinstance(b, bool) or not isinstance(b, int | np.integer) or not 1 <= b <= ds.count]
    if bad:
        raise GdalMcpError(
            "invalid-argument", f"band(s) {bad} do not exist; the raster has {ds.count} band(s), numbered 1..{ds.count}"
        )
    return [int(b) for b in bands]


def read_bands(ds, bands: list[int], **kwargs) -> Any:
    """`ds.read(bands, **kwargs)`, also when the bands differ in data type (a VRT may mix them, and rasterio
    refuses to read those together): then band by band, into numpy's common type of theirs (exact)."""
    dtypes = {ds.dtypes[b - 1] for b in bands}
    if len(dtypes) <= 1:
        return ds.read(bands, **kwargs)
    common = np.result_type(*dtypes)
    if kwargs.get("out_shape") is not None:
        kwargs["out_shape"] = (1, *kwargs["out_shape"][-2:])
    parts = [ds.read([b], **kwargs).astype(common) for b in bands]
    return np.ma.concatenate(parts) if kwargs.get("masked") else np.concatenate(parts)


def crs_text(crs) -> str:
    """A short name for a CRS in messages."""
    if crs is None or not crs.to_wkt():
        return "the raster's own coordinates (it has no CRS)"
    return crs_label(crs) or "its CRS"


def points_in_raster_crs(
    ds, xs: list[float], ys: list[float], points_crs: str | None, *, argument: str, points: str, raster: str
) -> tuple[list[float], list[float], Any]:
    """Points given in `points_crs` (the tool's `argument`) as coordinates of the raster's CRS, and that CRS parsed
    (None when not given); invalid-argument when the raster has no CRS or PROJ cannot transform them. `points` and
    `raster` name them in messages ("observers", "DEM")."""
    if points_crs is None:
        return xs, ys, None
    crs = parse_crs(points_crs, argument)
    if ds.crs is None or not ds.crs.to_wkt():
        raise GdalMcpError(
            "invalid-argument",
            f"the {raster} has no CRS, so {points} in {argument} cannot be placed on it; omit {argument} and give "
            f"{'them' if points == 'observers' else points} in the {raster}'s own coordinates",
        )
    if crs != ds.crs:
        from rasterio.warp import transform

        try:
            xs, ys = transform(crs, ds.crs, xs, ys)
        except Exception as e:  # noqa: BLE001 - PROJ refuses points outside the projection's domain
            raise GdalMcpError(
                "invalid-argument",
                f"{points} cannot be transformed from {points_crs} to the {raster}'s CRS ({crs_text(ds.crs)}): {e}",
            ) from None
    return xs, ys, crs


def bbox_in_crs(ds, bbox, bbox_crs: str | None = None) -> tuple[float, float, float, float]:
    """`bbox` [minx, miny, maxx, maxy] (in `bbox_crs`, default the raster's CRS) in the raster's CRS: a box in
    another CRS becomes the envelope of its edges densified (21 points each) and reprojected."""
    left, bottom, right, top = check_bbox(bbox)
    if bbox_crs is not None:
        crs = parse_crs(bbox_crs, "bbox_crs")
        if ds.crs is None or not ds.crs.to_wkt():
            raise GdalMcpError(
                "invalid-argument",
                "the raster has no CRS, so a bbox in bbox_crs cannot be placed "
                "on it; omit bbox_crs and give the bbox in the raster's own coordinates",
            )
        left, bottom, right, top = transform_bbox((left, bottom, right, top), crs, ds.crs, target="raster")
    return left, bottom, right, top


def box_in_pixels(ds, box: tuple[float, float, float, float]) -> tuple[float, float, float, float, float, float]:
    """A box in the raster's CRS as fractional pixel coordinates of its grid: (col_min, row_min, col_max, row_max,
    width, height), width and height in pixels.

    On a grid without rotation the numbers are computed as `gdal_translate -projwin` does ((x - x0) / dx, and
    (maxx - minx) / dx for the width), so that rounding them gives GDAL's window bit for bit; on a rotated grid
    they are the envelope of the box's four corners through the inverse geotransform.
    """
    left, bottom, right, top = box
    t = ds.transform
    try:
        inverse = ~t
        if not all(math.isfinite(v) for v in tuple(inverse)[:6]):
            raise ValueError("the inverse overflows")  # e.g. a pixel size of 5e-324
    except Exception:  # noqa: BLE001 - a degenerate geotransform
        raise GdalMcpError(
            "invalid-argument", "the raster's geotransform cannot be inverted, so a bbox cannot be placed on it; omit bbox"
        ) from None
    if t.b == 0 and t.d == 0:
        cols = ((left - t.c) / t.a, (right - t.c) / t.a)
        rows = ((top - t.f) / t.e, (bottom - t.f) / t.e)
        width, height = abs((right - left) / t.a), abs((bottom - top) / t.e)
        return min(cols), min(rows), max(cols), max(rows), width, height
    corners = [inverse @ (x, y) for x in (left, right) for y in (bottom, top)]
    c0, c1 = min(c for c, _ in corners), max(c for c, _ in corners)
    r0, r1 = min(r for _, r in corners), max(r for _, r in corners)
    return c0, r0, c1, r1, c1 - c0, r1 - r0


def no_overlap(ds, bbox, bbox_crs: str | None) -> GdalMcpError:
    b = ds.bounds
    return GdalMcpError(
        "invalid-argument",
        f"bbox {list(bbox)}{' in ' + str(bbox_crs) if bbox_crs else ''} does not intersect the raster, whose "
        f"bounds are [{b.left}, {b.bottom}, {b.right}, {b.top}] in {crs_text(ds.crs)}; give a bbox that overlaps them",
    )


def bbox_window(ds, bbox, bbox_crs: str | None = None) -> Window:
    """The pixel window covering `bbox` (in `bbox_crs`, default the raster's CRS), rounded outward.

    Without a bbox: the whole raster. A bbox that does not overlap the raster is an invalid-argument.
    """
    if bbox is None:
        if bbox_crs is not None:
            raise GdalMcpError("invalid-argument", "bbox_crs was given without bbox; give bbox too, or omit bbox_crs")
        return Window(0, 0, ds.width, ds.height)
    box = bbox_in_crs(ds, bbox, bbox_crs)
    c_min, r_min, c_max, r_max, _, _ = box_in_pixels(ds, box)
    eps = 1e-6  # a bbox on a pixel edge must not pull in the neighbour through rounding noise
    c0 = max(0, math.floor(c_min + eps))
    c1 = min(ds.width, math.ceil(c_max - eps))
    r0 = max(0, math.floor(r_min + eps))
    r1 = min(ds.height, math.ceil(r_max - eps))
    if c1 <= c0 or r1 <= r0:
        raise no_overlap(ds, bbox, bbox_crs)
    return Window(c0, r0, c1 - c0, r1 - r0)


def iter_chunks(ds, bands: list[int], window: Window) -> Iterator[tuple[int, int, Window, np.ma.MaskedArray]]:
    """(i, n, window read, masked chunk of shape (len(bands), h, w)) over `window`, the pixel budget shared by
    the bands."""
    block = ds.block_shapes[0] if ds.block_shapes else (256, 256)
    width, height = int(window.width), int(window.height)
    col0, row0 = int(window.col_off), int(window.row_off)
    budget = max(1, DEFAULT_WINDOW_PIXELS // max(1, len(bands)))
    n = max(1, count_windows(width, height, block, budget))
    for i, w in enumerate(iter_windows(width, height, block, budget)):
        w = Window(w.col_off + col0, w.row_off + row0, w.width, w.height)
        yield i, n, w, read_bands(ds, bands, window=w, masked=True)
