"""Raster metadata (gdalinfo), with optional exact statistics computed from the pixels."""

from __future__ import annotations

import math
import os
from typing import Any

from gdal_mcp.engine.crs import crs_label, describe_crs
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.dimensions import band_dimensions
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.stats import band_statistics
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import BandInfo, Bounds, GcpInfo, NoData, RasterInfo, SubdatasetInfo

MAX_BANDS = 100
MAX_SUBDATASETS = 50
MAX_METADATA_ITEMS = 40
MAX_METADATA_VALUE = 500


def nodata_value(value: float | None) -> NoData:
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


def wgs84_bounds(ds) -> tuple[Bounds | None, str | None]:
    """Bounds in EPSG:4326, or a warning when the CRS cannot be transformed (e.g. off-disk corners)."""
    if ds.crs is None:
        return None, None
    from rasterio.warp import transform_bounds

    try:
        b = transform_bounds(ds.crs, "EPSG:4326", *ds.bounds, densify_pts=21)
    except Exception as e:  # noqa: BLE001 - e.g. geostationary corners outside the projection domain
        return None, f"WGS84 bounds not computable: {e}"
    if not all(math.isfinite(v) for v in b):
        return None, "WGS84 bounds not computable: corners lie outside the projection's domain"
    return Bounds(left=b[0], bottom=b[1], right=b[2], top=b[3]), None


@wrap_gdal_errors
def raster_info(path: str, band: int | None = None, stats: bool = False, progress: Progress = no_progress) -> RasterInfo:
    """Describe a raster: structure, georeferencing, bands, COG validity; exact stats when asked. A container
    (subdatasets, no bands) says so, lists its subdatasets and gives no size, transform or bounds: GDAL's 512x512
    and identity transform for one are placeholders, not facts."""
    with open_raster(path) as ds:
        warnings: list[str] = []
        if band is not None and not 1 <= band <= ds.count:
            raise GdalMcpError("invalid-argument", f"band {band} does not exist; the raster has {ds.count} band(s)")
        indexes = [band] if band is not None else list(range(1, min(ds.count, MAX_BANDS) + 1))
        statistics = band_statistics(ds, indexes, progress=progress) if stats and indexes else {}
        dims = band_dimensions(ds, indexes)
        warnings += dims.warnings
        bands = []
        for b in indexes:
            i = b - 1
            bh, bw = ds.block_shapes[i]
            bands.append(
                BandInfo(
                    index=b,
                    dtype=ds.dtypes[i],
                    nodata=nodata_value(ds.nodatavals[i]),
                    scale=ds.scales[i],
                    offset=ds.offsets[i],
                    unit=ds.units[i] or None,
                    description=ds.descriptions[i] or None,
                    color_interp=ds.colorinterp[i].name,
                    block_size=(bw, bh),
                    overviews=ds.overviews(b),
                    mask_flags=[f.name for f in ds.mask_flag_enums[i]],
                    dimensions=dims.by_band.get(b, {}),
                    statistics=statistics.get(b),
                )
            )
        subdatasets = subdataset_list(ds)
        container = ds.count == 0
        if stats and container:
            warnings.append("no bands: statistics need pixels; open one of the subdatasets instead")
        if container and not subdatasets:
            warnings.append("no bands and no subdatasets: GDAL finds no raster in this file (try vector_info)")
        bounds84, warn = wgs84_bounds(ds) if not container else (None, None)
        if warn:
            warnings.append(warn)
        gcp_points, gcp_crs = ds.gcps
        has_rpc = bool(ds.tags(ns="RPC"))
        georeferenced_otherwise = bool(gcp_points) or has_rpc
        if ds.crs is None and ds.count and not georeferenced_otherwise:
            warnings.append("no CRS: the raster is not georeferenced (or its .prj/.aux.xml is missing)")
        if georeferenced_otherwise and ds.transform.is_identity:
            warnings.append(
                "georeferenced by " + ("GCPs" if gcp_points else "RPCs") + ", not a geotransform: bounds "
                "and transform are in pixels; raster_reproject warps it onto a map grid"
            )
        errors, cog_warnings = (
            cog_check(ds) if not container else (["a container of subdatasets with no bands of its own, not an image"], [])
        )
        tags = ds.tags()
        metadata = {
            k: (v if len(v) <= MAX_METADATA_VALUE else v[:MAX_METADATA_VALUE] + "…")
            for k, v in list(tags.items())[:MAX_METADATA_ITEMS]
        }
        if not stats and any(k.startswith("STATISTICS_") for b in range(1, ds.count + 1) for k in ds.tags(b)):
            warnings.append("the file stores STATISTICS_* metadata, which may be stale; use stats=true for exact values")
        main_file = ds.files[0] if ds.files else None
        size = os.path.getsize(main_file) if main_file and os.path.isfile(main_file) else None
        t = ds.transform
        tiled = bool(ds.profile.get("tiled", False))
        return RasterInfo(
            path=path,
            driver=ds.driver,
            kind="container" if container else "raster",
            width=None if container else ds.width,
            height=None if container else ds.height,
            count=ds.count,
            crs=describe_crs(ds.crs),
            transform=None if container else list(t.to_gdal()),
            bounds=None
            if container
            else Bounds(left=ds.bounds.left, bottom=ds.bounds.bottom, right=ds.bounds.right, top=ds.bounds.top),
            bounds_wgs84=bounds84,
            resolution=None
            if container
            else (abs(t.a) if t.b == 0 else math.hypot(t.a, t.d), abs(t.e) if t.d == 0 else math.hypot(t.b, t.e)),
            dimensions=dims.info,
            gcps=GcpInfo(count=len(gcp_points), crs=crs_label(gcp_crs)) if gcp_points else None,
            rpc=has_rpc,
            bands=bands,
            bands_truncated=band is None and ds.count > MAX_BANDS,
            subdatasets=subdatasets[:MAX_SUBDATASETS],
            subdatasets_remaining=max(0, len(subdatasets) - MAX_SUBDATASETS),
            compression=compression_name(ds),
            interleave=ds.interleaving.name if ds.interleaving else None,
            tiled=tiled,
            is_cog=not errors,
            cog_issues=errors + cog_warnings,
            cog_note=None if errors else cog_note(ds, tiled),
            file_size=size,
            metadata=metadata,
            warnings=warnings,
        )


def subdataset_list(ds: Any) -> list[SubdatasetInfo]:
    """Subdatasets as GDAL names them (SUBDATASET_n_NAME, quoted as the tools accept it) with their descriptions."""
    tags = ds.tags(ns="SUBDATASETS")
    found = []
    n = 1
    while f"SUBDATASET_{n}_NAME" in tags:
        found.append(SubdatasetInfo(path=tags[f"SUBDATASET_{n}_NAME"], description=tags.get(f"SUBDATASET_{n}_DESC") or None))
        n += 1
    if not found:  # a driver that lists them only through GDALGetSubdatasets
        found = [SubdatasetInfo(path=name) for name in ds.subdatasets]
    return found


def cog_note(ds: Any, tiled: bool) -> str | None:
    """Why a file GDAL's COG validator accepts has no tiles or no overviews, when it has not (validate_cloud_optimized_
    geotiff.py asks for tiles and recommends overviews only above 512 px, and takes strips up to 1024 px wide)."""
    if ds.driver != "GTiff":
        return None
    overviews = bool(ds.overviews(1))
    if ds.width <= 512 and ds.height <= 512:
        if tiled and overviews:
            return None
        missing = " or ".join(x for x, has in (("tiles", tiled), ("overviews", overviews)) if not has)
        return (
            f"valid COG without {missing}: at {ds.width}x{ds.height} px it is within 512x512, and GDAL's COG rule "
            "(validate_cloud_optimized_geotiff) asks for tiles and overviews only above 512 px: an image this small "
            "is read whole"
        )
    if not tiled:
        return (
            f"valid COG without tiles: GDAL's COG rule (validate_cloud_optimized_geotiff) accepts strips up to 1024 px "
            f"wide and these are {ds.width} px (tiles are still better for reading small windows)"
        )
    return None


def compression_name(ds: Any) -> str | None:
    """The compression GDAL reports for a dataset, by name: rasterio gives an enum for the codecs it knows and the
    plain string for others (an MRF's PNG, JPEG …)."""
    value = ds.compression
    if not value:
        return None
    return str(getattr(value, "name", value))
