"""Edit a raster's metadata, like gdal_edit.py: CRS, nodata, scale/offset, bounds, metadata, descriptions, units.

Never touches pixel values. A GeoTIFF is edited in place (GDAL updates its tags); any other format is
edited on a copy that the caller puts in place only when the job succeeded (`dst`).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import rasterio
from rasterio.transform import from_bounds

from gdal_mcp.engine.crs import crs_label, parse_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.objects import download_dataset
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.output import check_nodata, declare_wide_nodata, summarize
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary
from gdal_mcp.sandbox.remote import is_remote

NOT_UPDATABLE = "{name} is a {driver} file, which GDAL cannot update; convert it to GeoTIFF first (raster_convert) and edit that"


WORLD_FILE_SUFFIXES = {".wld", ".tfw", ".pgw", ".jgw", ".gfw", ".bpw", ".j2w", ".aux"}


def _sidecars(main: Path) -> list[Path]:
    """Files beside a raster that belong to it: f.png.aux.xml, f.png.ovr, f.pgw, f.wld …"""
    found = []
    for p in main.parent.iterdir():
        if p == main or not p.is_file():
            continue
        if p.name.startswith(main.name + ".") or (p.stem == main.stem and p.suffix.lower() in WORLD_FILE_SUFFIXES):
            found.append(p)
    return found


def _per_band(value: Any, count: int, what: str) -> list[Any]:
    """One value for every band, or a list with one per band."""
    if isinstance(value, list):
        if len(value) != count:
            raise GdalMcpError(
                "invalid-argument",
                f"{what} has {len(value)} values but the raster has {count} band(s); "
                "give one value for all bands or one per band",
            )
        return value
    return [value] * count


def _check_bounds(bounds: Any) -> tuple[float, float, float, float]:
    try:
        minx, miny, maxx, maxy = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise GdalMcpError("invalid-argument", "bounds must be [minx, miny, maxx, maxy]") from None
    if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)) or minx >= maxx or miny >= maxy:
        raise GdalMcpError(
            "invalid-argument", f"bounds [{minx}, {miny}, {maxx}, {maxy}] must be finite with minx < maxx and miny < maxy"
        )
    return minx, miny, maxx, maxy


@wrap_gdal_errors
def edit(
    src: str,
    dst: str | None = None,
    *,
    crs: str | None = None,
    nodata: float | None = None,
    unset_nodata: bool = False,
    scale: float | list[float] | None = None,
    offset: float | list[float] | None = None,
    bounds: tuple[float, float, float, float] | None = None,
    metadata: dict[str, str | None] | None = None,
    band_descriptions: list[str | None] | None = None,
    units: str | list[str | None] | None = None,
    progress: Progress = no_progress,
) -> tuple[RasterSummary, list[str]]:
    """Apply the edits to `src` in place (dst None) or to a copy of it at `dst`; return the result's summary."""
    if nodata is not None and unset_nodata:
        raise GdalMcpError("invalid-argument", "give nodata (a new value) or unset_nodata=true, not both")
    if all(v is None for v in (crs, nodata, scale, offset, bounds, metadata, band_descriptions, units)) and not unset_nodata:
        raise GdalMcpError(
            "invalid-argument",
            "nothing to change: give crs, nodata, unset_nodata, scale, offset, bounds, metadata, band_descriptions or units",
        )
    if dst is None and Path(src).stat().st_nlink > 1:
        raise GdalMcpError(
            "unsupported",
            f"{Path(src).name} has other hard links, which an edit in place would change "
            "too; edit a copy (the raster_edit tool does)",
        )
    new_crs = parse_crs(crs, "crs") if crs is not None else None
    box = _check_bounds(bounds) if bounds is not None else None
    warnings: list[str] = []

    with rasterio.open(src) as ds:
        driver, count, dtypes = ds.driver, ds.count, ds.dtypes
        width, height = ds.width, ds.height
        was_cog = driver == "GTiff" and not cog_check(ds)[0]
    if nodata is not None:
        for dt in set(dtypes):
            check_nodata(nodata, dt)
    scales = _per_band(scale, count, "scale") if scale is not None else None
    offsets = _per_band(offset, count, "offset") if offset is not None else None
    unit_list = _per_band(units, count, "units") if units is not None else None
    if band_descriptions is not None and len(band_descriptions) != count:
        raise GdalMcpError(
            "invalid-argument",
            f"band_descriptions has {len(band_descriptions)} entries but the raster "
            f"has {count} band(s); use null for a band to leave unchanged",
        )

    target = src
    if dst is not None:
        # The copy carries the dataset's sidecars too (.aux.xml holding a PNG's CRS, world files, .ovr): edits that
        # GDAL stores in PAM extend them, and committing the copy must not drop what they held.
        progress(0.1, "copying the file to edit the copy")
        main = Path(src)
        if is_remote(src):  # an object in storage: its objects read here, then uploaded in their place
            download_dataset(src, dst)
        else:
            shutil.copyfile(main, dst)
            for sibling in _sidecars(main):
                shutil.copyfile(
                    sibling,
                    Path(dst).parent / (Path(dst).name + sibling.name[len(main.name) :])
                    if sibling.name.startswith(main.name)
                    else Path(dst).parent / sibling.name,
                )
        target = dst
    # GDAL must see the sidecars (the worker's default skips directory listings): PAM edits then extend the
    # .aux.xml instead of replacing it with one that holds only the new items.
    with rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="FALSE"):
        try:
            # A COG (GDAL's layout marker) is opened for update only when told the layout may break: the edit goes ahead
            # and the warning below says it is no longer a valid COG (gdal_edit.py -oo IGNORE_COG_LAYOUT_BREAK=YES)
            cog_ok = {"IGNORE_COG_LAYOUT_BREAK": "YES"} if driver == "GTiff" else {}
            ds_u = rasterio.open(target, "r+", **cog_ok)
        except rasterio.errors.RasterioIOError:
            raise GdalMcpError("unsupported", NOT_UPDATABLE.format(name="the input", driver=driver)) from None
        with ds_u:
            try:
                _apply(
                    ds_u,
                    new_crs=new_crs,
                    box=box,
                    width=width,
                    height=height,
                    unset_nodata=unset_nodata,
                    nodata=nodata,
                    scales=scales,
                    offsets=offsets,
                    metadata=metadata,
                    band_descriptions=band_descriptions,
                    unit_list=unit_list,
                    progress=progress,
                )
            except (ValueError, rasterio.errors.RasterioError) as e:
                # A driver that refuses one of the changes on an existing file (MRF: nodata only at creation).
                detail = e.args[0] % e.args[1:] if len(e.args) > 1 and "%" in str(e.args[0]) else str(e)
                raise GdalMcpError(
                    "unsupported",
                    f"GDAL cannot change the {_refused_item(e)} of an existing {driver} "
                    f"file ({detail}); nothing was changed. Convert it to GeoTIFF first (raster_convert) "
                    "and edit that",
                ) from None
    if nodata is not None and not unset_nodata:
        declare_wide_nodata(str(target), dtypes[0], nodata)  # rasterio declares a 64-bit integer's nodata wrong
    if was_cog:
        with rasterio.open(target) as ds:
            if cog_check(ds)[0]:
                warnings.append(
                    "the file was a Cloud Optimized GeoTIFF; editing its tags in place moved them, so it is "
                    "no longer a valid COG (rewrite it with raster_convert format=COG)"
                )
    progress(1.0, "edited")
    summary = summarize(target)
    if new_crs is not None:
        summary.crs = crs_label(new_crs)
    return summary, warnings


def _apply(
    ds_u: Any,
    *,
    new_crs: Any,
    box: Any,
    width: int,
    height: int,
    unset_nodata: bool,
    nodata: float | None,
    scales: Any,
    offsets: Any,
    metadata: Any,
    band_descriptions: Any,
    unit_list: Any,
    progress: Progress,
) -> None:
    """Write the edits to a dataset open for update."""
    progress(0.5, "writing metadata")
    if new_crs is not None:
        ds_u.crs = new_crs
    if box is not None:
        ds_u.transform = from_bounds(*box, width, height)
    if unset_nodata:
        ds_u.nodata = None
    elif nodata is not None:
        ds_u.nodata = nodata
    if scales is not None:
        ds_u.scales = tuple(float(v) for v in scales)
    if offsets is not None:
        ds_u.offsets = tuple(float(v) for v in offsets)
    if metadata:
        current = ds_u.tags()
        removed = [k for k, v in metadata.items() if v is None]
        keep = {k: v for k, v in current.items() if k not in removed}
        keep.update({k: str(v) for k, v in metadata.items() if v is not None})
        if removed:
            ds_u.update_tags(**{k: "" for k in removed if k in current})  # GDAL drops empty items
        ds_u.update_tags(**keep)
    if band_descriptions is not None:
        for i, text in enumerate(band_descriptions, start=1):
            if text is not None:
                ds_u.set_band_description(i, text)
    if unit_list is not None:
        for i, unit in enumerate(unit_list, start=1):
            if unit is not None:
                ds_u.set_band_unit(i, unit)


def _refused_item(error: Exception) -> str:
    text = str(error).lower()
    for word, item in (
        ("nodata", "nodata value"),
        ("crs", "CRS"),
        ("transform", "extent"),
        ("scale", "scale"),
        ("offset", "offset"),
        ("unit", "units"),
        ("description", "band descriptions"),
    ):
        if word in text:
            return item
    return "metadata"
