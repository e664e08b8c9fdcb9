"""The grid-size guard shared by every tool that makes a new raster grid (reproject, convert, rasterize, mosaic).

A grid smaller than 2x2 pixels is almost always a resolution given in the wrong units (10 "metres" on
EPSG:4326 is 10 degrees); one larger than the server's --max-pixels would fill the disk or run for hours.
Both are refused with a message that names the units of the CRS, so the caller can correct the number.
"""

from __future__ import annotations

from typing import Any

from gdal_mcp.errors import GdalMcpError

DEFAULT_MAX_PIXELS = 2**34
METRES_PER_DEGREE = 111_320.0


def crs_units(crs: Any) -> str:
    """The units of a CRS's axes, plural and spelt out: "degrees", "metres", "US survey feet", "pixels"."""
    if crs is None:
        return "pixels (the raster has no CRS)"
    try:
        if crs.is_geographic:
            return "degrees"
        name = (crs.linear_units or "").lower()
    except Exception:  # noqa: BLE001 - an unusual CRS: say nothing wrong
        return "CRS units"
    return {
        "metre": "metres",
        "meter": "metres",
        "m": "metres",
        "foot": "feet",
        "us survey foot": "US survey feet",
        "": "CRS units",
    }.get(name, name + "s")


def describe_units(crs: Any, label: str | None = None) -> str:
    """The units with the reason, e.g. "degrees (EPSG:4326 is geographic: its units are degrees)"."""
    units = crs_units(crs)
    if crs is None:
        return units
    try:
        kind = "geographic" if crs.is_geographic else "projected"
    except Exception:  # noqa: BLE001
        return units
    return f"{units} ({label or 'the CRS'} is {kind}: its units are {units})"


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def check_grid(
    width: int,
    height: int,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    crs_units: str,
    resolution: tuple[float, float] | float | None = None,
    what: str = "output grid",
    extent: tuple[float, float] | None = None,
) -> None:
    """Refuse a grid under 2x2 pixels or over `max_pixels`, naming the units of the CRS.

    `crs_units` is a phrase such as "degrees (EPSG:4326 is geographic: its units are degrees)" (see
    describe_units); its first word is used as the unit of suggested resolutions. `extent` (width and
    height of the area in those units) lets the message suggest a resolution that fits.
    """
    unit = crs_units.split(" (", 1)[0]
    res_x = (resolution if isinstance(resolution, int | float) else resolution[0]) if resolution else None
    if width < 2 or height < 2:
        said = f"resolution {_fmt(res_x)} {crs_units}" if res_x else f"the requested grid (in {crs_units})"
        hint = ""
        if extent and min(extent) > 0:
            suggestion = min(extent) / 1000
            hint = (
                f"; the area is about {_fmt(extent[0])} x {_fmt(extent[1])} {unit}, so about "
                f"{_fmt(suggestion)} {unit} gives ~1000 pixels across"
            )
        if unit == "degrees":
            hint += "; use about 0.0001 degrees for ~11 m (1 degree of latitude is ~111 km)"
        raise GdalMcpError(
            "invalid-argument", f"{what}: {said} gives a {width}x{height} grid; a raster needs at least 2x2 pixels{hint}"
        )
    total = width * height
    if max_pixels and total > max_pixels:
        said = f" (resolution {_fmt(res_x)} {crs_units})" if res_x else f" (units: {crs_units})"
        raise GdalMcpError(
            "invalid-argument",
            f"{what}: {width}x{height} = {total} pixels{said} is more than this server allows "
            f"({max_pixels} pixels, --max-pixels); use a coarser resolution, in {unit}, or a smaller "
            "bbox",
        )
