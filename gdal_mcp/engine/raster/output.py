"""Writing rasters: driver inference, creation options, and the summary every write tool returns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import rasterio
from rasterio.drivers import raster_driver_extensions

from gdal_mcp.engine.raster.info import nodata_value
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Bounds, RasterSummary

# Drivers GDAL can only write through CreateCopy (no window-by-window writes).
COPY_ONLY = {"COG", "PNG", "JPEG", "GIF", "WEBP", "JP2OpenJPEG", "XPM", "BMP", "AAIGrid", "XYZ", "SRTMHGT",
             "KMLSUPEROVERLAY", "MBTiles", "PDF", "GRIB"}


def infer_driver(path: str | os.PathLike[str], fmt: str | None) -> str:
    """The GDAL driver short name: `fmt` when given (case-insensitive), else from the extension."""
    drivers = {d.lower(): d for d in rasterio.drivers.raster_driver_extensions().values()}
    drivers.update({"cog": "COG", "gtiff": "GTiff", "vrt": "VRT", "mem": "MEM"})
    with rasterio.Env() as env:
        available = env.drivers()
    if fmt:
        name = drivers.get(fmt.lower()) or next((d for d in available if d.lower() == fmt.lower()), None)
        if not name:
            raise GdalMcpError("invalid-argument", f"unknown raster format {fmt!r}; use a GDAL driver short name "
                               "such as GTiff, COG, PNG, JPEG, netCDF, GPKG, VRT")
        return name
    ext = Path(path).name.lower().split(".", 1)[-1] if "." in Path(path).name else ""
    for candidate in (ext, ext.rsplit(".", 1)[-1]):
        if candidate in raster_driver_extensions():
            return raster_driver_extensions()[candidate]
    raise GdalMcpError("invalid-argument", f"cannot tell the format from '{Path(path).name}'; pass format= "
                       "(e.g. GTiff, COG, PNG) or use a known extension (.tif, .png, .jpg, .nc, .gpkg, .vrt)")


def creation_options(options: dict[str, Any] | None) -> dict[str, str]:
    """GDAL creation options as upper-case NAME=value strings (booleans as YES/NO)."""
    out: dict[str, str] = {}
    for k, v in (options or {}).items():
        if not isinstance(k, str) or not k.replace("_", "").isalnum():
            raise GdalMcpError("invalid-argument", f"creation option name {k!r} is not valid")
        out[k.upper()] = ("YES" if v else "NO") if isinstance(v, bool) else str(v)
    return out


def crs_label(crs: Any) -> str | None:
    if crs is None or not crs.to_wkt():
        return None
    from gdal_mcp.engine.crs import describe_crs

    info = describe_crs(crs)
    if info is None:
        return None
    return f"EPSG:{info.epsg}" if info.epsg else info.name


def summarize(path: str | os.PathLike[str]) -> RasterSummary:
    """Describe a raster just written (size counts every file GDAL lists, e.g. .ovr, .aux.xml)."""
    with rasterio.open(path) as ds:
        size = sum(os.path.getsize(f) for f in ds.files if os.path.isfile(f))
        return RasterSummary(
            driver=ds.driver, width=ds.width, height=ds.height, count=ds.count,
            dtype=ds.dtypes[0] if ds.count else "none",
            crs=crs_label(ds.crs),
            bounds=Bounds(left=ds.bounds.left, bottom=ds.bounds.bottom, right=ds.bounds.right, top=ds.bounds.top),
            resolution=(abs(ds.transform.a), abs(ds.transform.e)),
            nodata=nodata_value(ds.nodata),
            compression=ds.compression.name if ds.compression else None,
            file_size=size,
        )
