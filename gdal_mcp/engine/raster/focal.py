"""Moving-window (focal) statistics: GDAL 3.12's `gdal raster neighbors`, run through engine/algorithms.py.

GDAL computes each output pixel from the pixels of a window centred on it, weighted by a kernel (a VRT kernel
filtered source, evaluated block by block with a halo, so memory does not grow with the raster). What GDAL does,
checked on GDAL 3.12.2 and asserted by tests/engine/raster/test_focal.py:

- pixels of weight 0 are left out of the window (a circle is a kernel of 1s inside it and 0s outside; its min, max,
  median and mode never see the 0s), and every other pixel enters as value × weight (weights other than 0 and 1 only
  come from a custom `kernel`); mean divides by the sum of the weights of the pixels that entered;
- pixels equal to the band's nodata are left out (NaN pixels of float bands that declare no nodata too: the pipeline
  declares NaN their nodata first, so the output's nodata is NaN); a nodata centre gives nodata, except that GDAL
  compares the centre to a NaN nodata with ==, and so fills NaN holes: those go through the window-by-window pass
  below, which puts them back; a nodata pixel stays nodata (GDAL: the centre decides), and a
  window with no valid pixel is nodata (only possible when a custom kernel weighs its centre 0; sum then gives 0);
- at the raster's edges the first and last rows and columns are repeated outwards to fill the window;
- values pass through Float32 (VRTKernelFilteredSource's working type), whatever the input and output types: inputs
  and results are rounded to Float32 (mean and std within one Float32 step of the exact value);
- std is the population standard deviation (divided by n); median of an even count is the mean of the middle two;
  a tied mode is one of the tied values, in GDAL's own order (neither the smallest nor the first in the window).

`range` (max - min) is not a GDAL method: GDAL streams max and min into two temporary Float32 GeoTIFFs beside the
output, then one window-by-window pass (output.write_windows) subtracts them into the output. GDAL also writes the
input's nodata value into the nodata pixels even when `--nodata` declares another one on the output (and `gdal raster
calc --nodata` would take input pixels equal to the new value for nodata), so when the caller's nodata differs from
the input's the statistic goes through a temporary file and the same window-by-window pass writes the new nodata
into the holes. That pass counts the valid results equal to the output's nodata (they read as nodata) and warns.
Integers are written as GDAL writes them: rounded half away from zero, clamped.

A window in ground units (`radius`, metres) becomes whole pixels from the raster's pixel size: the CRS's linear unit
on projected rasters; on lon/lat rasters the ground size of a pixel at the raster's middle latitude (geodesic, on
the CRS's ellipsoid), with a warning giving how much the window's east-west extent varies between the top and the
bottom rows (a window is the same number of pixels everywhere).
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np
import rasterio

from gdal_mcp.engine import algorithms
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.inherit import inherit_options
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    GDAL_TYPE_NAMES,
    _delete,
    cast,
    check_nodata,
    fits,
    parse_dtype,
    pixel_driver,
    record_options,
    staging_options,
    summarize,
    write_windows,
)
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.engine.raster.windows import DEFAULT_WINDOW_PIXELS
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import FocalWindow, RasterFocalResult

Statistic = Literal["mean", "min", "max", "sum", "std", "median", "mode", "range"]
Shape = Literal["square", "circle"]
STATISTICS = ("mean", "min", "max", "sum", "std", "median", "mode", "range")
SHAPES = ("square", "circle")
#: GDAL's limits on the kernel's width (gdal raster neighbors --size)
MIN_SIZE, MAX_SIZE = 3, 99
#: GDAL's method names, where ours differ
METHODS = {"std": "stddev"}
#: input types whose values Float32 arithmetic may round (more than 24 significant bits)
WIDE_TYPES = frozenset({"int32", "uint32", "int64", "uint64", "float64"})
EPS = 1e-9


def _invalid(message: str) -> GdalMcpError:
    return GdalMcpError("invalid-argument", message)


def check_window_arguments(
    statistic: str, shape: str, size: int | None, radius: float | None, kernel: list[list[float]] | None
) -> None:
    """The window arguments alone (before the raster is opened): one of size, radius or kernel."""
    if statistic not in STATISTICS:
        raise _invalid(f"unknown statistic {statistic!r}; use one of {', '.join(STATISTICS)}")
    if shape not in SHAPES:
        raise _invalid(f"unknown shape {shape!r}; use square or circle")
    given = [name for name, value in (("size", size), ("radius", radius), ("kernel", kernel)) if value is not None]
    if len(given) > 1:
        raise _invalid(f"give only one of size, radius or kernel (got {' and '.join(given)})")
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int | np.integer):
            raise _invalid(f"size must be a whole number of pixels (got {size!r})")
        if not MIN_SIZE <= size <= MAX_SIZE or size % 2 == 0:
            nearest = min(max(size + 1 if size % 2 == 0 else size, MIN_SIZE), MAX_SIZE)
            raise _invalid(
                f"size must be an odd number of pixels from {MIN_SIZE} to {MAX_SIZE} (got {size}): the window is "
                f"centred on the pixel; e.g. size={nearest}"
            )
    if radius is not None and (isinstance(radius, bool) or not math.isfinite(radius) or radius <= 0):
        raise _invalid(f"radius must be a positive distance in metres (got {radius!r})")
    if kernel is not None:
        if shape != "square":
            raise _invalid("shape does not apply to a custom kernel: put 0 weights where the window has no pixel")
        _check_kernel(kernel, statistic)


def _check_kernel(kernel: Any, statistic: str) -> None:
    if not isinstance(kernel, list | tuple) or not kernel or not all(isinstance(row, list | tuple) for row in kernel):
        raise _invalid("kernel must be a non-empty square list of rows of weights, e.g. [[0,1,0],[1,1,1],[0,1,0]]")
    n = len(kernel)
    if any(len(row) != n for row in kernel):
        raise _invalid(f"kernel must be square: {n} rows of {n} weights each (got rows of {sorted({len(r) for r in kernel})})")
    if not MIN_SIZE <= n <= MAX_SIZE or n % 2 == 0:
        raise _invalid(f"kernel must be N x N with N odd, from {MIN_SIZE} to {MAX_SIZE} (got {n} x {n})")
    values = [v for row in kernel for v in row]
    if not all(isinstance(v, int | float | np.number) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise _invalid("kernel weights must be finite numbers")
    if not any(values):
        raise _invalid("kernel has only 0 weights: the window would hold no pixel")
    if statistic == "mean" and math.isclose(sum(values), 0.0, abs_tol=1e-12):
        raise _invalid("mean divides by the sum of the kernel's weights, which is 0 here; use statistic='sum'")


def _ground_pixel(ds: Any, radius: float) -> tuple[float, float, list[str]]:
    """(width, height) of a pixel in metres, to convert a radius; warnings about the conversion."""
    t = ds.transform
    width, height = math.hypot(t.a, t.d), math.hypot(t.b, t.e)
    if ds.crs is None or not ds.crs.to_wkt():
        raise _invalid(
            "the raster has no CRS, so a radius in metres cannot be converted to pixels: give size (pixels) instead, "
            "or assign the CRS with raster_edit"
        )
    if not ds.crs.is_geographic:
        try:
            _, factor = ds.crs.linear_units_factor
        except Exception:  # noqa: BLE001 - a CRS without a linear unit
            raise _invalid("the raster's CRS has no linear unit, so a radius in metres cannot be converted: give size") from None
        return width * factor, height * factor, []
    from pyproj import CRS

    crs = CRS.from_wkt(ds.crs.to_wkt())
    geod = crs.get_geod()
    if geod is None:
        raise _invalid("the raster's geographic CRS has no ellipsoid, so a radius in metres cannot be converted: give size")
    deg = math.degrees(crs.axis_info[0].unit_conversion_factor) if crs.axis_info else 1.0
    lon = (t.c + t.a * ds.width / 2) * deg
    top, bottom = t.f * deg, (t.f + t.e * ds.height) * deg

    def east_west(lat: float) -> float:
        lat = max(-89.999999, min(89.999999, lat))
        return float(geod.inv(lon, lat, lon + width * deg, lat)[2])

    middle = (top + bottom) / 2
    half = height * deg / 2
    ground = (east_west(middle), float(geod.inv(lon, middle - half, lon, middle + half)[2]))
    widths = sorted((east_west(top), east_west(bottom)))
    warnings = [
        f"the raster is lon/lat: radius {radius:g} m was converted to pixels with the ground size of a pixel at its "
        f"middle latitude {middle:.4f}° ({ground[0]:.2f} m east-west x {ground[1]:.2f} m north-south); the window is "
        f"the same number of pixels on every row, so its east-west extent varies with latitude (a pixel is "
        f"{widths[0]:.2f} to {widths[1]:.2f} m wide between the top and bottom rows)"
    ]
    return ground[0], ground[1], warnings


def window_weights(
    *,
    shape: str,
    size: int | None,
    radius: float | None,
    kernel: list[list[float]] | None,
    pixel_m: tuple[float, float] | None = None,
) -> list[list[float]]:
    """The kernel GDAL applies: rows of the raster (top first) by columns (left first), centred on the pixel.

    square: every pixel of the size x size window, or those within radius metres in x and in y; circle: the pixels
    whose centres lie within (size - 1) / 2 pixels, or radius metres, of the centre pixel's centre."""
    if kernel is not None:
        return [[float(v) for v in row] for row in kernel]
    if size is None and radius is None:
        size = MIN_SIZE
    if size is not None:
        n = (size - 1) // 2
        ax, ay, reach = 1.0, 1.0, float(n)
        nx = ny = n
    else:
        assert radius is not None and pixel_m is not None
        ax, ay, reach = pixel_m[0], pixel_m[1], radius
        nx, ny = math.floor(radius / ax * (1 + EPS)), math.floor(radius / ay * (1 + EPS))
        n = max(nx, ny)
        if n == 0:
            raise _invalid(
                f"radius {radius:g} m is smaller than a pixel ({ax:.3g} m x {ay:.3g} m): the window would be the pixel "
                f"itself; give a radius of at least {min(ax, ay):.3g} m"
            )
        if 2 * n + 1 > MAX_SIZE:
            raise _invalid(
                f"radius {radius:g} m spans {n} pixels each side of the centre ({ax:.3g} m x {ay:.3g} m pixels): GDAL's "
                f"window is at most {MAX_SIZE} pixels wide ({(MAX_SIZE - 1) // 2} each side); use a radius up to "
                f"{(MAX_SIZE - 1) // 2 * min(ax, ay):.6g} m, or a coarser copy of the raster (raster_reproject resolution=)"
            )
    rows = []
    for dy in range(-n, n + 1):
        row = []
        for dx in range(-n, n + 1):
            if shape == "circle":
                inside = (dx * ax) ** 2 + (dy * ay) ** 2 <= reach**2 * (1 + EPS)
            else:
                inside = abs(dx) <= nx and abs(dy) <= ny
            row.append(1.0 if inside else 0.0)
        rows.append(row)
    return rows


def _kernel_text(weights: list[list[float]]) -> str:
    return "[" + ",".join("[" + ",".join(algorithms.number(v) for v in row) + "]" for row in weights) + "]"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _neighbors(
    src: str,
    out: str,
    *,
    indexes: list[int] | None,
    nan_nodata: bool,
    method: str,
    kernel: str,
    gdal_type: str,
    nodata: float | None,
    driver: str,
    options: dict[str, str],
    progress: Progress,
    start: float,
    scale: float,
) -> list[str]:
    """`gdal raster pipeline`: read src ! [select bands] ! [edit --nodata=nan] ! neighbors ! write out. GDAL's
    warnings."""
    steps = ["read"]
    if indexes is not None:
        steps.append("select --band=" + ",".join(str(b) for b in indexes))
    if nan_nodata:
        steps.append("edit --nodata=nan")  # float bands without nodata: their NaN pixels are the holes
    step = f"neighbors --method={method} --kernel={kernel} --output-data-type={gdal_type}"
    if nodata is not None:
        step += f" --nodata={'nan' if math.isnan(nodata) else algorithms.number(nodata)}"
    steps += [step, "write"]
    argv = ["--input", src, "--output", out, "--pipeline", " ! ".join(steps), f"--output-format={driver}"]
    argv += [f"--creation-option={k}={v}" for k, v in options.items()]
    with algorithms.algorithm(["raster", "pipeline"], argv) as alg:
        alg.run(progress, message=f"focal {method}", start=start, scale=scale)
        return alg.warnings


def _holes(values: np.ndarray, nodatavals: tuple[float | None, ...]) -> np.ndarray:
    """Where a (bands, rows, cols) block equals its bands' nodata."""
    out = np.zeros(values.shape, dtype=bool)
    for i, nd in enumerate(nodatavals):
        if nd is not None:
            out[i] = np.isnan(values[i]) if math.isnan(nd) else values[i] == nd
    return out


def _finish(
    temps: list[str],
    dst: str,
    *,
    nodata: float | None,
    dtype: str,
    driver: str,
    options: dict[str, str],
    source: str,
    nan_centres: list[int | None],
    what: str,
    progress: Progress,
    start: float,
) -> list[str]:
    """The output from the temporary GeoTIFFs, window by window: the first (max - min when there are two), nodata
    where any is nodata, written with `nodata`, cast as GDAL casts. A warning if valid results equal `nodata`.

    `nan_centres`: for each output band, the band of `source` it comes from when that band's nodata is NaN: its NaN
    pixels become nodata too (GDAL compares the centre to a NaN nodata with ==, so it fills the holes it should keep)."""
    collisions = 0
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(rasterio.open(t)) for t in temps]
        centres = stack.enter_context(open_raster(source)) if any(nan_centres) else None

        def compute(window: Any) -> np.ndarray:
            nonlocal collisions
            first = opened[0].read(window=window).astype("float64")
            holes = _holes(first, opened[0].nodatavals)
            values = first
            if len(opened) == 2:
                second = opened[1].read(window=window).astype("float64")
                holes |= _holes(second, opened[1].nodatavals)
                values = first - second
            for i, band in enumerate(nan_centres):
                if centres is not None and band is not None:
                    holes[i] |= np.isnan(centres.read(band, window=window))
            out = cast(values, dtype)
            if nodata is not None:
                if not math.isnan(nodata):
                    collisions += int(np.count_nonzero((out == nodata) & ~holes))
                out[holes] = nodata
            return out

        first = opened[0]
        write_windows(
            dst,
            driver,
            options,
            width=first.width,
            height=first.height,
            count=first.count,
            dtype=dtype,
            crs=first.crs,
            transform=first.transform,
            nodata=nodata,
            compute=compute,
            progress=lambda f, m="": progress(start + (1 - start) * f, m),
            what=what,
            window_pixels=DEFAULT_WINDOW_PIXELS // 4,  # 1 M pixels: a few float64 copies of a window in memory
            block=(512, 512),
            source=source,
        )
    if collisions:
        return [
            f"{collisions} pixels have a valid result equal to the nodata value {nodata:g} and now read as nodata; "
            "pass another nodata that no result can take"
        ]
    return []


@wrap_gdal_errors
def focal(
    src: str,
    dst: str,
    *,
    statistic: Statistic = "mean",
    shape: Shape = "square",
    size: int | None = None,
    radius: float | None = None,
    kernel: list[list[float]] | None = None,
    bands: list[int] | None = None,
    output_type: str = "Float32",
    nodata: float | None = None,
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterFocalResult, list[str]]:
    """`statistic` of each pixel's window (see the module docstring) for the bands `bands` of `src`, written to `dst`."""
    check_window_arguments(statistic, shape, size, radius, kernel)
    dtype = parse_dtype(output_type) or "float32"
    gdal_type = GDAL_TYPE_NAMES[dtype]
    if nodata is not None:
        check_nodata(nodata, dtype)
    driver = pixel_driver(dst, format, "raster_focal")
    options = normalize_options(creation_options)
    warnings: list[str] = []
    with open_raster(src) as ds:
        indexes = select_bands(ds, bands)
        types = {ds.dtypes[b - 1] for b in indexes}
        if any(t.startswith("complex") for t in types):
            raise GdalMcpError("unsupported", "complex bands are not supported; convert the raster to a real type first")
        pixel_m = None
        if radius is not None:
            px, py, notes = _ground_pixel(ds, radius)
            pixel_m, warnings = (px, py), warnings + notes
        weights = window_weights(shape=shape, size=size, radius=radius, kernel=kernel, pixel_m=pixel_m)
        source_nodata = [ds.nodatavals[b - 1] for b in indexes]
        nan_nodata = all(v is None for v in source_nodata) and all(t.startswith("float") for t in types)
        if nan_nodata:
            source_nodata = [math.nan] * len(indexes)
        if nodata is None:
            for value in {v for v in source_nodata if v is not None}:
                if not fits(float(value), dtype):
                    raise _invalid(
                        f"the input's nodata {value:g} cannot be stored in {gdal_type}; pass nodata= a value "
                        f"{gdal_type} can hold (e.g. 0 or 255 for Byte), or another output_type"
                    )
        if types & WIDE_TYPES:
            warnings.append(
                f"GDAL computes focal statistics in Float32: {'/'.join(sorted(types & WIDE_TYPES))} values beyond 7 "
                "significant digits (integers beyond 16777216) are rounded"
            )
        caller_options = dict(options)
        options = inherit_options(driver, options, ds, dtype=dtype, count=len(indexes))
        selected = None if indexes == list(range(1, ds.count + 1)) else indexes
    if driver == "GTiff":
        options.setdefault("BIGTIFF", "IF_SAFER")
    remap = nodata is not None and any(v is not None and not _same(float(v), nodata) for v in source_nodata)
    nan_bands = [b if v is not None and math.isnan(v) else None for b, v in zip(indexes, source_nodata, strict=True)]
    work_type = "Float32"
    if any(v is not None and not math.isnan(v) and float(np.float32(v)) != v for v in source_nodata):
        work_type = "Float64"  # a nodata value Float32 cannot hold exactly
    kernel_text = _kernel_text(weights)
    cells = sum(1 for row in weights for v in row if v != 0)
    window = FocalWindow(size=len(weights), cells=cells, pixel_size_m=pixel_m)

    temps: list[str] = []
    existed = os.path.exists(dst)
    common: dict[str, Any] = {"indexes": selected, "nan_nodata": nan_nodata, "kernel": kernel_text, "progress": progress}
    try:
        if statistic == "range" or remap or any(nan_bands):
            stage = staging_options("GTiff")
            methods = ["max", "min"] if statistic == "range" else [METHODS.get(statistic, statistic)]
            share = 0.8 / len(methods)
            for i, method in enumerate(methods):
                temp = str(Path(dst).with_name(f"{Path(dst).name}.focal-{method}.tif"))
                temps.append(temp)
                warnings += _neighbors(
                    src,
                    temp,
                    method=method,
                    gdal_type=work_type,
                    nodata=None,
                    driver="GTiff",
                    options=stage,
                    start=share * i,
                    scale=share,
                    **common,
                )
            out_nodata = nodata if nodata is not None else next((float(v) for v in source_nodata if v is not None), None)
            warnings += _finish(
                temps,
                dst,
                nodata=out_nodata,
                dtype=dtype,
                driver=driver,
                options=caller_options,
                source=src,
                nan_centres=nan_bands,
                what=f"focal {statistic}",
                progress=progress,
                start=0.8,
            )
        else:
            warnings += _neighbors(
                src,
                dst,
                method=METHODS.get(statistic, statistic),
                gdal_type=gdal_type,
                nodata=nodata,
                driver=driver,
                options=options,
                start=0.0,
                scale=1.0,
                **common,
            )
            record_options(dst, options)
    except BaseException:
        if not existed:
            _delete(dst)
        raise
    finally:
        for temp in temps:
            _delete(temp)
    progress(1.0, f"wrote focal {statistic}")
    result = RasterFocalResult(summary=summarize(dst), statistic=statistic, window=window)
    return result, list(dict.fromkeys(warnings))
