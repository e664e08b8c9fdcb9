"""Format conversion and subsetting, like gdal_translate: bands, projwin, output type, nodata, scaling."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.windows import Window

from gdal_mcp.engine.crs import parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    bounded_threads,
    cast,
    copy_metadata,
    creation_options,
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


def projwin_window(ds: Any, projwin: tuple[float, float, float, float], projwin_crs: str | None,
                   warnings: list[str]) -> Window:
    """The source window of a [minx, miny, maxx, maxy] box, rounded as gdal_translate -projwin does."""
    minx, miny, maxx, maxy = projwin
    if not (minx < maxx and miny < maxy):
        raise GdalMcpError("invalid-argument", "projwin must be [minx, miny, maxx, maxy] with min < max")
    if projwin_crs:
        if ds.crs is None:
            raise GdalMcpError("invalid-argument", "projwin_crs given but the raster has no CRS")
        from rasterio.warp import transform_bounds

        minx, miny, maxx, maxy = transform_bounds(parse_crs(projwin_crs, "projwin_crs"), ds.crs, minx, miny, maxx, maxy,
                                                  densify_pts=21)
    inv = ~ds.transform
    cols, rows = zip(*(inv * (x, y) for x, y in ((minx, maxy), (maxx, miny), (minx, miny), (maxx, maxy))),
                     strict=True)
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
        raise GdalMcpError("invalid-argument", f"projwin lies outside the raster, whose bounds are "
                           f"[{b.left}, {b.bottom}, {b.right}, {b.top}] in its CRS")
    if (clipped.col_off, clipped.row_off, clipped.width, clipped.height) != (win.col_off, win.row_off, win.width,
                                                                             win.height):
        warnings.append("projwin reaches beyond the raster; the output covers only the overlap")
    return Window(int(clipped.col_off), int(clipped.row_off), int(clipped.width), int(clipped.height))


def exact_range(ds: Any, bands: list[int], window: Window) -> dict[int, tuple[float, float]]:
    from gdal_mcp.engine.raster.stats import band_statistics

    stats = band_statistics(ds, bands, window=window)
    return {b: (s.min if s.min is not None else 0.0, s.max if s.max is not None else 0.0) for b, s in stats.items()}


@wrap_gdal_errors
def convert(src: str, dst: str, *, format: str | None = None, options: dict[str, Any] | None = None,
            bands: list[int] | None = None, projwin: tuple[float, float, float, float] | None = None,
            projwin_crs: str | None = None, output_type: str | None = None, nodata: float | None = None,
            scale: bool | list[float] | None = None, resampling: str | None = None, threads: int = 1,
            progress: Progress = no_progress) -> tuple[RasterSummary, list[str]]:
    """Convert `src` to `dst` as gdal_translate would; returns the output summary and warnings.

    `resampling` is the COG overview resampling (the COG driver's OVERVIEW_RESAMPLING creation option).
    """
    warnings: list[str] = []
    driver = infer_driver(dst, format)
    options = creation_options(options)
    if resampling is not None:
        if driver == "COG":
            options.setdefault("OVERVIEW_RESAMPLING", resampling.upper())
        else:
            warnings.append(f"resampling applies to COG overviews only; it was ignored for {driver}")
    if driver in ("GTiff", "COG"):
        options = bounded_threads(options, threads)
    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError("invalid-argument", "the input has no bands (a container?); convert one of its "
                               "subdatasets (raster_info lists them)")
        indexes = list(bands) if bands else list(range(1, ds.count + 1))
        bad = [b for b in indexes if not 1 <= b <= ds.count]
        if bad:
            raise GdalMcpError("invalid-argument", f"band(s) {bad} do not exist; the raster has {ds.count} band(s)")
        window = projwin_window(ds, projwin, projwin_crs, warnings) if projwin else Window(0, 0, ds.width, ds.height)
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
                raise GdalMcpError("invalid-argument", "scale must be true or [src_min, src_max] or "
                                   "[src_min, src_max, dst_min, dst_max]")

        plain = (indexes == list(range(1, ds.count + 1)) and projwin is None and output_type is None
                 and nodata is None and not scaling)
        if plain and not writable_driver(driver):
            # Exactly gdal_translate: one CreateCopy from the source.
            progress(0.0, f"writing {driver} with GDAL CreateCopy")
            rasterio.shutil.copy(ds, dst, driver=driver, **options)
            progress(1.0, f"wrote {driver}")
            return summarize(dst), warnings

        masked = bool(scaling) or out_nodata != src_nodata

        def compute(w: Window) -> np.ndarray:
            src_win = Window(w.col_off + window.col_off, w.row_off + window.row_off, w.width, w.height)
            return transform_values(ds.read(indexes, window=src_win, masked=masked), indexes, scaling, dtype, out_nodata)

        write_windows(dst, driver, options, width=int(window.width), height=int(window.height), count=len(indexes),
                      dtype=dtype, crs=ds.crs, transform=ds.window_transform(window), nodata=out_nodata,
                      compute=compute, progress=progress, what="converted", window_pixels=WINDOW_PIXELS,
                      block=ds.block_shapes[indexes[0] - 1],
                      prepare=lambda out: copy_metadata(ds, out, indexes, dtype_changed=dtype != ds.dtypes[indexes[0] - 1]
                                                        or bool(scaling)))
    return summarize(dst), warnings


def transform_values(data: Any, indexes: list[int], scaling: dict[int, tuple[float, float, float, float]] | None,
                     dtype: str, out_nodata: float | None) -> Any:
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
