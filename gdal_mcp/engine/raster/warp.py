"""Reprojection, like gdalwarp: the output grid in tiles (engine/tiles.py), each read from GDAL's warped VRT of the
whole grid into an array wherever the executor runs it (locally one after another, or on a cluster's workers), and
written into its window of the output by the job. The VRT warps each of its 512 x 128 blocks on its own, with the
kernel's scale fixed for the whole grid, so a pixel's value depends neither on the tiles nor on the executor, and
raster_pipeline's reproject step gives the same pixels (`blockwise`). Each tile is read on one thread, `threads`
tiles at once, the source and the VRT kept open from one tile to the next (WarpedSources). Measured (bench.ab, 300 MB
source to EPSG:4326, nearest, 10 pairs): uncompressed output 0.79x the time of the earlier one-warp-per-tile path on
GDAL 3.10, DEFLATE output 1.00x.

Sources are georeferenced by a geotransform, GCPs (polynomial of order 1-3 or thin plate spline) or RPCs.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import rasterio
from rasterio.crs import CRS
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.warp import calculate_default_transform, transform_bounds
from rasterio.warp import reproject as rasterio_reproject

from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.margins import area_of_use_warning, ballpark_warning, margin_nodata, scan_window
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    bounded_threads,
    check_nodata,
    copy_metadata,
    fits,
    infer_driver,
    output_tiles,
    parse_dtype,
    summarize,
    write_tiles,
)
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

# GDAL's warp buffer for one tile (GDAL splits a tile whose buffers do not fit into chunks). For nearest, whose
# per-pixel work is a copy, small chunks that stay in the CPU caches are faster, the more so when several processes
# warp at once; the other kernels compute more per pixel and pay for the source margin each chunk reads again.
# Measured on 3 x 18300^2 random uint16 to EPSG:4326, 29 strips of 512 rows, 1 / 2 processes: nearest 1 MB 5.1 /
# 2.6 s, 2 MB 4.8 / 2.6 s, 4 MB 4.5 / 2.5 s, 16 MB 5.0 / 2.9 s, 32 MB 5.3 / 2.9 s; bilinear 4 MB 34.3 / 17.1 s,
# 16 MB 33.3 / 16.8 s. (Earlier, with 57 strips in one process: 64 MB 3.65 s / 265 MB peak RSS, 16 MB 3.93 s /
# 213 MB.)
WARP_MEM_LIMIT_MB = 16
NEAREST_WARP_MEM_LIMIT_MB = 4


def warp_mem_limit(resampling: str) -> int:
    """GDAL's warp buffer (MB) for one tile warped with `resampling` (a Resampling name)."""
    return NEAREST_WARP_MEM_LIMIT_MB if resampling == "nearest" else WARP_MEM_LIMIT_MB


def resampling_method(name: str) -> Resampling:
    try:
        return Resampling[name]
    except KeyError:
        raise GdalMcpError(
            "invalid-argument",
            f"unknown resampling {name!r}; use one of " + ", ".join(r.name for r in Resampling if r.value < 16),
        ) from None


def resolution_pair(resolution: float | list[float] | tuple[float, ...] | None) -> tuple[float, float] | None:
    if resolution is None:
        return None
    values = [resolution] * 2 if isinstance(resolution, int | float) else list(resolution)
    if len(values) != 2 or any(not v or v <= 0 for v in values):
        raise GdalMcpError("invalid-argument", "resolution must be a positive number or [xres, yres] in target CRS units")
    return float(values[0]), float(values[1])


def kernel_scale(
    src_crs: Any, src_transform: Affine, src_size: tuple[int, int], dst_crs: Any, dst_transform: Affine, dst_size: tuple[int, int]
) -> dict[str, str]:
    """GDAL's XSCALE and YSCALE warp options for the whole output grid: output pixels per source pixel, over the
    bounding box of the output's footprint in the source, clipped to the source (what GDALWarpOperation computes
    for each chunk it warps, when not given). Fixed for the whole grid, the resampling kernels (bilinear, cubic,
    average …, widened below 1) no longer depend on how the output is cut into chunks: a tile, a block of a
    warped VRT and a whole-image warp weigh the same source pixels. Nearest does not use them."""
    from rasterio.warp import transform as transform_points

    width, height = dst_size
    u = np.linspace(0.0, 1.0, 21)
    cols, rows = np.meshgrid(u * width, u * height)
    xs, ys = dst_transform * (cols.ravel(), rows.ravel())
    if CRS.from_user_input(src_crs) != CRS.from_user_input(dst_crs):
        xs, ys = transform_points(dst_crs, src_crs, np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    px, py = ~src_transform * (np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    ok = np.isfinite(px) & np.isfinite(py)
    if not ok.any():
        return {}
    x0, x1 = np.clip([px[ok].min(), px[ok].max()], 0, src_size[0])
    y0, y1 = np.clip([py[ok].min(), py[ok].max()], 0, src_size[1])
    if x1 - x0 <= 0 or y1 - y0 <= 0:
        return {}
    return {"XSCALE": repr(float(width / (x1 - x0))), "YSCALE": repr(float(height / (y1 - y0)))}


def target_grid(
    ds: Any,
    src_crs: Any,
    dst_crs: Any,
    *,
    resolution: tuple[float, float] | None,
    size: tuple[int, int] | None,
    bbox: tuple[float, float, float, float] | None,
    bbox_crs: Any,
    tap: bool,
    georef: SourceGeoref | None = None,
) -> tuple[Affine, int, int]:
    """The output grid, as gdalwarp chooses it for -t_srs with optional -tr / -ts / -te / -tap."""
    if georef is None:
        b = ds.bounds
        source: dict[str, Any] = {"left": b.left, "bottom": b.bottom, "right": b.right, "top": b.top}
    else:
        # bounds already say where a geotransformed source lies; GCPs and RPCs need their transformer options
        source = {
            **georef.grid_args,
            **({} if georef.method == "geotransform" else {k: v for k, v in georef.options.items() if k != "SRC_SRS"}),
        }
    if bbox is None:
        if size:
            transform, width, height = calculate_default_transform(
                src_crs, dst_crs, ds.width, ds.height, **source, dst_width=size[0], dst_height=size[1]
            )
        else:
            transform, width, height = calculate_default_transform(src_crs, dst_crs, ds.width, ds.height, **source)
        if not tap and resolution is None:
            return transform, width, height
        left, top = transform.c, transform.f
        minx, maxy, maxx, miny = left, top, left + width * transform.a, top + height * transform.e
    else:
        minx, miny, maxx, maxy = bbox
        if not (minx < maxx and miny < maxy):
            raise GdalMcpError("invalid-argument", "bbox must be [minx, miny, maxx, maxy] with min < max")
        if bbox_crs is not None and bbox_crs != dst_crs:
            minx, miny, maxx, maxy = transform_bounds(bbox_crs, dst_crs, minx, miny, maxx, maxy, densify_pts=21)
        if resolution is None and size is None:
            suggested, w, h = calculate_default_transform(src_crs, dst_crs, ds.width, ds.height, **source)
            resolution = (suggested.a, -suggested.e)
    if size:
        width, height = size
        return Affine(((maxx - minx) / width), 0, minx, 0, -((maxy - miny) / height), maxy), width, height
    assert resolution is not None
    xres, yres = resolution
    if tap:
        minx, maxx = math.floor(minx / xres) * xres, math.ceil(maxx / xres) * xres
        miny, maxy = math.floor(miny / yres) * yres, math.ceil(maxy / yres) * yres
    width = max(1, int((maxx - minx + xres / 2) / xres))
    height = max(1, int((maxy - miny + yres / 2) / yres))
    return Affine(xres, 0, minx, 0, -yres, maxy), width, height


GcpTransformer = Literal["polynomial", "polynomial_1", "polynomial_2", "polynomial_3", "tps", "rpc"]


#: an explicit resolution that gives this many times fewer pixels than the input's detail gets a warning (a resolution
#: in the wrong units: 0.3 "degrees" meant as metres-like detail gave an 8x7 raster of a 791x718 input, silently)
COARSE_FACTOR = 100


@dataclass
class SourceGeoref:
    """How the source's pixels map to its CRS: geotransform, GCPs (polynomial or TPS) or RPCs, as gdalwarp picks."""

    crs: Any
    method: str  # "geotransform", "gcp" or "rpc"
    grid_args: dict[str, Any]  # for calculate_default_transform: bounds, gcps= or rpcs=
    options: dict[str, str]  # GDAL transformer options (SRC_METHOD, MAX_GCP_ORDER, SRC_SRS)


def source_georef(ds: Any, src_crs: str | None, gcp_transformer: str | None, warnings: list[str]) -> SourceGeoref:
    gcps, gcp_crs = ds.gcps
    rpcs = ds.rpcs
    has_transform = not ds.transform.is_identity or not (gcps or rpcs)
    override = parse_crs(src_crs, "src_crs") if src_crs else None
    options: dict[str, str] = {}
    if gcp_transformer is None:
        method = "geotransform" if has_transform else ("rpc" if rpcs else "gcp")
    elif gcp_transformer == "rpc":
        if not rpcs:
            raise GdalMcpError(
                "invalid-argument",
                "gcp_transformer='rpc' but the input has no RPCs (raster_info shows rpc: false); leave gcp_transformer unset",
            )
        method = "rpc"
    elif gcp_transformer in ("polynomial", "polynomial_1", "polynomial_2", "polynomial_3", "tps"):
        if not gcps:
            raise GdalMcpError(
                "invalid-argument",
                f"gcp_transformer={gcp_transformer!r} but the input has no GCPs "
                "(raster_info shows them); leave gcp_transformer unset",
            )
        method = "gcp"
        options["SRC_METHOD"] = "GCP_TPS" if gcp_transformer == "tps" else "GCP_POLYNOMIAL"
        if gcp_transformer.startswith("polynomial_"):
            order = int(gcp_transformer[-1])
            needed = (3, 6, 10)[order - 1]
            if len(gcps) < needed:
                raise GdalMcpError(
                    "invalid-argument",
                    f"a polynomial of order {order} needs at least {needed} GCPs; the input has {len(gcps)}: use a lower order",
                )
            options["MAX_GCP_ORDER"] = str(order)
    else:
        raise GdalMcpError(
            "invalid-argument",
            f"unknown gcp_transformer {gcp_transformer!r}; use polynomial, polynomial_1, polynomial_2, polynomial_3, tps or rpc",
        )
    if method == "rpc":
        options["SRC_METHOD"] = "RPC"
        crs = override or CRS.from_epsg(4326)
        if override is not None and override != CRS.from_epsg(4326):
            raise GdalMcpError("invalid-argument", "RPCs are always relative to EPSG:4326; do not pass src_crs")
        return SourceGeoref(crs, "rpc", {"rpcs": rpcs}, options)
    if method == "gcp":
        options.setdefault("SRC_METHOD", "GCP_POLYNOMIAL")
        crs = override or gcp_crs
        if crs is None or not crs.to_wkt():
            raise GdalMcpError("invalid-argument", "the input's GCPs have no CRS; pass src_crs to say what it is")
        if override is not None:
            options["SRC_SRS"] = _srs_option(override)
        return SourceGeoref(crs, "gcp", {"gcps": gcps}, options)
    crs = override or ds.crs
    if crs is None or not crs.to_wkt():
        raise GdalMcpError("invalid-argument", "the input has no CRS; pass src_crs to say what it is")
    if override is not None:
        if ds.crs:
            warnings.append("src_crs overrides the CRS stored in the input")
        options["SRC_SRS"] = _srs_option(override)
    if ds.transform.is_identity:  # no geotransform at all: pixel coordinates are the map coordinates
        options["SRC_METHOD"] = "NO_GEOTRANSFORM"
    b = ds.bounds
    return SourceGeoref(crs, "geotransform", {"left": b.left, "bottom": b.bottom, "right": b.right, "top": b.top}, options)


def _srs_option(crs: Any) -> str:
    """A CRS as a transformer option value (rasterio upper-cases option values: an EPSG code survives that)."""
    code = crs.to_epsg()
    if code and CRS.from_epsg(code) == crs:
        return f"EPSG:{code}"
    return str(crs.to_wkt("WKT2_2019"))


def footprint_misses(ds: Any, georef: SourceGeoref, dst_crs: Any, transform: Affine, width: int, height: int) -> bool:
    """Whether the output grid has areas outside the source's footprint (pixels no source pixel reaches)."""
    from rasterio.transform import GCPTransformer, RPCTransformer
    from rasterio.warp import transform as transform_points
    from shapely.geometry import Polygon, box

    n = 64
    u = np.linspace(0, 1, n, endpoint=False)
    w, h = ds.width, ds.height
    cols = np.concatenate([u * w, np.full(n, w), w - u * w, np.zeros(n)])
    rows = np.concatenate([np.zeros(n), u * h, np.full(n, h), h - u * h])
    try:
        if georef.method == "geotransform":
            xs, ys = ds.transform * (cols, rows)
        elif georef.method == "gcp":
            with GCPTransformer(georef.grid_args["gcps"], tps=georef.options.get("SRC_METHOD") == "GCP_TPS") as t:
                xs, ys = t.xy(rows, cols, offset="ul")
        else:
            with RPCTransformer(georef.grid_args["rpcs"]) as t:
                xs, ys = t.xy(rows, cols, offset="ul")
        xs, ys = transform_points(georef.crs, dst_crs, np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
        px, py = ~transform * (np.asarray(xs), np.asarray(ys))
        shape = Polygon(zip(px, py, strict=True)).buffer(0)
        if width < 2 or height < 2:
            return bool(box(0, 0, width, height).difference(shape).area > 0.5)
        # GDAL warps a pixel whose centre falls in the source: the box of the centres, outside the footprint
        return bool(box(0.5, 0.5, width - 0.5, height - 0.5).difference(shape).area > 0.01)
    except Exception:  # noqa: BLE001 - a footprint GDAL cannot trace: assume margins, the warning is harmless
        return True


@wrap_gdal_errors
def reproject(
    src: str,
    dst: str,
    *,
    dst_crs: str | None = None,
    src_crs: str | None = None,
    resampling: str = "nearest",
    resolution: float | list[float] | None = None,
    size: list[int] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    nodata: float | None = None,
    src_nodata: float | None = None,
    output_type: str | None = None,
    like: str | None = None,
    gcp_transformer: GcpTransformer | None = None,
    target_aligned_pixels: bool = False,
    format: str | None = None,
    options: dict[str, Any] | None = None,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Warp `src` as gdalwarp does, keeping the full source extent unless a bbox is given.

    The grid comes from `like` (another raster's CRS, transform and size), or from dst_crs (default: the
    source's CRS) with resolution / size / bbox. Sources without a geotransform are warped through their
    GCPs (polynomial or thin plate spline) or RPCs. The output is warped tile by tile (`warp_tile`, run by the
    executor) and written window by window (a staged GTiff for CreateCopy-only formats such as COG).
    """
    warnings: list[str] = []
    if like is not None:
        clash = [
            n
            for n, v in (
                ("dst_crs", dst_crs),
                ("resolution", resolution),
                ("size", size),
                ("bbox", bbox),
                ("target_aligned_pixels", target_aligned_pixels or None),
            )
            if v is not None
        ]
        if clash:
            raise GdalMcpError(
                "invalid-argument",
                f"like gives the whole output grid (CRS, extent, pixel size); do not also give {', '.join(clash)}",
            )
    if resolution is not None and size is not None:
        raise GdalMcpError("invalid-argument", "give resolution or size, not both (gdalwarp -tr and -ts exclude each other)")
    if target_aligned_pixels and resolution is None:
        raise GdalMcpError("invalid-argument", "target_aligned_pixels needs resolution")
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise GdalMcpError("invalid-argument", "size must be [width, height] in pixels, both >= 1")
    res = resolution_pair(resolution)
    method = resampling_method(resampling)
    driver = infer_driver(dst, format)
    opts = creation_options(options)
    if driver in ("GTiff", "COG"):
        opts = bounded_threads(opts, threads)
    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument",
                "the input has no bands (a container?); reproject one of its subdatasets (raster_info lists them)",
            )
        georef = source_georef(ds, src_crs, gcp_transformer, warnings)
        if like is None and dst_crs is None and resolution is None and size is None and georef.method == "geotransform":
            raise GdalMcpError(
                "invalid-argument",
                "say what grid to make: dst_crs (to reproject), like (a raster "
                "whose grid to copy), or resolution / size (to resample in the input's CRS)",
            )
        if like is not None:
            with open_raster(like) as ref:
                if ref.crs is None or not ref.crs.to_wkt():
                    raise GdalMcpError("invalid-argument", "like has no CRS: its grid cannot be used")
                target, transform, width, height = ref.crs, ref.transform, ref.width, ref.height
        else:
            target = parse_crs(dst_crs, "dst_crs") if dst_crs else georef.crs
            area_crs = parse_crs(bbox_crs, "bbox_crs") if bbox_crs else (target if bbox else None)
            transform, width, height = target_grid(
                ds,
                georef.crs,
                target,
                resolution=res,
                size=(size[0], size[1]) if size else None,
                bbox=bbox,
                bbox_crs=area_crs,
                tap=target_aligned_pixels,
                georef=georef,
            )
        units = describe_units(target, crs_label(target))
        extent = (abs(transform.a) * width, abs(transform.e) * height)
        natural: tuple[Affine, int, int] | None = None
        if like is None and (res is not None or size is not None):
            # the area at the input's own detail (gdalwarp's default grid over the same bbox): what a resolution in
            # the wrong units is measured against (the grid just made spans its own pixels, not the area)
            natural = target_grid(
                ds,
                georef.crs,
                target,
                resolution=None,
                size=None,
                bbox=bbox,
                bbox_crs=area_crs,
                tap=False,
                georef=georef,
            )
            extent = (abs(natural[0].a) * natural[1], abs(natural[0].e) * natural[2])
        check_grid(width, height, max_pixels=max_pixels, crs_units=units, resolution=res, extent=extent)
        if natural is not None and res is not None and natural[1] * natural[2] >= COARSE_FACTOR * width * height:
            unit = units.split(" (", 1)[0]
            warnings.append(
                f"the output grid is {width}x{height} pixels, {natural[1] * natural[2] // (width * height)} times "
                f"fewer than the input's detail gives: resolution {res[0]:.6g} {unit} is coarse for an area of about "
                f"{extent[0]:.6g} x {extent[1]:.6g} {unit}; the input's own resolution there is about "
                f"{abs(natural[0].a):.6g} {unit} (resolution is in the target CRS's units: {units})"
            )
        dtype = parse_dtype(output_type) or ds.dtypes[0]
        in_nodata = src_nodata if src_nodata is not None else ds.nodata
        if src_nodata is not None:
            check_nodata(src_nodata, ds.dtypes[0])
        out_nodata = nodata if nodata is not None else in_nodata
        if out_nodata is not None:
            if not fits(float(out_nodata), dtype) and nodata is None:
                warnings.append(f"the input's nodata {out_nodata} does not fit {dtype}; the output has no nodata value")
                out_nodata = None
            else:
                out_nodata = check_nodata(out_nodata, dtype)
        area = area_of_use_warning(
            target, georef.crs, transform, width, height, tuple(ds.bounds) if georef.method == "geotransform" else None
        )
        if area is not None:
            warnings.append(area)
        ballpark = ballpark_warning(georef.crs, target, tuple(ds.bounds) if georef.method == "geotransform" else None)
        if ballpark is not None:
            warnings.append(ballpark)
        alpha = any(c.name == "alpha" for c in ds.colorinterp)  # an alpha band marks the margins itself (0 there)
        fill_only = False
        if out_nodata is None and not alpha and footprint_misses(ds, georef, target, transform, width, height):
            progress(0.0, "choosing a nodata value for the margins the input does not cover")
            out_nodata, note = margin_nodata(
                src, ds, georef, dtype, target=target, transform=transform, width=width, height=height, threads=threads
            )
            warnings.append(note)
            # Nearest copies input values, and the scan found this one nowhere in the input: no pixel but the margins
            # can hold it (WarpTile.fill_only). Only where the scan is exact: the output type is the input's (no
            # rounding or clamping between the two), 8 to 32 bits (every value checked, and a float holds it
            # exactly), and the scan read the whole input (its window of a part is an estimate a curved edge can
            # exceed). Elsewhere GDAL's destination nodata keeps a pixel that takes the value off it.
            fill_only = (
                out_nodata is not None
                and method == Resampling.nearest
                and dtype == ds.dtypes[0]
                and np.dtype(dtype).kind in "iu"
                and np.dtype(dtype).itemsize <= 4
                and scan_window(ds, georef, target, transform, width, height) == (0, 0, ds.width, ds.height)
            )
        warp_options = {**georef.options}
        if georef.method == "geotransform" and "SRC_METHOD" not in warp_options:
            warp_options.update(kernel_scale(georef.crs, ds.transform, (ds.width, ds.height), target, transform, (width, height)))
        _warp(
            ds,
            src,
            dst,
            driver,
            opts,
            width=width,
            height=height,
            dtype=dtype,
            crs=target,
            transform=transform,
            src_nodata=in_nodata,
            nodata=out_nodata,
            resampling=method,
            threads=threads,
            warp_options=warp_options,
            progress=progress,
            fill_only=fill_only,
        )
    return summarize(dst), warnings


def _warp(
    ds: Any,
    src: str,
    dst: str,
    driver: str,
    options: dict[str, str],
    *,
    width: int,
    height: int,
    dtype: str,
    crs: Any,
    transform: Affine,
    src_nodata: float | None,
    nodata: float | None,
    resampling: Resampling,
    threads: int,
    warp_options: dict[str, str],
    progress: Progress,
    fill_only: bool = False,
) -> None:
    """The output grid as tiles (`tiles.plan`), each warped by `warp_tile` wherever the executor runs it and
    written into its window here; CreateCopy-only drivers get a GTiff staged beside `dst`, then copied.

    One code path in every executor, so an output is pixel-identical whichever ran it (`blockwise`: the pixels do not
    depend on the tiles). Measured on 3 x 9000^2 uint16: 2048 tiles into arrays plus window writes 1.01 s, one
    dataset-to-dataset warp 1.20 s.
    """
    plan, specs = warp_tiles(
        ds,
        src,
        driver,
        options,
        width=width,
        height=height,
        dtype=dtype,
        crs=crs,
        transform=transform,
        src_nodata=src_nodata,
        nodata=nodata,
        resampling=resampling,
        threads=threads,
        warp_options=warp_options,
        fill_only=fill_only,
    )

    def prepare(out: Any) -> None:
        """gdalwarp's metadata: colour interpretation, descriptions, units, scale/offset, tags, palette."""
        copy_metadata(ds, out, dtype_changed=dtype != ds.dtypes[0], rescaled=False)

    write_tiles(
        dst,
        driver,
        options,
        width=width,
        height=height,
        count=ds.count,
        dtype=dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
        fn=warp_tile,
        specs=specs,
        windows=[t.window for t in plan],
        progress=progress,
        what="warped",
        prepare=prepare,
        source=ds,
        start=f"warping {width}x{height} x {ds.count} band(s) in {len(plan)} tile(s)",
        # blockwise tiles warp on one thread each: `threads` of them at once (GDAL's threaded warper, for the other
        # sources, uses `threads` within one tile)
        concurrent=max(1, threads) if specs and is_blockwise(specs[0]) else 1,
    )


def warp_tiles(
    ds: Any,
    src: str,
    driver: str,
    options: dict[str, str],
    *,
    width: int,
    height: int,
    dtype: str,
    crs: Any,
    transform: Affine,
    src_nodata: float | None,
    nodata: float | None,
    resampling: Resampling,
    threads: int,
    warp_options: dict[str, str],
    fill_only: bool = False,
) -> tuple[list[Any], list[WarpTile]]:
    """The output's tile plan (`output_tiles`) and a WarpTile for each tile (bench.scale warps them too)."""

    memory = BLOCKWISE_MEMORY if set(warp_options) <= BLOCKWISE_OPTIONS else 1
    plan = output_tiles(driver, options, width, height, bytes_per_pixel=ds.count * np.dtype(dtype).itemsize * memory)
    common = WarpTile(
        src=src,
        indexes=tuple(range(1, ds.count + 1)),
        window=(0, 0, width, height),
        transform=tuple(transform)[:6],
        crs=crs.to_wkt(version="WKT2_2019"),
        dtype=dtype,
        src_nodata=src_nodata,
        nodata=nodata,
        resampling=resampling.name,
        warp_options=tuple(sorted(warp_options.items())),
        threads=max(1, threads),
        grid=(width, height),
        grid_transform=tuple(transform)[:6],
        fill_only=fill_only and nodata is not None,
    )
    specs = [
        replace(common, window=t.window, transform=tuple(transform @ Affine.translation(t.window[0], t.window[1]))[:6])
        for t in plan
    ]
    return plan, specs


@dataclass(frozen=True)
class WarpTile:
    """One output tile of a reprojection: everything `warp_tile` needs (picklable; it may run on another machine)."""

    src: str
    indexes: tuple[int, ...]
    window: tuple[int, int, int, int]  # (col_off, row_off, width, height) in the output grid
    transform: tuple[float, ...]  # the tile's own geotransform (a, b, c, d, e, f)
    crs: str  # the output CRS as WKT2
    dtype: str
    src_nodata: float | None
    nodata: float | None
    resampling: str
    warp_options: tuple[tuple[str, str], ...]  # GDAL transformer options (SRC_METHOD, SRC_SRS … for GCPs/RPCs)
    threads: int
    grid: tuple[int, int] = (0, 0)  # the whole output's (width, height); (0, 0): the tile alone (chunked warp)
    grid_transform: tuple[float, ...] = ()  # the whole output's geotransform
    #: `nodata` only fills what no source pixel reaches (INIT_DEST), and is not the warp's destination nodata: for a
    #: value no output pixel can take otherwise (the margin value of a source without nodata, resampled by nearest).
    #: The pixels are the same; GDAL then skips its destination-validity pass (GDALWarpNoDataMasker) and warps with
    #: its unmasked kernel: 3 x 12000^2 uint16, the warp's CPU -20 to -25 % (BENCHMARKS.md). Blockwise tiles only.
    fill_only: bool = False


#: the warp options `blockwise` takes (others, GCP and RPC transformers, warp one chunk per tile)
BLOCKWISE_OPTIONS = frozenset({"SRC_SRS", "XSCALE", "YSCALE"})
#: what a blockwise tile's output pixel costs, in multiples of its bytes, when the tiles are planned: the pixels
#: themselves, their warped blocks in GDAL's block cache, and a second tile in flight (tiles of 1024^2 for 3 x uint16,
#: where 2048^2 overflowed the workers' 64 MB block cache; 3 x 18000^2 uint16 to EPSG:4326, nearest, uncompressed
#: tiled output: 2048^2 tiles 15.2 s / 377 MB peak RSS, 1024^2 13.7-17.7 s / 272 MB, the one-warp-per-tile path
#: 16.5-17.7 s / 311-322 MB)
BLOCKWISE_MEMORY = 4


def warp_tile(spec: WarpTile, out: Any = None) -> Any:
    """Warp the source into one output tile: a (bands, height, width) array of the output type (`out`, when given:
    any strides, e.g. the pixel-interleaved buffer a raw GTiff write takes, rasterio passes them to GDAL).

    Every pixel is computed in its block of the whole output grid (`blockwise`), so a pixel's value does not
    depend on the tile plan, the executor, or which window of the output is read: raster_pipeline's reproject step
    reads GDAL's warped VRT by the same blocks, and gives the same pixels (tests/engine/raster/test_pipeline.py).
    Sources warped through GCPs, RPCs or without a geotransform are warped as one chunk per tile (their transformer
    options are not those of a warped VRT)."""

    _, _, width, height = spec.window
    fill = spec.nodata if spec.nodata is not None else 0
    # GDAL writes every pixel of the destination (INIT_DEST, no SKIP_NOSOURCE: chunks without any source pixel are
    # written filled too), so a reused `out` need not be cleared (test_warp_into_a_used_buffer_leaves_nothing_of_it).
    dest = np.full((len(spec.indexes), height, width), fill, dtype=spec.dtype) if out is None else out
    if is_blockwise(spec):
        return blockwise(spec, dest)
    options = dict(spec.warp_options)
    with open_raster(spec.src) as ds, rasterio.Env(GDAL_NUM_THREADS=str(spec.threads)):
        rasterio_reproject(
            rasterio.band(ds, list(spec.indexes)),
            dest,
            dst_transform=Affine(*spec.transform),
            dst_crs=CRS.from_wkt(spec.crs),
            src_nodata=spec.src_nodata,
            dst_nodata=spec.nodata,
            resampling=Resampling[spec.resampling],
            num_threads=spec.threads,
            warp_mem_limit=warp_mem_limit(spec.resampling),
            init_dest_nodata=True,
            **options,
        )
    return dest


def is_blockwise(spec: WarpTile) -> bool:
    """Whether `warp_tile` reads the tile from the grid's warped VRT (a geotransform source, the grid known)."""
    return spec.grid != (0, 0) and set(dict(spec.warp_options)) <= BLOCKWISE_OPTIONS


def blockwise(spec: WarpTile, dest: Any) -> Any:
    """`dest` (the tile `spec.window`) read from a warped VRT of the whole output grid, block by block
    (GDAL_VRT_WARP_USE_DATASET_RASTERIO=NO: GDAL then warps each block of the grid, 512 x 128
    (VRTWarpedDataset's default, which `gdal raster reproject` in a pipeline keeps), on its own, wherever the
    window starts; with the default it warps the window requested as one chunk, and the approximate transformer and
    the kernel's scale, both computed per chunk, make the pixels depend on the window). Inside a tiles.Session the
    source and its VRT stay open for the next tile of the same warp (WarpedSources): the source blocks and warped
    blocks two tiles share are decoded and warped once."""
    from rasterio.windows import Window

    from gdal_mcp.engine import tiles

    col, row, width, height = spec.window
    session = tiles.Session.current()
    with rasterio.Env(GDAL_VRT_WARP_USE_DATASET_RASTERIO="NO"), contextlib.ExitStack() as stack:
        vrt = session.resource("warped", WarpedSources).get(spec) if session is not None else _warped_vrt(spec, stack)
        # Block by block of the VRT, the job's stop checked between them (tiles.check_stop): a whole tile in one read
        # is one GDAL call nothing interrupts, seconds long when each pixel averages many source pixels. The VRT
        # warps the same blocks either way: the same pixels, the same work.
        # The pieces are the grid's blocks cut to the window: a window need not start on a block (strip tiles).
        bh, bw = vrt.block_shapes[0] if vrt.block_shapes else (height, width)
        for block_top in range(row - row % bh, row + height, bh):
            top, bottom = max(block_top, row), min(block_top + bh, row + height)
            for block_left in range(col - col % bw, col + width, bw):
                left, right = max(block_left, col), min(block_left + bw, col + width)
                tiles.check_stop()
                vrt.read(
                    list(spec.indexes),
                    window=Window(left, top, right - left, bottom - top),
                    out=dest[:, top - row : bottom - row, left - col : right - col],
                )
    return dest


def _warped_vrt(spec: WarpTile, stack: contextlib.ExitStack) -> Any:
    """The warped VRT of `spec`'s whole grid over its source, both open until `stack` closes."""
    from rasterio.vrt import WarpedVRT

    from gdal_mcp.engine.raster.opening import open_own

    options = dict(spec.warp_options)
    src_crs = options.pop("SRC_SRS", None)
    ds = stack.enter_context(open_own(spec.src))
    nodata: Any = spec.nodata
    fill: dict[str, Any] = {}
    if spec.fill_only and spec.nodata is not None:
        fill = {"init_dest_nodata": False, "INIT_DEST": repr(spec.nodata)}
        nodata = None
    return stack.enter_context(
        WarpedVRT(
            ds,
            src_crs=src_crs,
            crs=CRS.from_wkt(spec.crs),
            transform=Affine(*spec.grid_transform),
            width=spec.grid[0],
            height=spec.grid[1],
            resampling=Resampling[spec.resampling],
            src_nodata=spec.src_nodata if spec.src_nodata is not None else ds.nodata,
            nodata=nodata,
            dtype=spec.dtype,
            **fill,
            **options,
        )
    )


class WarpedSources:
    """The warped VRT the tiles of one thread read (a tiles.Session resource): kept open from one tile to the next
    of the same warp, closed when another warp's tile comes or the session ends. Like opening.Keeper, only for tiles,
    which never change their sources while the job runs."""

    def __init__(self) -> None:
        self._key: WarpTile | None = None
        self._stack: contextlib.ExitStack | None = None
        self._vrt: Any = None

    def get(self, spec: WarpTile) -> Any:
        key = replace(spec, window=(0, 0, 0, 0), transform=(), threads=0)
        if key != self._key:
            self.close()
            stack = contextlib.ExitStack()
            try:
                self._vrt = _warped_vrt(spec, stack)
            except BaseException:
                stack.close()
                raise
            self._key, self._stack = key, stack
        return self._vrt

    def close(self) -> None:
        stack, self._stack, self._key, self._vrt = self._stack, None, None, None
        if stack is not None:
            stack.close()
