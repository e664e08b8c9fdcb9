"""Clipping a raster by a box, a GeoJSON geometry or a vector mask, streamed window by window.

Semantics follow `gdalwarp -cutline … -crop_to_cutline` / `rasterio.mask.mask`: the output keeps the
source grid (same resolution and alignment, no resampling); with crop the extent is the geometry's bounds
snapped outward to whole source pixels (and limited to the raster); pixels outside the geometry become
nodata. A bbox is a pure window subset (whole pixels, like `gdal_translate -projwin`, snapped outward).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    check_nodata,
    copy_metadata,
    fits,
    infer_driver,
    summarize,
    write_windows,
)
from gdal_mcp.engine.raster.output import creation_options as normalize_options
from gdal_mcp.engine.raster.region import bbox_window
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS
from gdal_mcp.engine.vector.masks import check_bbox, check_choice, check_owners, mask_polygons
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

# Pixels per window summed over bands (tests lower it to exercise many windows).
WINDOW_PIXELS = DEFAULT_WINDOW_PIXELS
# Tolerance (in pixels) when snapping bounds to the grid, so float noise does not add a row or column.
SNAP_EPS = 1e-6
OUTPUT_BLOCK = (256, 256)

# A per-window mask: True where the output pixel lies outside the clip region; None when all inside.
OutsideFn = Callable[[Window], "np.ndarray | None"]


# ---------------------------------------------------------------------------------------------- grid

def _snapped_window(ds: Any, inverse_bounds: tuple[float, float, float, float]) -> Window | None:
    """Whole-pixel window covering (col_min, row_min, col_max, row_max) pixel coordinates, limited to the raster."""
    c0, r0, c1, r1 = inverse_bounds
    col0 = max(0, math.floor(c0 + SNAP_EPS))
    row0 = max(0, math.floor(r0 + SNAP_EPS))
    col1 = min(ds.width, math.ceil(c1 - SNAP_EPS))
    row1 = min(ds.height, math.ceil(r1 - SNAP_EPS))
    if col1 <= col0 or row1 <= row0:
        return None
    return Window(col0, row0, col1 - col0, row1 - row0)


def _pixel_bounds(ds: Any, xs: Iterable[float], ys: Iterable[float]) -> tuple[float, float, float, float]:
    inv = ~ds.transform
    cols, rows = zip(*(inv @ (x, y) for x, y in zip(xs, ys, strict=True)), strict=True)
    return min(cols), min(rows), max(cols), max(rows)


def _outside_error(ds: Any, what: str, crs: Any) -> GdalMcpError:
    """'does not overlap' with the raster's bounds in the caller's CRS when they can be computed."""
    b = tuple(ds.bounds)
    label = "the raster's own CRS"
    if crs is not None and ds.crs is not None and crs != ds.crs:
        try:
            from rasterio.warp import transform_bounds

            t = transform_bounds(ds.crs, crs, *b, densify_pts=21)
            if all(math.isfinite(v) for v in t):
                b, label = t, crs_label(crs) or "the given CRS"
        except Exception:  # noqa: BLE001 - fall back to the native bounds
            pass
    elif ds.crs is not None:
        label = crs_label(ds.crs) or label
    text = ", ".join(f"{v:.6g}" if abs(v) < 1e5 else f"{v:.1f}" for v in b)
    return GdalMcpError("invalid-argument", f"the {what} does not overlap the raster, which covers [{text}] "
                        f"(minx, miny, maxx, maxy) in {label}; check the coordinates and their CRS")


def _bbox_region(ds: Any, bbox: Any, bbox_crs: str | None, crop: bool) -> tuple[Window, OutsideFn]:
    win = bbox_window(ds, check_bbox(bbox), bbox_crs)
    if crop:
        return win, lambda w: None

    def outside(w: Window) -> np.ndarray | None:
        rows = np.arange(w.row_off, w.row_off + w.height)
        cols = np.arange(w.col_off, w.col_off + w.width)
        in_r = (rows >= win.row_off) & (rows < win.row_off + win.height)
        in_c = (cols >= win.col_off) & (cols < win.col_off + win.width)
        if in_r.all() and in_c.all():
            return None
        return ~(in_r[:, None] & in_c[None, :])

    return Window(0, 0, ds.width, ds.height), outside


def _shape_region(ds: Any, polygons: list[Any], geoms_crs: Any, what: str, crop: bool,
                  all_touched: bool) -> tuple[Window, OutsideFn]:
    """`polygons` are in the raster's CRS (masks.mask_polygons); `geoms_crs` is the CRS they were given in."""
    import shapely
    import shapely.affinity
    from rasterio.features import geometry_mask

    t = ds.transform
    footprint = shapely.Polygon([t @ (0, 0), t @ (ds.width, 0), t @ (ds.width, ds.height), t @ (0, ds.height)])
    a, b, c, d, e, f = tuple(~t)[:6]
    in_pixels = shapely.affinity.affine_transform(shapely.GeometryCollection(polygons), [a, b, d, e, c, f])
    win = None
    if any(footprint.intersects(p) for p in polygons):
        c0, r0, c1, r1 = in_pixels.bounds
        win = _snapped_window(ds, (c0, r0, c1, r1))
    if win is None:
        raise _outside_error(ds, what, geoms_crs if geoms_crs is not None else ds.crs)
    out_win = win if crop else Window(0, 0, ds.width, ds.height)
    tree = shapely.STRtree(polygons)
    res_x, res_y = math.hypot(t.a, t.d), math.hypot(t.b, t.e)

    def outside(w: Window) -> np.ndarray | None:
        src_w = Window(w.col_off + out_win.col_off, w.row_off + out_win.row_off, w.width, w.height)
        wt = ds.window_transform(src_w)
        corners = [wt @ (0, 0), wt @ (w.width, 0), wt @ (w.width, w.height), wt @ (0, w.height)]
        xs, ys = zip(*corners, strict=True)
        probe = shapely.box(min(xs) - res_x, min(ys) - res_y, max(xs) + res_x, max(ys) + res_y)
        hits = tree.query(probe)
        shape = (int(w.height), int(w.width))
        if len(hits) == 0:
            return np.ones(shape, dtype=bool)
        return geometry_mask([polygons[i] for i in hits], out_shape=shape, transform=wt, all_touched=all_touched)

    return out_win, outside


# ---------------------------------------------------------------------------------------------- values

def _same_nodata(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


def _output_nodata(ds: Any, nodata: float | None, masking: bool) -> float | None:
    dtype = ds.dtypes[0]
    if nodata is not None:
        return check_nodata(nodata, dtype)
    if ds.nodata is not None and fits(ds.nodata, dtype):
        return ds.nodata
    if masking:
        return float("nan") if np.issubdtype(np.dtype(dtype), np.floating) else 0.0
    return None


# ---------------------------------------------------------------------------------------------- clip

@wrap_gdal_errors
def clip(src: str, dst: str, *, bbox: tuple[float, float, float, float] | None = None, bbox_crs: str | None = None,
         geometry: dict | None = None, geometry_crs: str | None = None, mask: str | None = None,
         mask_layer: str | None = None, mask_where: str | None = None, crop: bool = True, all_touched: bool = False,
         nodata: float | None = None, format: str | None = None, creation_options: dict | None = None,
         progress: Progress = no_progress) -> tuple[RasterSummary, list[str]]:
    """Clip `src` to a bbox, a GeoJSON geometry or the polygons of a vector file, writing `dst`."""
    kind = check_choice(bbox, geometry, mask)
    check_owners(kind, bbox_crs=bbox_crs, geometry_crs=geometry_crs, mask_layer=mask_layer, mask_where=mask_where)
    driver = infer_driver(dst, format)
    if driver in ("VRT", "MEM"):
        raise GdalMcpError("unsupported", f"clip cannot write {driver}; write GTiff or COG instead")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError("invalid-argument", "the input has no bands (a container?); clip one of its "
                               "subdatasets (raster_info lists them)")
        if ds.transform.is_identity and ds.gcps[0]:
            raise GdalMcpError("unsupported", "the raster is georeferenced by GCPs only; warp it to a CRS first "
                               "(raster_reproject), then clip")
        if kind == "bbox":
            out_win, outside = _bbox_region(ds, bbox, bbox_crs, crop)
            masking = not crop
        else:
            polygons, given_crs = mask_polygons(target_crs=ds.crs, target="raster", geometry=geometry,
                                                geometry_crs=geometry_crs, mask=mask, mask_layer=mask_layer,
                                                mask_where=mask_where)
            out_win, outside = _shape_region(ds, polygons, given_crs, kind, crop, all_touched)
            masking = True
        out_nodata = _output_nodata(ds, nodata, masking)
        remap = [i for i, v in enumerate(ds.nodatavals) if out_nodata is not None and v is not None
                 and fits(v, ds.dtypes[i]) and not _same_nodata(v, out_nodata)]

        width, height = int(out_win.width), int(out_win.height)

        def compute(w: Window) -> np.ndarray:
            off = outside(w)
            if off is not None and off.all():
                return np.full((ds.count, int(w.height), int(w.width)), out_nodata, dtype=ds.dtypes[0])
            data = ds.read(window=Window(w.col_off + out_win.col_off, w.row_off + out_win.row_off, w.width, w.height))
            for b in remap:
                v = ds.nodatavals[b]
                hit = np.isnan(data[b]) if math.isnan(v) else data[b] == v
                data[b][hit] = out_nodata
            if off is not None:
                data[:, off] = out_nodata
            return data

        write_windows(dst, driver, options, width=width, height=height, count=ds.count, dtype=ds.dtypes[0],
                      crs=ds.crs, transform=ds.window_transform(out_win), nodata=out_nodata, compute=compute,
                      progress=progress, what="clipped", window_pixels=WINDOW_PIXELS, block=OUTPUT_BLOCK,
                      prepare=lambda out: copy_metadata(ds, out))
    return summarize(dst), []
