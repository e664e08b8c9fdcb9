"""What raster and vector previews share: the result model, argument checks, number formatting, writing."""

from __future__ import annotations

import os
from pathlib import Path

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import PreviewMode, PreviewResult  # noqa: F401 - the result lives with the others (GDAL-free)

MAX_SIZE_LIMIT = 4096
DEFAULT_MAX_SIZE = 768


def check_max_size(max_size: int) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or not 1 <= max_size <= MAX_SIZE_LIMIT:
        raise GdalMcpError(
            "invalid-argument",
            f"max_size must be an integer from 1 to {MAX_SIZE_LIMIT} (the longest side of the image in pixels), got {max_size!r}",
        )
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
