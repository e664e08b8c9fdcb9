"""Distance to the nearest target pixel, like gdal_proximity.py: GDAL's own GDALComputeProximity.

rasterio does not expose the proximity algorithm, so GDALComputeProximity is called through ctypes on
the GDAL library rasterio is linked to (as overviews.py does for GDALBuildOverviews): the results are
GDAL's. The algorithm is GDAL's two-pass scan, one line at a time (a forward then a backward pass over
the output), so memory stays a few lines wide whatever the raster size; GDAL reports progress per line.

Conventions, as gdal_proximity.py: target pixels are the non-zero pixels, or those equal to one of
`target_values`; the distance is from each pixel centre to the nearest target pixel centre, in pixels
or in georeferenced units (the geotransform's pixel width: metres on projected rasters, DEGREES on
geographic ones); pixels farther than `max_distance` (in the same units) get `nodata` (GDAL's default
65535, clamped to the output type). A given `nodata` is also declared on the output (gdal_proximity.py
writes the pixels but declares no nodata). GDAL 3.6 compared MAXDIST in pixels even with DISTUNITS=GEO;
the GDAL bundled here compares it in the distance units, as documented.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

import rasterio
import rasterio.shutil

from gdal_mcp.engine import gdal_c
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.options import creation_options as normalize_options
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.inherit import inherit_options
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import (
    _delete,
    check_nodata,
    output_profile,
    parse_dtype,
    pixel_driver,
    record_options,
    staging_options,
    summarize,
    writable_driver,
)
from gdal_mcp.engine.raster.region import select_bands
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _compute(src: str, band: int, work: str, options: list[str], progress: Progress) -> None:
    """GDALComputeProximity from band `band` of `src` into band 1 of the existing raster `work`."""
    lib = gdal_c.require("GDALComputeProximity")
    callback, failure = gdal_c.progress_callback(lambda fraction: progress(0.95 * fraction, "computing proximity"))
    argv = gdal_c.strings(options)
    with rasterio.Env(CPL_TMPDIR=str(Path(work).parent)):  # GDAL's Float32 work file (non-Float32 outputs)
        lib.CPLErrorReset()
        source = gdal_c.open_dataset(lib, src, update=False)
        try:
            target = gdal_c.open_dataset(lib, work, update=True)
            try:
                err = lib.GDALComputeProximity(
                    lib.GDALGetRasterBand(source, band), lib.GDALGetRasterBand(target, 1), argv, callback, None
                )
                message = gdal_c.last_error(lib)
            finally:
                closed = lib.GDALClose(target)
        finally:
            lib.GDALClose(source)
    if failure:
        raise failure[0]
    if err != 0 or closed not in (0, None):
        raise GdalMcpError("gdal-error", f"GDALComputeProximity failed: {message or 'unknown error'}")


@wrap_gdal_errors
def proximity(
    src: str,
    dst: str,
    *,
    band: int = 1,
    target_values: list[float] | None = None,
    distance_units: Literal["geo", "pixel"] = "geo",
    max_distance: float | None = None,
    nodata: float | None = None,
    output_type: str = "Float32",
    format: str | None = None,
    creation_options: dict[str, Any] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Distance from every pixel of band `band` of `src` to the nearest target pixel, written to `dst`."""
    warnings: list[str] = []
    if distance_units not in ("geo", "pixel"):
        raise GdalMcpError("invalid-argument", f"distance_units must be 'geo' or 'pixel' (got {distance_units!r})")
    dtype = parse_dtype(output_type) or "float32"
    if dtype in ("int8", "uint64", "int64"):
        raise GdalMcpError(
            "unsupported",
            f"GDAL's proximity does not write {output_type}; use Byte, UInt16, Int16, UInt32, Int32, Float32 or Float64",
        )
    if max_distance is not None and (not math.isfinite(max_distance) or max_distance <= 0):
        raise GdalMcpError("invalid-argument", f"max_distance must be a positive number (got {max_distance!r})")
    if nodata is not None:
        check_nodata(nodata, dtype)
    if target_values is not None and (not target_values or not all(math.isfinite(v) for v in target_values)):
        raise GdalMcpError("invalid-argument", "target_values must be a non-empty list of pixel values, e.g. [1, 3]")
    driver = pixel_driver(dst, format, "proximity")
    options = normalize_options(creation_options)
    alg = [f"DISTUNITS={distance_units.upper()}"]
    if target_values is not None:
        alg.append("VALUES=" + ",".join(_number(v) for v in target_values))
    if max_distance is not None:
        alg.append(f"MAXDIST={_number(max_distance)}")
    if nodata is not None:
        alg.append(f"NODATA={_number(nodata)}")
    with open_raster(src) as ds:
        select_bands(ds, [band])
        if ds.dtypes[band - 1].startswith("complex"):
            raise GdalMcpError("unsupported", "complex bands are not supported; convert the raster first")
        t = ds.transform
        if distance_units == "geo":
            if ds.crs is not None and ds.crs.is_geographic:
                warnings.append(
                    "the raster's CRS is geographic: distances are in DEGREES (GDAL scales pixel distances "
                    "by the pixel width); reproject to a projected CRS for metres, or use "
                    "distance_units='pixel'"
                )
            if not math.isclose(abs(t.a), abs(t.e), rel_tol=1e-9):
                warnings.append(
                    "pixels are not square: GDAL measures georeferenced distances with the pixel width, "
                    "so north-south distances are inaccurate"
                )
            if t.is_identity and not (ds.crs and ds.crs.to_wkt()):
                warnings.append("the raster has no georeferencing: distances are in pixels")
        options = inherit_options(driver, options, ds, dtype=dtype, count=1)
        staged = not writable_driver(driver)
        work = str(Path(dst).with_name(Path(dst).name + ".staging.tif")) if staged else dst
        profile = output_profile(
            "GTiff" if staged else driver,
            width=ds.width,
            height=ds.height,
            count=1,
            dtype=dtype,
            crs=ds.crs,
            transform=t,
            nodata=nodata,
            options=staging_options(driver) if staged else options,
        )
        existed = os.path.exists(dst)
        try:
            with rasterio.open(work, "w", **profile):
                pass
            _compute(src, band, work, alg, progress)
            if staged:
                progress(0.95, f"writing {driver} with GDAL CreateCopy")
                rasterio.shutil.copy(work, dst, driver=driver, **options)
            record_options(dst, options if staged else {k: str(v) for k, v in profile.items() if k.isupper()})
        except BaseException:
            if not existed:
                _delete(dst)
            raise
        finally:
            if staged:
                _delete(work)
    progress(1.0, "wrote proximity")
    return summarize(dst), warnings
