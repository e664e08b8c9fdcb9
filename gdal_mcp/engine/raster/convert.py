"""Format conversion and subsetting, like gdal_translate: bands, projwin, output type, nodata, scaling."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.windows import Window

from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    bounded_threads,
    cast,
    copy_metadata,
    create_copy,
    fits,
    infer_driver,
    parse_dtype,
    summarize,
    writable_driver,
    write_windows,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

WINDOW_PIXELS = 8 * 1024 * 1024


def projwin_window(ds: Any, projwin: tuple[float, float, float, float], projwin_crs: str | None, warnings: list[str]) -> Window:
    """The source window of a [minx, miny, maxx, maxy] box, rounded as gdal_translate -projwin does."""
    minx, miny, maxx, maxy = projwin
    if not (minx < maxx and miny < maxy):
        raise GdalMcpError("invalid-argument", "projwin must be [minx, miny, maxx, maxy] with min < max")
    if projwin_crs:
        if ds.crs is None:
            raise GdalMcpError("invalid-argument", "projwin_crs given but the raster has no CRS")
        from rasterio.warp import transform_bounds

        minx, miny, maxx, maxy = transform_bounds(
            parse_crs(projwin_crs, "projwin_crs"), ds.crs, minx, miny, maxx, maxy, densify_pts=21
        )
    inv = ~ds.transform
    cols, rows = zip(*(inv * (x, y) for x, y in ((minx, maxy), (maxx, miny), (minx, miny), (maxx, maxy))), strict=True)
    c0, c1, r0, r1 = min(cols), max(cols), min(rows), max(rows)
    col_off, row_off = math.floor(c0 + 0.001), math.floor(r0 + 0.001)
    width, height = math.floor(c1 - c0 + 0.5), math.floor(r1 - r0 + 0.5)
    full = Window(0, 0, ds.width, ds.height)
    win = Window(col_off, row_off, max(width, 1), max(height, 1))
    try:
        clipped = win.intersection(full)
    except Exception:  # noqa: BLE001 - rasterio raises WindowError when they do not meet
        clipped = None
    if clipped is None or clipped.width < 1 or clipped.height < 1:
        b = ds.bounds
        raise GdalMcpError(
            "invalid-argument",
            f"projwin lies outside the raster, whose bounds are [{b.left}, {b.bottom}, {b.right}, {b.top}] in its CRS",
        )
    if (clipped.col_off, clipped.row_off, clipped.width, clipped.height) != (win.col_off, win.row_off, win.width, win.height):
        warnings.append("projwin reaches beyond the raster; the output covers only the overlap")
    return Window(int(clipped.col_off), int(clipped.row_off), int(clipped.width), int(clipped.height))


def exact_range(ds: Any, bands: list[int], window: Window) -> dict[int, tuple[float, float]]:
    from gdal_mcp.engine.raster.stats import band_statistics

    stats = band_statistics(ds, bands, window=window)
    return {b: (s.min if s.min is not None else 0.0, s.max if s.max is not None else 0.0) for b, s in stats.items()}


@wrap_gdal_errors
def convert(
    src: str,
    dst: str,
    *,
    format: str | None = None,
    options: dict[str, Any] | None = None,
    bands: list[int] | None = None,
    projwin: tuple[float, float, float, float] | None = None,
    projwin_crs: str | None = None,
    output_type: str | None = None,
    nodata: float | None = None,
    scale: bool | list[float] | None = None,
    resolution: float | list[float] | None = None,
    size: list[int] | None = None,
    resampling: str = "nearest",
    overview_resampling: str | None = None,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Convert `src` to `dst` as gdal_translate would; returns the output summary and warnings.

    `resolution` / `size` resample without reprojecting (gdal_translate -tr / -outsize, with `resampling` as
    -r). `overview_resampling` is the COG overview resampling (the COG driver's OVERVIEW_RESAMPLING option).
    GCPs and RPCs are kept (shifted and scaled with the subset and the resize), as gdal_translate does.
    """
    from gdal_mcp.engine.raster.warp import resampling_method, resolution_pair

    warnings: list[str] = []
    driver = infer_driver(dst, format)
    options = creation_options(options)
    if resolution is not None and size is not None:
        raise GdalMcpError(
            "invalid-argument", "give resolution or size, not both (gdal_translate -tr and -outsize exclude each other)"
        )
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise GdalMcpError("invalid-argument", "size must be [width, height] in pixels, both >= 1")
    res = resolution_pair(resolution)
    method = resampling_method(resampling)
    if overview_resampling is not None:
        if driver == "COG":
            options.setdefault("OVERVIEW_RESAMPLING", overview_resampling.upper())
        else:
            warnings.append(f"overview_resampling applies to COG overviews only; it was ignored for {driver}")
    if driver in ("GTiff", "COG"):
        options = bounded_threads(options, threads)
    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument",
                "the input has no bands (a container?); convert one of its subdatasets (raster_info lists them)",
            )
        indexes = list(bands) if bands else list(range(1, ds.count + 1))
        bad = [b for b in indexes if not 1 <= b <= ds.count]
        if bad:
            raise GdalMcpError("invalid-argument", f"band(s) {bad} do not exist; the raster has {ds.count} band(s)")
        window = projwin_window(ds, projwin, projwin_crs, warnings) if projwin else Window(0, 0, ds.width, ds.height)
        gcps, gcp_crs = ds.gcps
        if projwin and (res is not None or size is not None):
            # Resampled, gdal_translate keeps the projwin's fractional source window (no whole-pixel rounding).
            minx, miny, maxx, maxy = projwin
            if projwin_crs:
                from rasterio.warp import transform_bounds

                minx, miny, maxx, maxy = transform_bounds(
                    parse_crs(projwin_crs, "projwin_crs"), ds.crs, minx, miny, maxx, maxy, densify_pts=21
                )
            c0, r0 = ~ds.transform * (minx, maxy)
            c1, r1 = ~ds.transform * (maxx, miny)
            c0, c1 = max(c0, window.col_off), min(c1, window.col_off + window.width)
            r0, r1 = max(r0, window.row_off), min(r1, window.row_off + window.height)
            window = Window(c0, r0, c1 - c0, r1 - r0)
        if res is not None:
            if ds.transform.is_identity and (gcps or ds.rpcs):
                raise GdalMcpError(
                    "invalid-argument",
                    "the input is georeferenced by GCPs/RPCs, not a grid: give "
                    "size (in pixels) instead of resolution, or raster_reproject it first",
                )
            out_w = int(window.width * abs(ds.transform.a) / res[0] + 0.5)
            out_h = int(window.height * abs(ds.transform.e) / res[1] + 0.5)
        elif size is not None:
            out_w, out_h = size
        else:
            out_w, out_h = int(window.width), int(window.height)
        resized = (out_w, out_h) != (int(window.width), int(window.height))
        if res is not None and method != Resampling.nearest:
            # As gdal_translate -tr: the exact pixel size maps the source onto a fractional output size (the last
            # pixel may overhang); with nearest it maps onto the whole pixels (its VRT rounds the DstRect).
            sx, sy = res[0] / abs(ds.transform.a), res[1] / abs(ds.transform.e)
        else:
            sx, sy = window.width / max(out_w, 1), window.height / max(out_h, 1)
        if res is not None or size is not None:
            check_grid(
                out_w,
                out_h,
                max_pixels=max_pixels,
                crs_units=describe_units(ds.crs, crs_label(ds.crs)),
                resolution=res,
                what="output grid",
                extent=(window.width * abs(ds.transform.a), window.height * abs(ds.transform.e)),
            )
        out_transform = ds.window_transform(window) * Affine.scale(sx, sy)
        if res is not None:  # gdal_translate -tr sets the pixel size exactly
            out_transform = Affine(
                math.copysign(res[0], out_transform.a),
                out_transform.b,
                out_transform.c,
                out_transform.d,
                math.copysign(res[1], out_transform.e),
                out_transform.f,
            )
        dtype = parse_dtype(output_type) or ds.dtypes[indexes[0] - 1]
        src_nodata = ds.nodatavals[indexes[0] - 1]
        out_nodata = nodata if nodata is not None else src_nodata
        if out_nodata is not None and not fits(out_nodata, dtype):
            warnings.append(f"nodata {out_nodata} does not fit {dtype}; the output has no nodata value")
            out_nodata = None
        scaling = None
        if scale:
            if scale is True:
                lo_hi = exact_range(ds, indexes, window)
                scaling = {b: (lo_hi[b][0], lo_hi[b][1], 0.0, 255.0) for b in indexes}
            elif len(scale) in (2, 4):
                s = [float(v) for v in scale] + ([0.0, 255.0] if len(scale) == 2 else [])
                if s[0] == s[1]:
                    raise GdalMcpError("invalid-argument", "scale source range is empty (src_min == src_max)")
                scaling = {b: (s[0], s[1], s[2], s[3]) for b in indexes}
            else:
                raise GdalMcpError(
                    "invalid-argument", "scale must be true or [src_min, src_max] or [src_min, src_max, dst_min, dst_max]"
                )

        plain = (
            indexes == list(range(1, ds.count + 1))
            and projwin is None
            and output_type is None
            and nodata is None
            and not scaling
            and not resized
        )
        if plain and not writable_driver(driver):
            # Exactly gdal_translate: one CreateCopy from the source.
            progress(0.0, f"writing {driver} with GDAL CreateCopy")
            create_copy(ds, dst, driver, options)
            progress(1.0, f"wrote {driver}")
            return summarize(dst), warnings

        masked = bool(scaling) or out_nodata != src_nodata

        def compute(w: Window) -> np.ndarray:
            if resized:
                return transform_values(resampled(w), indexes, scaling, dtype, out_nodata)
            else:
                src_win = Window(w.col_off + window.col_off, w.row_off + window.row_off, w.width, w.height)
                data = ds.read(indexes, window=src_win, masked=masked)
            return transform_values(data, indexes, scaling, dtype, out_nodata)

        grid_less = ds.transform.is_identity and bool(gcps or ds.rpcs)

        def resampled(w: Window) -> Any:
            """Output window `w` read from the source with `resampling` (RasterIO, as gdal_translate's VRT does);
            a last row/column that overhangs the source is read from the part of the source it covers."""
            cols = _segments(int(w.col_off), int(w.width), sx, window.col_off, window.col_off + window.width)
            rows = _segments(int(w.row_off), int(w.height), sy, window.row_off, window.row_off + window.height)
            parts = [
                [
                    ds.read(
                        indexes, window=Window(c0, r0, cw, rh), out_shape=(len(indexes), oh, ow), resampling=method, masked=masked
                    )
                    for c0, cw, ow in cols
                ]
                for r0, rh, oh in rows
            ]
            if len(parts) == 1 and len(parts[0]) == 1:
                return parts[0][0]
            stack = np.ma if masked else np
            return stack.concatenate([stack.concatenate(row, axis=2) for row in parts], axis=1)

        def prepare(out: Any) -> None:
            copy_metadata(ds, out, indexes, dtype_changed=dtype != ds.dtypes[indexes[0] - 1], rescaled=bool(scaling))
            copy_gcps_and_rpcs(ds, out, window, sx, sy)

        write_windows(
            dst,
            driver,
            options,
            width=out_w,
            height=out_h,
            count=len(indexes),
            dtype=dtype,
            crs=None if grid_less else ds.crs,
            transform=None if grid_less else out_transform,
            nodata=out_nodata,
            compute=compute,
            progress=progress,
            what="converted",
            window_pixels=WINDOW_PIXELS,
            block=ds.block_shapes[indexes[0] - 1],
            prepare=prepare,
            source=ds,
        )
    return summarize(dst), warnings


def _segments(dst_off: int, dst_len: int, scale: float, src_start: float, src_end: float) -> list[tuple[float, float, int]]:
    """(source offset, source length, output pixels) pieces of an output span: the pixels wholly inside the
    source at the exact scale, then a last pixel that overhangs the source (gdal_translate -tr), if any."""
    start = src_start + dst_off * scale
    full = min(dst_len, int((src_end - start) / scale + 1e-9))
    pieces: list[tuple[float, float, int]] = []
    if full > 0:
        pieces.append((start, full * scale, full))
    if full < dst_len:
        rest = start + full * scale
        pieces.append((rest, max(src_end - rest, 1e-6), dst_len - full))
    return pieces


def copy_gcps_and_rpcs(ds: Any, out: Any, window: Window, sx: float, sy: float) -> None:
    """Keep GCPs and RPCs as gdal_translate does: moved by the subset's offset and scaled by the resize."""
    from rasterio.control import GroundControlPoint

    gcps, gcp_crs = ds.gcps
    if gcps:
        moved = [
            GroundControlPoint(
                row=(g.row - window.row_off) / sy, col=(g.col - window.col_off) / sx, x=g.x, y=g.y, z=g.z, id=g.id, info=g.info
            )
            for g in gcps
        ]
        out.gcps = (moved, gcp_crs)
    rpc = ds.tags(ns="RPC")
    if rpc:
        for key, offset, scale in (("LINE_OFF", window.row_off, sy), ("SAMP_OFF", window.col_off, sx)):
            if key in rpc:
                rpc[key] = repr((float(rpc[key]) - offset) / scale)
        for key, scale in (("LINE_SCALE", sy), ("SAMP_SCALE", sx)):
            if key in rpc:
                rpc[key] = repr(float(rpc[key]) / scale)
        out.update_tags(ns="RPC", **rpc)


def transform_values(
    data: Any,
    indexes: list[int],
    scaling: dict[int, tuple[float, float, float, float]] | None,
    dtype: str,
    out_nodata: float | None,
) -> Any:
    """Scale (linear, as -scale) and cast one window; masked pixels become the output nodata."""
    mask = np.ma.getmaskarray(data) if np.ma.isMaskedArray(data) else None
    values = np.ma.getdata(data)
    if scaling:
        scaled = np.empty(values.shape, dtype="float64")
        for j, b in enumerate(indexes):
            s0, s1, d0, d1 = scaling[b]
            scaled[j] = (values[j].astype("float64") - s0) * ((d1 - d0) / (s1 - s0)) + d0
        values = scaled
    out = cast(values, dtype)
    if mask is not None and out_nodata is not None and mask.any():
        out = np.where(mask, np.array(out_nodata, dtype=out.dtype), out)
    return out
