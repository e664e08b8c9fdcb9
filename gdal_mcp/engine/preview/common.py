"""What raster and vector previews share: the result model, argument checks, number formatting, writing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gdal_mcp.errors import GdalMcpError

MAX_SIZE_LIMIT = 4096
DEFAULT_MAX_SIZE = 768

PreviewMode = Literal["rgb", "gray", "colormap", "palette", "vector"]


class PreviewResult(BaseModel):
    """A PNG quicklook and what a model needs to read it (the legend says it in one paragraph)."""

    png: bytes = Field(exclude=True, repr=False, description="The PNG image: 8-bit RGBA")
    width: int = Field(description="Image width in pixels")
    height: int = Field(description="Image height in pixels")
    mode: PreviewMode = Field(description="rgb: three bands as red/green/blue; gray or colormap: one band through a "
                                          "colormap; palette: one band through its own colour table; vector: a layer")
    bands_used: list[int] = Field(default_factory=list, description="1-based bands drawn (empty for vectors)")
    value_range: list[tuple[float, float] | None] = Field(
        default_factory=list, description="Per band drawn: the data values mapped to the low and high end of the "
                                          "stretch (null when a band has no valid pixel); for vectors colour-by-number")
    colormap: str | None = Field(None, description="Colormap of a single band or numeric color_by")
    categories: dict[str, str] | None = Field(None, description="color_by category -> #rrggbb")
    crs: str | None = Field(None, description="EPSG:n or the CRS name; null when the data has none")
    extent: tuple[float, float, float, float] = Field(description="[minx, miny, maxx, maxy] the image covers, in the "
                                                                  "data's CRS (pixel coordinates if not georeferenced)")
    window: tuple[int, int, int, int] | None = Field(None, description="Raster: [col, row, width, height] read")
    source_pixels_per_pixel: float | None = Field(None, description="Raster: source pixels per image pixel "
                                                                    "(< 1 when a small raster is enlarged)")
    features: int | None = Field(None, description="Vector: features drawn")
    legend: str = Field(description="How to read the image: bands, stretch, colours, CRS, extent, nodata")
    dst: str | None = Field(None, description="Where the PNG was also written")
    warnings: list[str] = Field(default_factory=list)


def check_max_size(max_size: int) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or not 1 <= max_size <= MAX_SIZE_LIMIT:
        raise GdalMcpError("invalid-argument", f"max_size must be an integer from 1 to {MAX_SIZE_LIMIT} "
                           f"(the longest side of the image in pixels), got {max_size!r}")
    return max_size


def fmt(value: float) -> str:
    """A number for the legend: integers without decimals, others to 6 significant digits."""
    v = float(value)
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


def ordinal(value: float) -> str:
    """2 -> '2nd', 98 -> '98th', 97.5 -> '97.5th' (percentiles in the legend)."""
    text = fmt(value)
    if not float(value).is_integer():
        return text + "th"
    n = int(value)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return text + suffix


def fmt_extent(extent) -> str:
    return "[" + ", ".join(fmt(v) for v in extent) + "]"


def write_png(dst: str | os.PathLike[str], png: bytes) -> str:
    """Write the PNG bytes to `dst` (the tool layer makes outputs atomic and checks where they go)."""
    Path(dst).write_bytes(png)
    return str(dst)
