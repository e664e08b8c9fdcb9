"""Overviews, like gdaladdo: list them, build them in place, or remove them (gdaladdo -clean).

"add" and "delete" modify the file in place; the caller decides whether writing is allowed.
"""

from __future__ import annotations

import ctypes
import math
import os
from typing import Any, Literal

import rasterio
from rasterio.enums import OverviewResampling, Resampling
from rasterio.errors import RasterioIOError
from rasterio.io import driver_can_create

from gdal_mcp.engine import guard
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.gdal_c import GDAL_OF_RASTER, GDAL_OF_READONLY, GDAL_OF_UPDATE, last_error, libgdal
from gdal_mcp.engine.objects import download_dataset
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import OverviewsResult
from gdal_mcp.sandbox.remote import is_remote, shown

# gdaladdo's default since GDAL 3.2: halve until the smallest overview fits in this many pixels.
AUTO_MIN_SIZE = 256
MAX_LEVELS = 32
RESAMPLINGS = tuple(r.name for r in OverviewResampling)
COG_REFUSAL = (
    "{path} is a Cloud Optimized GeoTIFF: changing its overviews in place would break the COG layout, so "
    "GDAL refuses. Write a new COG instead (raster_convert with format=COG builds overviews; creation "
    "options OVERVIEW_RESAMPLING, OVERVIEW_COUNT), or convert it to a plain GTiff first"
)


def auto_levels(width: int, height: int, min_size: int = AUTO_MIN_SIZE) -> list[int]:
    """Powers of 2 until the overview is at most `min_size` pixels on its longest side (gdaladdo's loop)."""
    levels: list[int] = []
    factor = 1
    while math.ceil(width / factor) > min_size or math.ceil(height / factor) > min_size:
        factor *= 2
        levels.append(factor)
    return levels


def check_levels(levels: Any, width: int, height: int) -> list[int]:
    if isinstance(levels, str | bytes) or not isinstance(levels, list | tuple) or not levels:
        raise GdalMcpError("invalid-argument", 'levels must be "auto" or a non-empty list of integers >= 2, e.g. [2, 4, 8, 16]')
    bad = [v for v in levels if isinstance(v, bool) or not isinstance(v, int) or v < 2]
    if bad:
        raise GdalMcpError("invalid-argument", f"overview levels must be integers >= 2 (got {bad}); e.g. [2, 4, 8, 16]")
    out = sorted(set(levels))
    if len(out) > MAX_LEVELS:
        raise GdalMcpError("invalid-argument", f"at most {MAX_LEVELS} overview levels can be built")
    too_big = [v for v in out if v > max(width, height)]
    if too_big:
        raise GdalMcpError(
            "invalid-argument",
            f"levels {too_big} would make overviews smaller than one pixel "
            f"(the raster is {width}x{height}); use levels up to {max(width, height)}",
        )
    return out


def _reported(factor: int, width: int) -> int:
    """The factor rasterio reports for an overview built at `factor` (from the overview's width)."""
    return int(round(width / math.ceil(width / factor)))


def check_resampling(name: str) -> Resampling:
    key = str(name).strip().lower().replace("-", "_").replace("cubicspline", "cubic_spline")
    if key not in RESAMPLINGS:
        raise GdalMcpError(
            "invalid-argument", f"resampling {name!r} is not available for overviews; use one of: {', '.join(RESAMPLINGS)}"
        )
    return Resampling[key]


def _clear_overviews(path: str) -> None:
    """GDALBuildOverviews with no levels: what `gdaladdo -clean` does."""
    lib = libgdal()
    if lib is None:
        raise GdalMcpError(
            "unsupported",
            "cannot reach this rasterio's GDAL library to remove overviews; rewrite the "
            "file without them instead (convert it to GTiff)",
        )
    with rasterio.Env():  # registers the drivers
        handle = lib.GDALOpenEx(os.fsencode(path), GDAL_OF_UPDATE | GDAL_OF_RASTER, None, None, None)
        if not handle:
            raise GdalMcpError("gdal-error", f"GDAL cannot open {path} for update: {last_error(lib)}")
        try:
            err = lib.GDALBuildOverviews(handle, b"NONE", 0, None, 0, None, None, None)
            message = last_error(lib)
        finally:
            closed = lib.GDALClose(handle)
        if err != 0 or closed not in (0, None):
            raise GdalMcpError("gdal-error", f"GDAL could not remove the overviews of {path}: {message or 'failure'}")


def _open_for_update(path: str, driver: str) -> Any:
    hint = "convert it to GTiff or COG first (raster_convert), then add overviews to the copy"
    if path.startswith("/vsi") or not os.path.isfile(path):
        raise GdalMcpError("unsupported", f"{path} is not a plain file GDAL can update in place; {hint}")
    if not driver_can_create(driver):
        # rasterio would rewrite the whole file through memory for these: refuse instead.
        raise GdalMcpError("unsupported", f"the {driver} format cannot be updated in place; {hint}")
    try:
        ds = rasterio.open(path, "r+")
    except RasterioIOError as e:
        raise GdalMcpError("unsupported", f"GDAL cannot open {path} for update ({e}); {hint}") from None
    except Exception as e:
        if "IGNORE_COG_LAYOUT_BREAK" in str(e):
            raise GdalMcpError("unsupported", COG_REFUSAL.format(path=path)) from None
        raise
    try:
        guard.check_files(ds.files)
    except BaseException:
        ds.close()
        raise
    return ds


@wrap_gdal_errors
def overviews(
    path: str,
    action: Literal["add", "delete"] = "add",
    levels: Literal["auto"] | list[int] = "auto",
    resampling: str = "nearest",
    progress: Progress = no_progress,
) -> OverviewsResult:
    """Add (internal, like gdaladdo) or delete the overviews of a raster in place; levels are those of band 1.

    Listing them is raster_info's job (engine.raster.info), so this function always writes.
    """
    if action not in ("add", "delete"):
        raise GdalMcpError(
            "invalid-argument", f"action must be add or delete (got {action!r}); raster_info lists the overviews a raster has"
        )
    warnings: list[str] = []
    with open_raster(path) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument", "the raster has no bands (a container?); use one of its subdatasets (raster_info lists them)"
            )
        existing = sorted(ds.overviews(1))
        driver, width, height = ds.driver, ds.width, ds.height
        had_external = any(f.lower().endswith(".ovr") for f in ds.files)
        cog_layout = driver == "GTiff" and ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"
        # A COG written without GDAL's layout marker: GDAL lets us update it, so warn afterwards.
        was_cog = driver == "GTiff" and bool(existing) and not had_external and not cog_check(ds)[0]
    if cog_layout:
        raise GdalMcpError(
            "unsupported",
            COG_REFUSAL.format(path=path) + "; or add external=true overviews (a .ovr beside the file leaves the COG untouched)",
        )

    if action == "delete":
        if not existing:
            return OverviewsResult(path=path, action="delete", levels=[], warnings=["the raster had no overviews"])
        _open_for_update(path, driver).close()  # same checks as "add" before touching the file
        progress(0.0, f"removing overviews {existing}")
        size = os.path.getsize(path)
        _clear_overviews(path)
        with open_raster(path) as ds:
            after = sorted(ds.overviews(1))
        if driver == "GTiff" and not had_external and os.path.getsize(path) >= size:
            warnings.append(
                "the file does not shrink: GDAL leaves the freed space unused; rewrite it (raster_convert) to reclaim the space"
            )
        progress(1.0, "removed overviews")
        return OverviewsResult(path=path, action="delete", levels=after, warnings=warnings)

    method = check_resampling(resampling)
    factors = auto_levels(width, height) if levels == "auto" else check_levels(levels, width, height)
    if not factors:
        return OverviewsResult(
            path=path,
            action="add",
            levels=existing,
            resampling=method.name,
            warnings=[
                f"the raster ({width}x{height}) is already at most {AUTO_MIN_SIZE} pixels on "
                "each side; no overview level is needed (pass levels to force some)"
            ],
        )
    progress(0.0, f"building overviews {factors} ({method.name})")
    with _open_for_update(path, driver) as ds:
        ds.build_overviews(factors, method)
    with open_raster(path) as ds:
        after = sorted(ds.overviews(1))
    missing = [f for f in factors if _reported(f, width) not in after]
    if missing:
        # GDAL 3.10 can drop a new level when existing ones are rebuilt with another method: add it again.
        with _open_for_update(path, driver) as ds:
            ds.build_overviews(missing, method)
    with open_raster(path) as ds:
        after = sorted(ds.overviews(1))
        missing = [f for f in factors if _reported(f, width) not in after]
        if missing:
            raise GdalMcpError(
                "gdal-error",
                f"GDAL did not keep overview level(s) {missing} (present: {after}); "
                "convert the file to a fresh GTiff or COG and add overviews to that",
            )
        external = any(f.lower().endswith(".ovr") for f in ds.files)
        broken_cog = was_cog and bool(cog_check(ds)[0])
    if external:
        warnings.append("the overviews are in an external .ovr file next to the raster; keep it with the raster")
    if broken_cog:
        warnings.append(
            "the file was a valid COG; overviews added in place break its layout: convert it again with "
            "format=COG to get a valid COG"
        )
    progress(1.0, f"built overviews {factors}")
    return OverviewsResult(path=path, action="add", levels=after, resampling=method.name, warnings=warnings)


@wrap_gdal_errors
def overviews_on_copy(
    src: str,
    dst: str,
    *,
    action: Literal["add", "delete"],
    levels: Literal["auto"] | list[int] = "auto",
    resampling: str = "nearest",
    progress: Progress = no_progress,
) -> tuple[OverviewsResult, list[str]]:
    """Copy `src` (with its sidecars) to `dst`, then add or delete overviews there.

    The caller renames `dst` over `src` on success, so a killed or failed job never leaves a half-written input.
    """
    import shutil

    if is_remote(src):  # an object in storage: its objects read here, then uploaded in their place
        download_dataset(src, dst)
        progress(0.2, "read")
    else:
        with open_raster(src) as ds:
            name = os.path.basename(src)
            files = [f for f in ds.files if os.path.isfile(f) and os.path.basename(f).startswith(name)]
        target = os.path.basename(dst)
        for i, f in enumerate(files):
            shutil.copy2(f, os.path.join(os.path.dirname(dst), target + os.path.basename(f)[len(name) :]))
            progress(0.2 * (i + 1) / len(files), f"copied {os.path.basename(f)}")

    def rest(fraction: float, message: str = "") -> None:
        progress(0.2 + 0.8 * fraction, message)

    try:
        result = overviews(dst, action=action, levels=levels, resampling=resampling, progress=rest)
    except GdalMcpError as e:
        if not is_remote(src) or "Cloud Optimized GeoTIFF" not in e.message:
            raise
        raise GdalMcpError(  # an object: no .ovr is written beside it, so the one way is a new COG in its place
            "unsupported",
            f"{shown(src)} is a Cloud Optimized GeoTIFF: changing its overviews in place would break the COG layout. "
            "Write it again as a COG in its place: raster_convert format=COG with output the same as input and "
            "overwrite=true (creation_options OVERVIEW_COUNT, OVERVIEW_RESAMPLING choose the overviews)",
        ) from None
    return result, list(result.warnings)


def _gdal_resampling(method: Resampling) -> bytes:
    return {"cubic_spline": b"CUBICSPLINE"}.get(method.name, method.name.upper().encode())


@wrap_gdal_errors
def overviews_external(
    src: str,
    dst: str,
    *,
    levels: Literal["auto"] | list[int] = "auto",
    resampling: str = "nearest",
    progress: Progress = no_progress,
) -> tuple[OverviewsResult, list[str]]:
    """Build external overviews of `src` into `dst` (its `<name>.ovr`, written elsewhere), like gdaladdo -ro.

    `src` is never opened for writing. `dst` must be named `<basename of src>.ovr`: a symlink to `src` is
    made beside it, opened read-only, and GDAL writes the overviews to `<symlink>.ovr`, i.e. `dst`. An
    existing `src.ovr` is copied first, so its levels are kept (GDAL adds to it, as gdaladdo -ro does). The
    caller moves `dst` into place beside `src` on success: the .ovr appears whole or not at all.
    """
    import shutil

    name = os.path.basename(src)
    if os.path.basename(dst) != name + ".ovr":
        raise GdalMcpError("internal-error", f"external overviews of {name} must be written as {name}.ovr")
    if src.startswith("/vsi") or not os.path.isfile(src):
        raise GdalMcpError("unsupported", f"{src} is not a plain file; external overviews need one (convert it first)")
    method = check_resampling(resampling)
    with open_raster(src) as ds:
        if ds.count == 0:
            raise GdalMcpError(
                "invalid-argument", "the raster has no bands (a container?); use one of its subdatasets (raster_info lists them)"
            )
        width, height = ds.width, ds.height
        existing = sorted(ds.overviews(1))
        old_ovr = next((f for f in ds.files if f.lower() == (src + ".ovr").lower()), None)
    if existing and old_ovr is None:
        raise GdalMcpError(
            "invalid-argument",
            f"the raster already has internal overviews {existing}: GDAL cannot add "
            "external ones beside them. Use external=false, or delete the internal overviews first",
        )
    factors = auto_levels(width, height) if levels == "auto" else check_levels(levels, width, height)
    if not factors:
        raise GdalMcpError(
            "invalid-argument",
            f"the raster ({width}x{height}) is already at most {AUTO_MIN_SIZE} pixels "
            "on each side; no overview level is needed (pass levels to force some)",
        )
    lib = libgdal()
    if lib is None:
        raise GdalMcpError(
            "unsupported", "cannot reach this rasterio's GDAL library to build external overviews; use external=false"
        )
    link = os.path.join(os.path.dirname(dst), name)
    os.symlink(os.path.abspath(src), link)
    try:
        if old_ovr is not None:
            shutil.copy2(old_ovr, dst)
        progress(0.0, f"building external overviews {factors} ({method.name})")
        array = (ctypes.c_int * len(factors))(*factors)
        with rasterio.Env():
            handle = lib.GDALOpenEx(os.fsencode(link), GDAL_OF_RASTER | GDAL_OF_READONLY, None, None, None)
            if not handle:
                raise GdalMcpError("gdal-error", f"GDAL cannot open {src}: {last_error(lib)}")
            try:
                err = lib.GDALBuildOverviews(handle, _gdal_resampling(method), len(factors), array, 0, None, None, None)
                message = last_error(lib)
            finally:
                lib.GDALClose(handle)
        if err != 0 or not os.path.isfile(dst):
            raise GdalMcpError("gdal-error", f"GDAL could not build external overviews of {name}: {message or 'failure'}")
        with open_raster(link) as ds:
            after = sorted(ds.overviews(1))
    finally:
        os.unlink(link)
        for extra in (link + ".aux.xml", link + ".msk"):
            if os.path.exists(extra):
                os.unlink(extra)
    missing = [f for f in factors if _reported(f, width) not in after]
    if missing:
        raise GdalMcpError("gdal-error", f"GDAL did not build overview level(s) {missing} (present: {after})")
    progress(1.0, f"built external overviews {factors}")
    warnings = [
        f"the overviews are in {name}.ovr beside the raster (the raster itself is unchanged); keep the two files together"
    ]
    return OverviewsResult(path=src, action="add", levels=after, resampling=method.name, warnings=warnings), warnings
