"""CRS descriptions, shared by raster and vector engines."""

from __future__ import annotations

import warnings
from typing import Any

from gdal_mcp.models import CRSInfo


def describe_crs(crs: Any) -> CRSInfo | None:
    """CRSInfo from anything pyproj accepts (rasterio CRS, WKT, 'EPSG:4326'); None if empty."""
    if crs is None:
        return None
    from pyproj import CRS

    wkt = crs.to_wkt() if hasattr(crs, "to_wkt") else str(crs)
    if not wkt:
        return None
    try:
        c = CRS.from_user_input(wkt)
    except Exception:  # noqa: BLE001 - unusual WKT pyproj cannot parse: still report it
        return CRSInfo(wkt=wkt)
    try:
        # 90, not pyproj's default 70: at 70 custom Albers grids (slope.tif) match unrelated codes.
        epsg = c.to_epsg(min_confidence=90)
    except Exception:  # noqa: BLE001
        epsg = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "you will likely lose information": proj4 is only a hint here
            proj4 = c.to_proj4()
    except Exception:  # noqa: BLE001
        proj4 = None
    units = c.axis_info[0].unit_name if c.axis_info else None
    return CRSInfo(epsg=epsg, name=c.name, wkt=c.to_wkt(), proj4=proj4, is_geographic=c.is_geographic,
                   units=units)


def parse_crs(text: str | int, what: str = "crs") -> Any:
    """A rasterio CRS from what GIS users type: EPSG:4326, epsg:4326, 4326, OGC:CRS84, PROJ string, WKT."""
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    from gdal_mcp.errors import GdalMcpError

    value = str(text).strip()
    if value.isdigit():
        value = f"EPSG:{value}"
    try:
        crs = CRS.from_user_input(value)
    except (CRSError, ValueError) as e:
        raise GdalMcpError(
            "invalid-argument",
            f"{what} {str(text)[:80]!r} is not a CRS GDAL understands ({e}); use e.g. EPSG:4326, 32618, "
            "OGC:CRS84, a PROJ string or WKT",
        ) from None
    if not crs.to_wkt():
        raise GdalMcpError("invalid-argument", f"{what} {str(text)[:80]!r} is empty")
    return crs


def crs_label(crs: Any) -> str | None:
    """EPSG:n when the CRS has a code, else its name; None without a CRS."""
    if crs is None or not crs.to_wkt():
        return None
    info = describe_crs(crs)
    if info is None:
        return None
    return f"EPSG:{info.epsg}" if info.epsg else info.name
