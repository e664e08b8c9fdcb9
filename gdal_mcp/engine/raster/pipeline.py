"""raster_pipeline: several raster steps run by GDAL 3.12's `gdal raster pipeline` in one streamed pass.

`read <input> ! reproject … ! clip … ! hillshade … ! write <output>`: every step is a lazy (VRT-like) dataset over the
previous one, and the write step pulls the pixels through all of them once, so no intermediate file is written.

The steps are plain dicts, `{"step": "reproject", "dst_crs": "EPSG:32614", …}`, with the names and meanings of the
separate tools (raster_reproject, raster_clip, raster_convert, raster_fill_nodata, raster_terrain); pipeline_steps.py
turns each into GDAL's arguments. Each gives what the separate tool gives (tests/engine/raster/test_pipeline.py
compares them pixel by pixel, and with Debian's GDAL command-line tools):

- reproject: gdalwarp's grid and GDAL's warper with raster_reproject's settings (rasterio.warp.reproject): the
  approximate transformer (0.125 pixel) and UNIFIED_SRC_NODATA=YES (a pixel is nodata only when all its bands are;
  gdalwarp's default, PARTIAL, differs on multi-band sources at the edges of nodata areas). The margins of an input
  without nodata get the value raster_reproject picks (NaN, or a value no input pixel takes: margins.py) when
  reproject is the first step; after other steps, NaN for floats, else a warning (they stay 0).
  Identical too when a later step reads windows of the warp (clip, resize, select …): with GDAL's defaults the warper
  warps each window read as one chunk, and two of its settings depend on the chunk (the approximate transformer,
  exact at the chunk's row ends and interpolated between; the kernel's scale, XSCALE/YSCALE); here GDAL's warped VRT
  is read block by block (GDAL_VRT_WARP_USE_DATASET_RASTERIO=NO: each 512 x 128 block of the grid warped on its own,
  whatever window is read) with the scale fixed for the whole grid (warp.kernel_scale), which is how raster_reproject
  warps (warp.blockwise). A last reproject step is read through a whole-grid clip window: GDAL would otherwise warp
  it into the output directly, in chunks of its own.
- clip: raster_clip's bbox rule (gdal_translate -projwin, or every pixel touched with all_touched), computed here on
  the grid reaching the step and given to GDAL as a pixel window (GDAL's own --bbox keeps every pixel the box
  touches, to 1/1000 pixel); `like`: the extent of another raster or vector file (features/extent.py).
- resize, select, set-type: gdal_translate -outsize/-tr with -r, -b, -ot (raster_convert's size/resolution, bands,
  output_type).
- fill-nodata: GDALFillNodata on the band (raster_fill_nodata). GDAL runs it on the whole band, into a temporary
  copy: in memory when small, else a compressed GTiff in the output's directory (deleted when the run ends).
- hillshade, slope, aspect, roughness, tri, tpi: gdaldem (raster_terrain on projected DEMs; on a lon/lat DEM GDAL
  converts degrees to distances its own way, and a warning says so). No zero_for_flat: gdaldem then declares no
  nodata and writes 0 at the edges, where raster_terrain keeps -9999.

GDAL 3.12's calc step cannot follow another step (only `calc` as the first step, reading its own files), and the
GDAL in rasterio's wheel has no muparser for its expressions: band math stays raster_calc's.

`plan_pipeline` builds the pipeline without its write step, one prefix at a time, and reads each lazy dataset's grid
(GDALGetRasterXSize … through gdal_c): the plan of each step, checked against --max-pixels, before any pixel is
computed (fill-nodata, which computes its band as it is built, is planned as a select of that band: same grid). The
plan's last grid is the output's. `run_pipeline` plans first (so a bad step fails naming its index, before anything
is written), then runs `read ! steps ! write`. A COG output is written as the separate tools write one: the pipeline
into a tiled GTiff staged beside the output, then GDAL's COG driver from it (`gdal raster convert`, cancellable);
the COG driver as the pipeline's last step was 1.4-2x slower (it reads its source more than once).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.grid import DEFAULT_MAX_PIXELS, check_grid, describe_units
from gdal_mcp.engine.options import creation_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    GDAL_TYPES,
    bounded_threads,
    check_nodata,
    pixel_driver,
    record_options,
    staging_options,
    summarize,
    writable_driver,
)
from gdal_mcp.engine.raster.pipeline_steps import TERRAIN, bad, check_steps, nodata_text, step_argv
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Bounds, PipelineStepGrid, RasterPipelineResult

#: a fill-nodata band larger than this (bytes) is copied into a temporary GTiff, not into memory
FILL_IN_MEMORY_BYTES = 256 * 1024**2
GCI_ALPHA = 6  # GDALColorInterp's GCI_AlphaBand


# ----------------------------------------------------------------------------------------------- grids


@dataclass(frozen=True)
class Grid:
    """What a step hands on: size, georeferencing, bands, type, nodata."""

    width: int
    height: int
    transform: tuple[float, float, float, float, float, float]  # GDAL geotransform order
    wkt: str
    count: int
    dtype: str  # numpy name
    nodata: float | None
    alpha: bool = False

    @property
    def crs(self) -> Any:
        from rasterio.crs import CRS

        return CRS.from_wkt(self.wkt) if self.wkt else None

    @property
    def affine(self) -> Any:
        from rasterio.transform import Affine

        return Affine.from_gdal(*self.transform)

    def model(self, index: int | None, step: str) -> PipelineStepGrid:
        from gdal_mcp.engine.raster.info import nodata_value

        a = self.affine
        xs = [a.c, a.c + self.width * a.a, a.c + self.height * a.b, a.c + self.width * a.a + self.height * a.b]
        ys = [a.f, a.f + self.width * a.d, a.f + self.height * a.e, a.f + self.width * a.d + self.height * a.e]
        return PipelineStepGrid(
            index=index,
            step=step,
            crs=crs_label(self.crs),
            width=self.width,
            height=self.height,
            resolution=(math.hypot(a.a, a.d), math.hypot(a.b, a.e)),
            bounds=Bounds(left=min(xs), bottom=min(ys), right=max(xs), top=max(ys)),
            count=self.count,
            dtype=self.dtype,
            nodata=nodata_value(self.nodata),
        )


def _input_grid(src: str) -> Grid:
    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument", "the input has no bands (a container?); use one of its subdatasets (raster_info lists them)"
            )
        return Grid(
            ds.width,
            ds.height,
            tuple(ds.transform.to_gdal()),  # type: ignore[arg-type]
            ds.crs.to_wkt() if ds.crs else "",
            ds.count,
            ds.dtypes[0],
            ds.nodatavals[0],
            any(c.name == "alpha" for c in ds.colorinterp),
        )


def _dataset_grid(lib: Any, handle: int) -> Grid:
    """A GDALDatasetH's grid, read through the C API."""
    gt = (ctypes.c_double * 6)()
    if lib.GDALGetGeoTransform(handle, gt) != 0:
        gt[:] = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    count = lib.GDALGetRasterCount(handle)
    dtype, nodata, alpha = "none", None, False
    if count:
        band = lib.GDALGetRasterBand(handle, 1)
        name = (lib.GDALGetDataTypeName(lib.GDALGetRasterDataType(band)) or b"").decode()
        dtype = GDAL_TYPES.get(name.lower(), name.lower())
        ok = ctypes.c_int(0)
        value = lib.GDALGetRasterNoDataValue(band, ctypes.byref(ok))
        nodata = float(value) if ok.value else None
        alpha = any(
            lib.GDALGetRasterColorInterpretation(lib.GDALGetRasterBand(handle, b)) == GCI_ALPHA for b in range(1, count + 1)
        )
    return Grid(
        lib.GDALGetRasterXSize(handle),
        lib.GDALGetRasterYSize(handle),
        tuple(gt),  # type: ignore[arg-type]
        (lib.GDALGetProjectionRef(handle) or b"").decode(),
        count,
        dtype,
        nodata,
        alpha,
    )


@contextlib.contextmanager
def _config(**options: str) -> Iterator[None]:
    """GDAL configuration options for the duration of a run (rasterio's Env: the same libgdal)."""
    import rasterio

    with rasterio.Env(**options):
        yield


def _pipeline_argv(src: str, argvs: list[list[str]]) -> list[str]:
    out = ["read", src]
    for argv in argvs:
        out += ["!", *argv]
    return out


def _prefix_grid(src: str, argvs: list[list[str]], index: int, step: dict[str, Any]) -> Grid:
    """The grid of `read src ! argvs…` (lazy: no pixel is computed), or invalid-argument naming step `index`."""
    try:
        with algorithms.algorithm(["raster", "pipeline"], _pipeline_argv(src, argvs)) as alg:
            alg.run(finalize=False)
            handle = alg.dataset()
            if not handle:
                raise GdalMcpError("gdal-error", "the pipeline made no dataset")
            return _dataset_grid(alg.lib, handle)
    except GdalMcpError as e:
        if e.code not in ("invalid-argument", "gdal-error"):
            raise
        text = e.message.removeprefix("gdal raster pipeline failed: ").removeprefix("gdal raster pipeline: ")
        raise bad(index, step, f"GDAL refused it: {text}") from None


def _clip_argv(step: dict[str, Any], index: int, upstream: Grid, warnings: list[str]) -> list[str]:
    """A clip as GDAL's pixel window (`clip --window`), chosen by raster_clip's own bbox rule on the raster reaching
    the step (GDAL's --bbox keeps every pixel the box touches, to 1/1000 pixel: not raster_clip's default)."""
    from gdal_mcp.engine.raster.clip import _bbox_region

    bbox: Any = step.get("bbox")
    bbox_crs: str | None = step.get("bbox_crs")
    if step.get("like") is not None:
        from gdal_mcp.engine.features.extent import dataset_extent

        try:
            bbox, bbox_crs = dataset_extent(step["like"])
        except GdalMcpError as e:
            raise bad(index, step, f"like: {e.message}") from None
    try:
        _, win, _, notes = _bbox_region(_GridView(upstream), bbox, bbox_crs, True, bool(step.get("all_touched", False)))
    except GdalMcpError as e:
        raise bad(index, step, e.message) from None
    warnings += [f"steps[{index}] (clip): {n}" for n in notes]
    return ["clip", "--window", f"{int(win.col_off)},{int(win.row_off)},{int(win.width)},{int(win.height)}"]


def _planning_argv(step: dict[str, Any], argv: list[str]) -> list[str]:
    """What stands for a step while planning: fill-nodata (which computes the whole band as it is built) by a select of
    its band, which hands on the same grid, type and nodata."""
    if step["step"] == "fill-nodata":
        return ["select", "--band", str(step.get("band", 1))]
    return argv


@dataclass
class Plan:
    """The steps (checked), as GDAL arguments, and the grid of the input and of each step."""

    steps: list[dict[str, Any]]
    argvs: list[list[str]]
    grids: list[Grid]  # grids[0]: the input; grids[i + 1]: what step i hands on
    warnings: list[str]


def build_plan(src: str, steps: list[dict[str, Any]], *, threads: int, max_pixels: int) -> Plan:
    """Check the steps and plan them (see the module's description); nothing is computed or written."""
    steps = check_steps(steps)
    grids = [_input_grid(src)]
    argvs: list[list[str]] = []
    planning: list[list[str]] = []
    warnings: list[str] = []
    for i, step in enumerate(steps):
        upstream = grids[-1]
        if step["step"] == "clip":
            argv = _clip_argv(step, i, upstream, warnings)
        else:
            argv = step_argv(step, threads=threads)
        target = None
        if step["step"] == "reproject":
            argv, target = _with_nodata(src, step, i, argv, upstream, planning, threads, max_pixels, warnings)
            argv = [*argv, *_kernel_scale_argv(step, upstream, target)]
        if step["step"] in TERRAIN:
            _terrain_note(step, i, upstream, warnings)
        if step["step"] in ("select", "fill-nodata") or step["step"] in TERRAIN:
            wanted = step.get("bands") or [step.get("band", 1)]
            missing = [b for b in wanted if b > upstream.count]
            if missing:
                raise bad(i, step, f"band(s) {missing} do not exist: the raster reaching this step has {upstream.count}")
        grid = target or _prefix_grid(src, [*planning, _planning_argv(step, argv)], i, step)
        if step["step"] in ("reproject", "resize") or grid.width * grid.height > max_pixels:
            units = describe_units(grid.crs, crs_label(grid.crs))
            what = f"steps[{i}] ({step['step']})"
            check_grid(grid.width, grid.height, max_pixels=max_pixels, crs_units=units, what=what)
        argvs.append(argv)
        planning.append(_planning_argv(step, argv))
        grids.append(grid)
    return Plan(steps, argvs, grids, warnings)


def _kernel_scale_argv(step: dict[str, Any], upstream: Grid, target: Grid) -> list[str]:
    """raster_reproject's fixed kernel scale (warp.kernel_scale) for the grid reaching the step and the step's grid."""
    from gdal_mcp.engine.raster.warp import kernel_scale

    source_crs = parse_crs(step["src_crs"], "src_crs") if step.get("src_crs") else upstream.crs
    if source_crs is None or target.crs is None:
        return []
    scale = kernel_scale(
        source_crs, upstream.affine, (upstream.width, upstream.height), target.crs, target.affine, (target.width, target.height)
    )
    return [arg for key, value in scale.items() for arg in ("--warp-option", f"{key}={value}")]


def _with_nodata(
    src: str,
    step: dict[str, Any],
    index: int,
    argv: list[str],
    upstream: Grid,
    planning: list[list[str]],
    threads: int,
    max_pixels: int,
    warnings: list[str],
) -> tuple[list[str], Grid]:
    """The reproject step's output nodata, as raster_reproject chooses it: `nodata`, else the source's (src_nodata or
    the upstream's), else (margins outside the source's footprint to mark) NaN or a value no input pixel takes. Returns
    the step's arguments with it and the step's grid."""
    from gdal_mcp.engine.raster.margins import area_of_use_warning, margin_nodata
    from gdal_mcp.engine.raster.warp import SourceGeoref, footprint_misses

    target = _prefix_grid(src, [*planning, argv], index, step)
    units = describe_units(target.crs, crs_label(target.crs))
    check_grid(target.width, target.height, max_pixels=max_pixels, crs_units=units, what=f"steps[{index}] (reproject)")
    source_crs = parse_crs(step["src_crs"], "src_crs") if step.get("src_crs") else upstream.crs
    if target.crs is not None and source_crs is not None:
        a = upstream.affine
        bounds = (a.c, a.f + upstream.height * a.e, a.c + upstream.width * a.a, a.f)
        note = area_of_use_warning(target.crs, source_crs, target.affine, target.width, target.height, bounds)
        if note is not None:
            warnings.append(f"steps[{index}] (reproject): {note}")
    nodata = step.get("nodata")
    if nodata is not None:
        try:
            check_nodata(nodata, upstream.dtype)
        except GdalMcpError as e:
            raise bad(index, step, e.message) from None
        return [*argv, "--dst-nodata", nodata_text(nodata)], replace(target, nodata=float(nodata))
    if step.get("src_nodata") is not None or upstream.nodata is not None or upstream.alpha or source_crs is None:
        return argv, target  # GDAL carries the source's nodata (or alpha) over, as raster_reproject does
    like_ds = _GridView(upstream)
    georef = SourceGeoref(source_crs, "geotransform", {}, {})
    if not footprint_misses(like_ds, georef, target.crs, target.affine, target.width, target.height):
        return argv, target
    if not planning:  # the first step reads the input itself: raster_reproject's choice, on the same pixels
        with open_raster(src) as ds:
            value, note = margin_nodata(
                src,
                ds,
                georef,
                upstream.dtype,
                target=target.crs,
                transform=target.affine,
                width=target.width,
                height=target.height,
                threads=threads,
            )
        warnings.append(f"steps[{index}] (reproject): {note}")
        if value is None:
            return argv, target
        return [*argv, "--dst-nodata", nodata_text(value)], replace(target, nodata=value)
    if upstream.dtype.startswith("float"):
        warnings.append(
            f"steps[{index}] (reproject): the raster reaching it has no nodata: the output's margins (pixels outside its "
            "footprint) are NaN, declared nodata; pass nodata to choose another value"
        )
        return [*argv, "--dst-nodata", "nan"], replace(target, nodata=math.nan)
    warnings.append(
        f"steps[{index}] (reproject): the raster reaching it has no nodata, so the output's margins (pixels outside its "
        "footprint) are 0, not declared nodata, and read as data; pass nodata (a value the data never take) on this step "
        "to mark them"
    )
    return argv, target


@dataclass(frozen=True)
class _GridView:
    """The attributes of a rasterio dataset that footprint_misses and raster_clip's window rule read, for a grid that
    is not a file."""

    grid: Grid

    @property
    def crs(self) -> Any:
        return self.grid.crs

    @property
    def bounds(self) -> Any:
        return self.grid.model(None, "").bounds

    @property
    def width(self) -> int:
        return self.grid.width

    @property
    def height(self) -> int:
        return self.grid.height

    @property
    def transform(self) -> Any:
        return self.grid.affine


def _terrain_note(step: dict[str, Any], index: int, upstream: Grid, warnings: list[str]) -> None:
    crs = upstream.crs
    if crs is not None and crs.is_geographic and step.get("scale") is None and step["step"] in ("hillshade", "slope", "aspect"):
        warnings.append(
            f"steps[{index}] ({step['step']}): the DEM reaching it is lon/lat: GDAL converts its degrees to ground distances "
            "its own way, not row by row as raster_terrain does, so values differ from raster_terrain's; reproject the DEM "
            "to a projected CRS first (a reproject step) for gdaldem's exact results"
        )


# ----------------------------------------------------------------------------------------------- results


def estimated_bytes(grid: Grid, driver: str) -> int:
    """The output's pixels uncompressed (+ a third for COG overviews)."""
    import numpy as np

    size = grid.width * grid.height * grid.count * np.dtype(grid.dtype).itemsize
    return int(size * 4 / 3) if driver == "COG" else int(size)


def _result(plan: Plan, driver: str, warnings: list[str]) -> RasterPipelineResult:
    models = [plan.grids[0].model(None, "read")] + [
        g.model(i, s["step"]) for i, (s, g) in enumerate(zip(plan.steps, plan.grids[1:], strict=True))
    ]
    return RasterPipelineResult(plan=models, estimated_bytes=estimated_bytes(plan.grids[-1], driver), warnings=warnings)


def _output_options(driver: str, options: dict[str, Any] | None, src: str, grid: Grid, threads: int) -> dict[str, str]:
    from gdal_mcp.engine.raster.inherit import inherit_options

    opts = creation_options(options)
    opts = inherit_options(driver, opts, src, dtype=grid.dtype, count=grid.count)
    return bounded_threads(opts, threads) if driver in ("GTiff", "COG") else opts


@wrap_gdal_errors
def plan_pipeline(
    src: str,
    *,
    steps: list[dict[str, Any]],
    output_name: str,
    format: str | None = None,
    options: dict[str, Any] | None = None,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> RasterPipelineResult:
    """The plan of `steps` on `src`: each step's grid and the output's estimated size; nothing computed or written.
    `output_name` (a file name) and `format` pick the output driver, as the run would."""
    driver = pixel_driver(output_name, format, "raster_pipeline")
    creation_options(options)
    progress(0.0, f"planning {len(steps) if isinstance(steps, list) else 0} step(s)")
    plan = build_plan(src, steps, threads=threads, max_pixels=max_pixels)
    result = _result(plan, driver, plan.warnings)
    result.plan_only = True
    return result


@wrap_gdal_errors
def run_pipeline(
    src: str,
    dst: str,
    *,
    steps: list[dict[str, Any]],
    format: str | None = None,
    options: dict[str, Any] | None = None,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: Progress = no_progress,
) -> tuple[RasterPipelineResult, list[str]]:
    """Run `steps` on `src` in one GDAL pipeline into `dst` (see the module's description)."""
    driver = pixel_driver(dst, format, "raster_pipeline")
    progress(0.0, "planning the steps")
    plan = build_plan(src, steps, threads=threads, max_pixels=max_pixels)
    clean = plan.steps
    final = plan.grids[-1]
    opts = _output_options(driver, options, src, final, threads)
    staged = not writable_driver(driver)  # COG, PNG …: GDAL's CreateCopy from a staged GTiff, as raster_convert
    target = dst + ".staging.tif" if staged else dst
    write_opts = {**staging_options(driver), "NUM_THREADS": str(max(1, threads))} if staged else opts
    write = ["write", "--output-format", "GTiff" if staged else driver, target]
    for key, value in write_opts.items():
        write += ["--creation-option", f"{key}={value}"]
    # GDAL would write a last reproject by warping into the output itself, in chunks of its choosing: that pipeline
    # ends without a write step (a lazy dataset, as when planning) and the file is copied from it (copy_output), which
    # reads the warped VRT by blocks
    last_reproject = clean[-1]["step"] == "reproject"
    argv = _pipeline_argv(src, plan.argvs) + ([] if last_reproject else ["!", *write])
    # every block of a warped VRT warped on its own, whatever window a later step reads (warp.blockwise)
    config = {"CPL_TMPDIR": os.path.dirname(os.path.abspath(dst)) or ".", "GDAL_VRT_WARP_USE_DATASET_RASTERIO": "NO"}
    if any(s["step"] == "fill-nodata" for s in clean):
        band_bytes = max(g.width * g.height * _itemsize(g.dtype) for g in plan.grids)
        if band_bytes > FILL_IN_MEMORY_BYTES:
            config["GDAL_RASTER_PIPELINE_USE_GTIFF_FOR_TEMP_DATASET"] = "YES"
    warnings = list(plan.warnings)
    share = 0.6 if staged else 1.0
    names = " ! ".join(s["step"] for s in clean)
    try:
        with _config(**config), algorithms.algorithm(["raster", "pipeline"], argv) as alg:
            message = f"running {names} into {final.width}x{final.height} x {final.count}"
            if last_reproject:
                if os.path.exists(target):  # as GDAL's write step: never over a file
                    raise GdalMcpError("invalid-argument", f"{target} already exists")
                alg.run(finalize=False)
                alg.copy_output(
                    target,
                    driver="GTiff" if staged else driver,
                    options=write_opts,
                    progress=progress,
                    message=message,
                    scale=share,
                )
            else:
                alg.run(progress, message=message, scale=share)
            warnings += [w for w in alg.warnings if w not in warnings]
        if staged:
            convert = [target, dst, "--output-format", driver]
            for key, value in opts.items():
                convert += ["--creation-option", f"{key}={value}"]
            with algorithms.algorithm(["raster", "convert"], convert) as alg:
                alg.run(progress, message=f"writing {driver}", scale=1 - share, start=share)
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.exists(dst):
                os.remove(dst)
        raise
    finally:
        if staged:
            with contextlib.suppress(OSError):
                os.remove(target)
    record_options(dst, opts)
    result = _result(plan, driver, warnings)
    result.summary = summarize(dst)
    progress(1.0, f"wrote {driver}")
    return result, warnings


def _itemsize(dtype: str) -> int:
    import numpy as np

    return int(np.dtype(dtype).itemsize) if dtype != "none" else 1
