"""GDAL option dictionaries (creation, layer creation and open options), shared by raster and vector engines."""

from __future__ import annotations

from typing import Any

from gdal_mcp.errors import GdalMcpError


def creation_options(options: dict[str, Any] | None) -> dict[str, str]:
    """GDAL creation options as upper-case NAME=value strings (booleans as YES/NO)."""
    out: dict[str, str] = {}
    for k, v in (options or {}).items():
        if not isinstance(k, str) or not k.replace("_", "").isalnum():
            raise GdalMcpError("invalid-argument", f"creation option name {k!r} is not valid")
        out[k.upper()] = ("YES" if v else "NO") if isinstance(v, bool) else str(v)
    return out
