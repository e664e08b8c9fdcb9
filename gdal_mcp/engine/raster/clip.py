"""Clipping a raster by a box, a GeoJSON geometry or a vector mask, streamed window by window.

The output keeps the source grid (same resolution and alignment, no resampling). Which source pixels form the
clip window (`window_rule` below; the tool's description says the same):

- a bbox, `all_touched=False` (the default): the window `gdal_translate -projwin` takes. With the bbox in
  fractional pixel coordinates (col_min, row_min) - (col_max, row_max) of the source grid,
  col_off = floor(col_min + 0.001), width = floor((col_max - col_min) + 0.5), and the same for rows: the pixel
  holding the upper-left corner (to 1/1000 pixel), then the bbox's size rounded to whole pixels;
- a bbox, `all_touched=True`: every pixel whose area the bbox overlaps (floor / ceil, to 1e-6 pixel);
- a geometry or mask with crop: the pixels whose centres lie within the shapes' bounding box (`all_touched=False`,
  so no pixel the mask keeps is cut off) or that the bounding box touches (`all_touched=True`); inside the window,
  pixels outside the shapes become nodata: the input's, else NaN for floats; an integer input without nodata gets
  a GDAL internal mask band (GTiff, COG) or, for formats without masks, a value no kept pixel holds (never 0 by
  default, which may be real data inside the shape). The mask follows `gdalwarp -cutline` / `rasterio.mask`:
  pixels whose centre is inside, or every pixel touched with all_touched.

A window reaching past the raster's edge is limited to the raster (gdal_translate would pad it with nodata), with
a warning; the window used is returned with the summary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import MaskFlags
from rasterio.windows import Window

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.features.masks import check_choice, check_owners, mask_polygons
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    check_nodata,
    copy_metadata,
    fits,
    pixel_driver,
    summarize,
    write_windows,
)
from gdal_mcp.engine.raster.region import bbox_in_crs, box_in_pixels, no_overlap
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import PixelWindow, RasterClipResult

# Pixels per window summed over bands (tests lower it to exercise many windows).
WINDOW_PIXELS = DEFAULT_WINDOW_PIXELS
# Tolerance (in pixels) when snapping bounds to the grid, so float noise does not add a row or column.
SNAP_EPS = 1e-6
# gdal_translate -projwin's tolerance on the window's offset (apps/gdal_translate_lib.cpp: floor(off + 0.001)).
PROJWIN_EPS = 0.001
OUTPUT_BLOCK = (256, 256)
# Output formats that keep a GDAL per-dataset mask band (GTiff internal mask; COG copies it).
MASK_DRIVERS = ("GTiff", "COG")

# A per-window mask: True where the output pixel lies outside the clip region; None when all inside.
OutsideFn = Callable[[Window], "np.ndarray | None"]


# ---------------------------------------------------------------------------------------------- grid


def window_rule(pixels: tuple[float, float, float, float, float, float], rule: str) -> tuple[int, int, int, int]:
    """Whole-pixel (col0, row0, col1, row1), end exclusive and not yet limited to the raster, from fractional pixel
    coordinates (col_min, row_min, col_max, row_max, width, height) (region.box_in_pixels):

    - "projwin": gdal_translate -projwin's rounding (offset floor(x + 0.001), size floor(size + 0.5));
    - "touched": every pixel whose area the box overlaps (floor / ceil, to SNAP_EPS);
    - "centres": every pixel whose centre lies within the box (to SNAP_EPS).
    """
    c_min, r_min, c_max, r_max, width, height = pixels
    if rule == "projwin":
        col0, row0 = math.floor(c_min + PROJWIN_EPS), math.floor(r_min + PROJWIN_EPS)
        return col0, row0, col0 + math.floor(width + 0.5), row0 + math.floor(height + 0.5)
    if rule == "touched":
        return (
            math.floor(c_min + SNAP_EPS),
            math.floor(r_min + SNAP_EPS),
            math.ceil(c_max - SNAP_EPS),
            math.ceil(r_max - SNAP_EPS),
        )
    # centre c + 0.5 within [c_min, c_max]
    return (
        math.ceil(c_min - 0.5 - SNAP_EPS),
        math.ceil(r_min - 0.5 - SNAP_EPS),
        math.floor(c_max - 0.5 + SNAP_EPS) + 1,
        math.floor(r_max - 0.5 + SNAP_EPS) + 1,
    )


def _limited(ds: Any, box: tuple[int, int, int, int]) -> Window | None:
    """The window limited to the raster; None when nothing is left."""
    col0, row0, col1, row1 = box
    c0, r0, c1, r1 = max(0, col0), max(0, row0), min(ds.width, col1), min(ds.height, row1)
    if c1 <= c0 or r1 <= r0:
        return None
    return Window(c0, r0, c1 - c0, r1 - r0)


def _beyond_edge(ds: Any, box: tuple[int, int, int, int], what: str) -> list[str]:
    col0, row0, col1, row1 = box
    if col0 >= 0 and row0 >= 0 and col1 <= ds.width and row1 <= ds.height:
        return []
    return [
        f"the {what} reaches past the raster's edge (its pixel window is columns {col0}..{col1 - 1}, rows "
        f"{row0}..{row1 - 1} of a {ds.width}x{ds.height} raster): the output is limited to the raster, with no "
        "padding (gdal_translate -projwin would pad the outside with nodata)"
    ]


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
    return GdalMcpError(
        "invalid-argument",
        f"the {what} does not overlap the raster, which covers [{text}] "
        f"(minx, miny, maxx, maxy) in {label}; check the coordinates and their CRS",
    )


def _bbox_region(
    ds: Any, bbox: Any, bbox_crs: str | None, crop: bool, all_touched: bool
) -> tuple[Window, Window, OutsideFn, list[str]]:
    """(output window, clip window, outside function, warnings) of a bbox clip."""
    pixels = box_in_pixels(ds, bbox_in_crs(ds, bbox, bbox_crs))
    box = window_rule(pixels, "touched" if all_touched else "projwin")
    win = _limited(ds, box)
    if win is None:
        if not all_touched and (box[2] <= box[0] or box[3] <= box[1]) and _limited(ds, window_rule(pixels, "touched")):
            raise GdalMcpError(
                "invalid-argument",
                f"the bbox is {pixels[4]:.3g} x {pixels[5]:.3g} pixels, which rounds to no whole pixel (the gdal_translate "
                "-projwin rule keeps the bbox's size rounded to whole pixels); widen the bbox, or pass all_touched=true "
                "to keep every pixel it touches",
            )
        raise no_overlap(ds, bbox, bbox_crs)
    warnings = _beyond_edge(ds, box, "bbox")
    if crop:
        return win, win, lambda w: None, warnings

    def outside(w: Window) -> np.ndarray | None:
        rows = np.arange(w.row_off, w.row_off + w.height)
        cols = np.arange(w.col_off, w.col_off + w.width)
        in_r = (rows >= win.row_off) & (rows < win.row_off + win.height)
        in_c = (cols >= win.col_off) & (cols < win.col_off + win.width)
        if in_r.all() and in_c.all():
            return None
        return ~(in_r[:, None] & in_c[None, :])

    return Window(0, 0, ds.width, ds.height), win, outside, warnings


def _shape_region(
    ds: Any, polygons: list[Any], geoms_crs: Any, what: str, crop: bool, all_touched: bool
) -> tuple[Window, Window, OutsideFn]:
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
        pixels = (c0, r0, c1, r1, c1 - c0, r1 - r0)
        win = _limited(ds, window_rule(pixels, "touched" if all_touched else "centres"))
        if win is None and _limited(ds, window_rule(pixels, "touched")) is not None:
            raise GdalMcpError(
                "invalid-argument",
                f"the {what} lies between pixel centres (its bounding box spans {c1 - c0:.3g} x {r1 - r0:.3g} pixels and "
                "holds no pixel centre), so no pixel would be kept; pass all_touched=true to keep the pixels it touches",
            )
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

    return out_win, win, outside


# ---------------------------------------------------------------------------------------------- values


def _same_nodata(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


def _output_nodata(ds: Any, nodata: float | None, masking: bool) -> float | None:
    """The nodata to declare; None for an integer input without one (a mask band or an unused value marks
    the outside then, never a value that may occur in the kept pixels)."""
    dtype = ds.dtypes[0]
    if nodata is not None:
        return check_nodata(nodata, dtype)
    if ds.nodata is not None and fits(ds.nodata, dtype):
        return ds.nodata
    if masking and np.issubdtype(np.dtype(dtype), np.floating):
        return float("nan")
    return None


def _unused_value(ds: Any, out_win: Window, outside: OutsideFn) -> float:
    """A value of the input's integer type that no kept pixel (in any band) holds: one pass over the kept pixels.

    Prefers the type's maximum for unsigned types (255 for Byte) and its minimum for signed ones.
    """
    from gdal_mcp.engine.raster.windows import iter_windows

    dtype = np.dtype(ds.dtypes[0])
    info = np.iinfo(dtype)
    signed = info.min < 0
    # 8- and 16-bit types: every value is tracked; wider ones: the 4096 values nearest the preferred end.
    span = info.max - info.min + 1 if dtype.itemsize <= 2 else 4096
    candidates = (
        (
            np.arange(info.min, info.min + span, dtype="int64")
            if signed
            else np.arange(info.max, info.max - span, -1, dtype="int64")
        )
        if dtype.itemsize > 2
        else np.arange(info.min, info.max + 1, dtype="int64")
    )
    seen = np.zeros(len(candidates), dtype=bool)
    for w in iter_windows(int(out_win.width), int(out_win.height), OUTPUT_BLOCK, max(1, WINDOW_PIXELS // max(1, ds.count))):
        off = outside(w)
        if off is not None and off.all():
            continue
        data = ds.read(window=Window(w.col_off + out_win.col_off, w.row_off + out_win.row_off, w.width, w.height))
        kept = data[:, ~off] if off is not None else data.reshape(ds.count, -1)
        if dtype.itemsize <= 2:
            seen |= np.bincount((kept.astype("int64") - info.min).ravel(), minlength=len(candidates)) > 0
        else:
            seen |= np.isin(candidates, kept)
    free = candidates[~seen]
    if free.size == 0:
        raise GdalMcpError(
            "invalid-argument",
            f"every {dtype.name} value checked occurs in the kept pixels, so none "
            "can mark the outside as nodata; write GTiff or COG (they get a mask band), or pass nodata= "
            "explicitly, or convert to a wider type first (raster_convert output_type)",
        )
    if dtype.itemsize > 2:
        return float(free[0])
    return float(free.min() if signed else free.max())


# ---------------------------------------------------------------------------------------------- clip


@wrap_gdal_errors
def clip(
    src: str,
    dst: str,
    *,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    geometry: dict | None = None,
    geometry_crs: str | None = None,
    mask: str | None = None,
    mask_layer: str | None = None,
    mask_where: str | None = None,
    crop: bool = True,
    all_touched: bool = False,
    nodata: float | None = None,
    format: str | None = None,
    creation_options: dict | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterClipResult, list[str]]:
    """Clip `src` to a bbox, a GeoJSON geometry or the polygons of a vector file, writing `dst`."""
    kind = check_choice(bbox, geometry, mask)
    check_owners(kind, bbox_crs=bbox_crs, geometry_crs=geometry_crs, mask_layer=mask_layer, mask_where=mask_where)
    driver = pixel_driver(dst, format, "clip")
    options = normalize_options(creation_options)

    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument", "the input has no bands (a container?); clip one of its subdatasets (raster_info lists them)"
            )
        if ds.transform.is_identity and ds.gcps[0]:
            raise GdalMcpError(
                "unsupported", "the raster is georeferenced by GCPs only; warp it to a CRS first (raster_reproject), then clip"
            )
        warnings: list[str] = []
        if kind == "bbox":
            out_win, clip_win, outside, warnings = _bbox_region(ds, bbox, bbox_crs, crop, all_touched)
            masking = not crop
        else:
            polygons, given_crs = mask_polygons(
                target_crs=ds.crs,
                target="raster",
                geometry=geometry,
                geometry_crs=geometry_crs,
                mask=mask,
                mask_layer=mask_layer,
                mask_where=mask_where,
            )
            out_win, clip_win, outside = _shape_region(ds, polygons, given_crs, kind, crop, all_touched)
            masking = True
        out_nodata = _output_nodata(ds, nodata, masking)
        # An integer input without nodata: the outside is marked by a mask band (GTiff, COG), or by a value
        # that no kept pixel holds; never by a value such as 0 that may be real data inside the shape.
        use_mask = masking and out_nodata is None and driver in MASK_DRIVERS
        if masking and out_nodata is None and not use_mask:
            progress(0.0, "looking for a value the kept pixels do not use, to mark the outside as nodata")
            out_nodata = _unused_value(ds, out_win, outside)
            warnings.append(
                f"the input has no nodata and {driver} cannot store a mask band: pixels outside the shape "
                f"are set to {_num(out_nodata)}, declared nodata; no kept pixel has that value"
            )
        elif use_mask:
            warnings.append(
                "the input has no nodata, so pixels outside the shape are marked by a mask band (GDAL "
                "internal mask), not by a nodata value; readers that honour masks (rasterio masked=True, "
                "QGIS, GDAL) see them as missing, and their stored value is 0"
            )
        input_mask = MaskFlags.per_dataset in ds.mask_flag_enums[0] and ds.nodata is None
        remap = [
            i
            for i, v in enumerate(ds.nodatavals)
            if out_nodata is not None and v is not None and fits(v, ds.dtypes[i]) and not _same_nodata(v, out_nodata)
        ]
        fill = 0 if out_nodata is None else out_nodata
        target: dict[str, Any] = {}

        width, height = int(out_win.width), int(out_win.height)

        def compute(w: Window) -> np.ndarray:
            off = outside(w)
            src_w = Window(w.col_off + out_win.col_off, w.row_off + out_win.row_off, w.width, w.height)
            if use_mask:
                valid = (
                    np.zeros((int(w.height), int(w.width)), dtype="uint8")
                    if off is not None and off.all()
                    else ds.dataset_mask(window=src_w)
                    if input_mask
                    else np.full((int(w.height), int(w.width)), 255, dtype="uint8")
                )
                if off is not None:
                    valid[off] = 0
                target["out"].write_mask(valid, window=w)
            if off is not None and off.all():
                return np.full((ds.count, int(w.height), int(w.width)), fill, dtype=ds.dtypes[0])
            data = ds.read(window=src_w)
            for b in remap:
                v = ds.nodatavals[b]
                hit = np.isnan(data[b]) if math.isnan(v) else data[b] == v
                data[b][hit] = out_nodata
            if off is not None:
                data[:, off] = fill
            return data

        def prepare(out: Any) -> None:
            target["out"] = out  # compute() writes the mask band beside the pixels
            copy_metadata(ds, out)

        with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
            write_windows(
                dst,
                driver,
                options,
                width=width,
                height=height,
                count=ds.count,
                dtype=ds.dtypes[0],
                crs=ds.crs,
                transform=ds.window_transform(out_win),
                nodata=out_nodata,
                compute=compute,
                progress=progress,
                what="clipped",
                window_pixels=WINDOW_PIXELS,
                block=OUTPUT_BLOCK,
                prepare=prepare,
                source=ds,
            )
    window = PixelWindow(
        col_off=int(clip_win.col_off), row_off=int(clip_win.row_off), width=int(clip_win.width), height=int(clip_win.height)
    )
    return RasterClipResult(summary=summarize(dst), window=window), warnings


def _num(v: float) -> str:
    return str(int(v)) if math.isfinite(v) and float(v).is_integer() else str(v)
