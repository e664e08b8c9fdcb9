"""Mosaics, like gdalbuildvrt (+ gdal_translate) / gdal_merge: later inputs win where they overlap.

rasterio has no VRT builder, so the mosaic is described as VRT XML (the one place we write it), then either
saved (format="VRT") or computed in output tiles (engine/tiles.py): each tile reads its window from a VRT of
the same grid holding only the inputs that reach it (`mosaic_tile`, run wherever the executor runs it), and the
job writes it into its window of the output.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.warp import calculate_default_transform, transform_bounds

from gdal_mcp.engine import guard
from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    GDAL_TYPE_NAMES,
    bounded_threads,
    copy_metadata,
    fits,
    infer_driver,
    output_tiles,
    summarize,
    write_tiles,
)
from gdal_mcp.engine.raster.warp import reproject, resampling_method
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary


@dataclass
class Source:
    path: str
    width: int
    height: int
    count: int
    dtype: str
    nodata: float | None
    bounds: tuple[float, float, float, float]
    res: tuple[float, float]
    crs: Any
    colorinterp: list[str]
    block: tuple[int, int]


def describe(path: str) -> Source:
    with open_raster(path) as ds:
        if ds.count == 0:
            raise GdalMcpError("invalid-argument", f"{path} has no bands (a container?); use one of its subdatasets")
        if ds.transform.b or ds.transform.d:
            raise GdalMcpError("unsupported", f"{path} is rotated; reproject it first")
        return Source(
            path,
            ds.width,
            ds.height,
            ds.count,
            ds.dtypes[0],
            ds.nodata,
            tuple(ds.bounds),
            (abs(ds.transform.a), abs(ds.transform.e)),
            ds.crs,
            [c.name for c in ds.colorinterp],
            ds.block_shapes[0],
        )


def choose_resolution(resolution: str | list[float], sources: list[Source]) -> tuple[float, float]:
    if isinstance(resolution, list | tuple):
        if len(resolution) != 2 or min(resolution) <= 0:
            raise GdalMcpError("invalid-argument", "resolution must be highest, lowest, average or [xres, yres] > 0")
        return float(resolution[0]), float(resolution[1])
    xs, ys = [s.res[0] for s in sources], [s.res[1] for s in sources]
    if resolution == "highest":
        return min(xs), min(ys)
    if resolution == "lowest":
        return max(xs), max(ys)
    if resolution == "average":
        # gdalbuildvrt's AVERAGE_RESOLUTION: the sums of the inputs' pixel sizes, divided by their count.
        we, ns = 0.0, 0.0
        for x, y in zip(xs, ys, strict=True):
            we += x
            ns += y
        return we / len(xs), ns / len(ys)
    raise GdalMcpError("invalid-argument", f"resolution {resolution!r}: use highest, lowest, average or [xres, yres]")


def _target_bbox(bbox: Any, bbox_crs: str | None, target: Any) -> tuple[float, float, float, float]:
    """gdalbuildvrt -te: the output extent, given in `bbox_crs` (default the output CRS)."""
    try:
        minx, miny, maxx, maxy = (float(v) for v in bbox)
    except (TypeError, ValueError):
        minx = miny = maxx = maxy = math.nan
    if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)) or not (minx < maxx and miny < maxy):
        raise GdalMcpError(
            "invalid-argument", "bbox must be four finite numbers [minx, miny, maxx, maxy] with minx < maxx and miny < maxy"
        )
    if bbox_crs is None:
        return minx, miny, maxx, maxy
    given = parse_crs(bbox_crs, "bbox_crs")
    if target is None:
        raise GdalMcpError(
            "invalid-argument",
            "the inputs have no CRS, so a bbox in bbox_crs cannot be placed; omit "
            "bbox_crs and give the bbox in the inputs' coordinates",
        )
    if given == target:
        return minx, miny, maxx, maxy
    try:
        out = transform_bounds(given, target, minx, miny, maxx, maxy, densify_pts=21)
    except Exception:  # noqa: BLE001 - PROJ refuses: say so below
        out = (math.nan,) * 4
    if not all(math.isfinite(v) for v in out) or not (out[0] < out[2] and out[1] < out[3]):
        raise GdalMcpError(
            "invalid-argument",
            f"bbox cannot be transformed from {bbox_crs} to the output CRS; give it in the output CRS (omit bbox_crs)",
        )
    return float(out[0]), float(out[1]), float(out[2]), float(out[3])


def dst_rect(s: Source, minx: float, maxy: float, res: tuple[float, float]) -> tuple[float, float, float, float]:
    """Where a source lies on the mosaic grid, in (fractional) output pixels: x_off, y_off, x_size, y_size."""
    return (
        (s.bounds[0] - minx) / res[0],
        (maxy - s.bounds[3]) / res[1],
        (s.bounds[2] - s.bounds[0]) / res[0],
        (s.bounds[3] - s.bounds[1]) / res[1],
    )


def vrt_xml(
    sources: list[Source],
    *,
    width: int,
    height: int,
    minx: float,
    maxy: float,
    res: tuple[float, float],
    crs: Any,
    separate: bool,
    nodata: float | None,
    resampling: str,
    relative_to: str | None = None,
    keep: Collection[int] | None = None,
) -> str:
    """gdalbuildvrt's XML: ComplexSources honour each input's nodata; later sources are drawn on top.

    `keep`: the indexes of the sources to write (the others are left out, their bands stay), for a tile's VRT.
    """

    def name(path: str) -> tuple[str, int]:
        if relative_to and not path.startswith("/vsi"):
            return os.path.relpath(path, relative_to), 1
        return path, 0

    def source(s: Source, band: int) -> str:
        fn, rel = name(s.path)
        x_off, y_off, x_size, y_size = dst_rect(s, minx, maxy, res)
        kind = "ComplexSource" if s.nodata is not None else "SimpleSource"
        attr = f' resampling="{resampling}"' if resampling != "nearest" else ""
        nd = f"<NODATA>{_num(s.nodata)}</NODATA>" if s.nodata is not None else ""
        return (
            f'<{kind}{attr}><SourceFilename relativeToVRT="{rel}">{escape(fn)}</SourceFilename>'
            f"<SourceBand>{band}</SourceBand>"
            f'<SrcRect xOff="0" yOff="0" xSize="{s.width}" ySize="{s.height}"/>'
            f'<DstRect xOff="{x_off!r}" yOff="{y_off!r}" xSize="{x_size!r}" ySize="{y_size!r}"/>{nd}</{kind}>'
        )

    dtype = GDAL_TYPE_NAMES[sources[0].dtype]
    bands: list[str] = []
    layout: list[tuple[str, list[tuple[Source, int]]]]
    if separate:
        layout = [
            ("gray", [(s, b)] if keep is None or k in keep else []) for k, s in enumerate(sources) for b in range(1, s.count + 1)
        ]
    else:
        drawn = sources if keep is None else [sources[k] for k in sorted(keep)]
        layout = [(sources[0].colorinterp[b - 1], [(s, b) for s in drawn]) for b in range(1, sources[0].count + 1)]
    for i, (ci, members) in enumerate(layout, start=1):
        nd = f"<NoDataValue>{_num(nodata)}</NoDataValue>" if nodata is not None else ""
        ci_xml = f"<ColorInterp>{ci.capitalize()}</ColorInterp>" if ci not in ("undefined",) else ""
        bands.append(
            f'<VRTRasterBand dataType="{dtype}" band="{i}">{nd}{ci_xml}'
            + "".join(source(s, b) for s, b in members)
            + "</VRTRasterBand>"
        )
    srs = f"<SRS>{escape(crs.to_wkt())}</SRS>" if crs is not None else ""
    gt = f"<GeoTransform>{minx!r}, {res[0]!r}, 0.0, {maxy!r}, 0.0, {-res[1]!r}</GeoTransform>"
    return f'<VRTDataset rasterXSize="{width}" rasterYSize="{height}">{srs}{gt}' + "".join(bands) + "</VRTDataset>"


def _num(v: float) -> str:
    return "nan" if v != v else repr(float(v)) if not float(v).is_integer() else str(int(v))


#: a mosaic whose inputs cover less of its extent than this gets a warning (inputs far apart: mostly nodata)
SPARSE_SHARE = 0.25


def _covered_share(sources: list[Any], extent: tuple[float, float, float, float]) -> float:
    """The share of `extent` the inputs' bounds cover (their union, on a coarse raster of 256 x 256 cells)."""
    minx, miny, maxx, maxy = extent
    if maxx <= minx or maxy <= miny:
        return 1.0
    n = 256
    cells = np.zeros((n, n), dtype=bool)
    for s in sources:
        x0, y0, x1, y1 = s.bounds
        c0, c1 = int((x0 - minx) / (maxx - minx) * n), int(np.ceil((x1 - minx) / (maxx - minx) * n))
        r0, r1 = int((y0 - miny) / (maxy - miny) * n), int(np.ceil((y1 - miny) / (maxy - miny) * n))
        cells[max(0, r0) : min(n, r1), max(0, c0) : min(n, c1)] = True
    return float(cells.mean())


@wrap_gdal_errors
def mosaic(
    inputs: list[str],
    dst: str,
    *,
    vrt_dir: str | None = None,
    resolution: str | list[float] = "average",
    separate: bool = False,
    dst_crs: str | None = None,
    resampling: str = "nearest",
    nodata: float | None = None,
    src_nodata: float | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    bbox_crs: str | None = None,
    format: str | None = None,
    options: dict[str, Any] | None = None,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Mosaic `inputs` (in order; later ones on top) into `dst`. `vrt_dir`: where a VRT output will live.

    `src_nodata` is gdalbuildvrt -srcnodata (that value in every input is nodata, e.g. black collars; it is
    also the output's nodata unless `nodata` is given); `bbox` is -te (the output extent, in `bbox_crs`,
    default the output CRS).
    """
    warnings: list[str] = []
    if bbox_crs is not None and bbox is None:
        raise GdalMcpError("invalid-argument", "bbox_crs was given without bbox; give bbox too, or omit bbox_crs")
    if len(inputs) < 1:
        raise GdalMcpError("invalid-argument", "inputs is empty; give at least one raster")
    resampling_method(resampling)
    driver = infer_driver(dst, format)
    opts = creation_options(options)
    if driver in ("GTiff", "COG"):
        opts = bounded_threads(opts, threads)
    sources = [describe(p) for p in inputs]
    if not separate and len({s.count for s in sources}) > 1:
        raise GdalMcpError(
            "invalid-argument",
            "inputs have different band counts "
            f"({', '.join(str(s.count) for s in sources)}); use separate=true or select bands first",
        )
    if len({s.dtype for s in sources}) > 1:
        warnings.append(f"inputs have different data types; the output uses the first one ({sources[0].dtype})")
    with_crs = [s for s in sources if s.crs is not None]
    if with_crs and len(with_crs) != len(sources):
        raise GdalMcpError("invalid-argument", "some inputs have no CRS; give every input a CRS (or none)")
    target = parse_crs(dst_crs, "dst_crs") if dst_crs else sources[0].crs
    foreign = [s for s in sources if s.crs is not None and s.crs != target]
    if foreign and driver == "VRT":
        raise GdalMcpError(
            "unsupported",
            "a VRT mosaic cannot reproject inputs; write GTiff/COG, or reproject "
            f"{len(foreign)} input(s) to the target CRS first",
        )
    # Native resolution and bounds of every input in the target CRS.
    for s in foreign:
        t, w, h = calculate_default_transform(s.crs, target, s.width, s.height, *s.bounds)
        s.res = (t.a, -t.e)
        s.bounds = transform_bounds(s.crs, target, *s.bounds, densify_pts=21)
    if src_nodata is not None:
        for s in sources:
            if not fits(float(src_nodata), s.dtype):
                raise GdalMcpError(
                    "invalid-argument",
                    f"src_nodata {src_nodata} cannot occur in {s.path} ({s.dtype}); give a value its type can hold",
                )
            s.nodata = float(src_nodata)
    if bbox is not None:
        minx, miny, maxx, maxy = _target_bbox(bbox, bbox_crs, target)
        if not separate:
            # gdalbuildvrt -te skips the inputs outside the extent.
            inside = [
                s for s in sources if s.bounds[0] < maxx and s.bounds[2] > minx and s.bounds[1] < maxy and s.bounds[3] > miny
            ]
            if not inside:
                cover = [
                    min(s.bounds[0] for s in sources),
                    min(s.bounds[1] for s in sources),
                    max(s.bounds[2] for s in sources),
                    max(s.bounds[3] for s in sources),
                ]
                raise GdalMcpError(
                    "invalid-argument",
                    f"bbox [{minx:.6g}, {miny:.6g}, {maxx:.6g}, {maxy:.6g}] (in "
                    f"the output CRS) overlaps none of the inputs, which cover "
                    f"[{', '.join(f'{v:.6g}' for v in cover)}]; check the bbox and bbox_crs",
                )
            sources = inside
            foreign = [s for s in foreign if s in inside]
    res = choose_resolution(resolution, sources)
    distinct = sorted({(float(f"{s.res[0]:.12g}"), float(f"{s.res[1]:.12g}")) for s in sources})
    if len(distinct) > 1 and isinstance(resolution, str):
        listed = ", ".join(f"{x:.6g} x {y:.6g}" for x, y in distinct[:8]) + (" …" if len(distinct) > 8 else "")
        warnings.append(
            f"the inputs have different resolutions ({listed}); the output uses the {resolution} "
            f"({res[0]:.6g} x {res[1]:.6g}), so some inputs are resampled ({resampling}); pass "
            "resolution=highest/lowest or [xres, yres] to choose"
        )
    if foreign:
        names = ", ".join(os.path.basename(s.path) for s in foreign[:3]) + (" …" if len(foreign) > 3 else "")
        warnings.append(
            f"{len(foreign)} input(s) ({names}) are in another CRS than the output's ({crs_label(target) or 'none'}) "
            f"and were reprojected ({resampling}); pass dst_crs to choose the output's CRS"
        )
    if bbox is None:
        minx = min(s.bounds[0] for s in sources)
        miny = min(s.bounds[1] for s in sources)
        maxx = max(s.bounds[2] for s in sources)
        maxy = max(s.bounds[3] for s in sources)
        covered = _covered_share(sources, (minx, miny, maxx, maxy))
        if len(sources) > 1 and covered < SPARSE_SHARE:
            warnings.append(
                f"the inputs cover about {covered:.0%} of the mosaic's extent (they lie apart): the rest is nodata. Mosaic "
                "the inputs that belong together (a narrower input_pattern, or inputs=[…]), or give bbox"
            )
    width = max(1, int(0.5 + (maxx - minx) / res[0]))
    height = max(1, int(0.5 + (maxy - miny) / res[1]))
    check_grid(
        width,
        height,
        max_pixels=max_pixels,
        crs_units=describe_units(target, crs_label(target)),
        resolution=res,
        what="the mosaic grid",
        extent=(maxx - minx, maxy - miny),
    )
    out_nodata = nodata if nodata is not None else src_nodata if src_nodata is not None else sources[0].nodata
    staged: list[str] = []
    try:
        for k, s in enumerate(foreign):
            # Warp onto the mosaic grid itself, so the VRT places it without resampling twice.
            left = minx + math.floor((s.bounds[0] - minx) / res[0]) * res[0]
            top = maxy - math.floor((maxy - s.bounds[3]) / res[1]) * res[1]
            right = minx + math.ceil((s.bounds[2] - minx) / res[0]) * res[0]
            bottom = maxy - math.ceil((maxy - s.bounds[1]) / res[1]) * res[1]
            tmp = str(Path(dst).with_name(f"{Path(dst).name}.warp{k}.tif"))
            staged.append(tmp)
            progress(0.3 * k / len(foreign), f"warping input {k + 1}/{len(foreign)} to the mosaic CRS")
            reproject(
                s.path,
                tmp,
                dst_crs=target.to_wkt(),
                resampling=resampling,
                resolution=list(res),
                bbox=(left, bottom, right, top),
                threads=threads,
                src_nodata=src_nodata,
                options={"TILED": "YES", "COMPRESS": "ZSTD", "ZSTD_LEVEL": "1", "BIGTIFF": "IF_SAFER"},
                progress=_part(progress, 0.3 * k / len(foreign), 0.3 / len(foreign), f"input {k + 1}/{len(foreign)}: "),
            )
            warped = describe(tmp)
            s.path, s.width, s.height, s.bounds, s.res, s.crs, s.nodata = (
                tmp,
                warped.width,
                warped.height,
                warped.bounds,
                warped.res,
                warped.crs,
                warped.nodata,  # an input without nodata gets one for its margins: they do not cover the others
            )
        if driver == "VRT":
            xml = vrt_xml(
                sources,
                width=width,
                height=height,
                minx=minx,
                maxy=maxy,
                res=res,
                crs=target,
                separate=separate,
                nodata=out_nodata,
                resampling=resampling,
                relative_to=vrt_dir,
            )
            Path(dst).write_text(xml)
            progress(1.0, "wrote the VRT")
            return summarize(dst), warnings
        grid_xml = functools.partial(
            vrt_xml,
            sources,
            width=width,
            height=height,
            minx=minx,
            maxy=maxy,
            res=res,
            crs=target,
            separate=separate,
            nodata=out_nodata,
            resampling=resampling,
        )
        with rasterio.open(grid_xml()) as vrt:
            count, dtype, transform, colorinterp = vrt.count, vrt.dtypes[0], vrt.transform, vrt.colorinterp
        plan = output_tiles(driver, opts, width, height, bytes_per_pixel=count * np.dtype(dtype).itemsize)
        rects = np.array([dst_rect(s, minx, maxy, res) for s in sources], dtype="float64").reshape(-1, 4)
        specs = [MosaicTile(grid_xml(keep=set(_reaching(rects, t.window))), t.window) for t in plan]

        def prepare(out: Any) -> None:
            """The first input's band metadata (descriptions, units, scale/offset …) on a mosaic of like bands."""
            out.colorinterp = colorinterp
            if not separate:
                with open_raster(inputs[0]) as first:
                    copy_metadata(first, out, dtype_changed=first.dtypes[0] != dtype, rescaled=False)

        start = 0.3 if foreign else 0.0
        write_tiles(
            dst,
            driver,
            opts,
            width=width,
            height=height,
            count=count,
            dtype=dtype,
            crs=target,
            transform=transform,
            nodata=out_nodata,
            fn=mosaic_tile,
            specs=specs,
            windows=[t.window for t in plan],
            progress=_part(progress, start, 1 - start),
            what="mosaicked",
            prepare=prepare,
            source=inputs[0],
        )
    finally:
        for tmp in staged:
            if os.path.exists(tmp):
                rasterio.shutil.delete(tmp)
    return summarize(dst), warnings


def _part(progress: Progress, start: float, share: float, prefix: str = "") -> Progress:
    """A progress callback for one part of the job: its fractions land in [start, start + share]."""

    def report(fraction: float, message: str = "") -> None:
        progress(start + share * fraction, prefix + message)

    return report


def _reaching(rects: Any, window: tuple[int, int, int, int]) -> list[int]:
    """The indexes of the sources whose place on the grid (`dst_rect`s) reaches the window, grown by a pixel so that
    no source a resampling kernel could draw on is left out (the VRT reads nothing from the others)."""
    col, row, w, h = window
    x0, y0 = rects[:, 0], rects[:, 1]
    x1, y1 = x0 + rects[:, 2], y0 + rects[:, 3]
    hit = (x0 < col + w + 1) & (x1 > col - 1) & (y0 < row + h + 1) & (y1 > row - 1)
    return [int(i) for i in np.flatnonzero(hit)]


@dataclass(frozen=True)
class MosaicTile:
    """One output tile of a mosaic: a VRT of the whole mosaic grid holding only the inputs that reach the tile."""

    xml: str
    window: tuple[int, int, int, int]  # (col_off, row_off, width, height) in the mosaic grid


def mosaic_tile(spec: MosaicTile) -> Any:
    """The (bands, height, width) pixels of one mosaic tile, read from its VRT (later inputs drawn on top)."""
    from rasterio.windows import Window

    with rasterio.open(spec.xml) as vrt:
        guard.check_files(vrt.files)  # the inputs the job checked: checked again where the tile runs
        return vrt.read(window=Window(*spec.window))
