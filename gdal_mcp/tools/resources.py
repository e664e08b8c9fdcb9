"""Workspace files as MCP resources: gdal-mcp://files/{path} returns the file's bytes."""

from __future__ import annotations

import mimetypes
from typing import Any

import anyio
from fastmcp.exceptions import ResourceError
from fastmcp.resources import ResourceContent, ResourceResult

from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import RESOURCE_PREFIX

MIME = {
    ".tif": "image/tiff", ".tiff": "image/tiff", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".geojson": "application/geo+json", ".json": "application/json", ".csv": "text/csv",
    ".gpkg": "application/geopackage+sqlite3", ".vrt": "application/xml", ".xml": "application/xml",
    ".kml": "application/vnd.google-earth.kml+xml", ".nc": "application/x-netcdf",
}


def mime_type(name: str) -> str:
    lower = name.lower()
    for ext, mime in MIME.items():
        if lower.endswith(ext):
            return mime
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def register(mcp: Any, app: App) -> None:
    @mcp.resource(RESOURCE_PREFIX + "{path*}", name="workspace-file", mime_type="application/octet-stream",
                  description="A file in the workspace (the URI every write tool returns). Files larger than the "
                              "cap are refused: convert, clip or preview them instead.")
    async def workspace_file(path: str) -> ResourceResult:
        try:
            real = app.sandbox.resolve_file(path, what="resource")
        except GdalMcpError as e:
            raise ResourceError(f"{e.code}: {app.sandbox.scrub(e.message)}") from None
        if real.is_dir():
            raise ResourceError(f"invalid-argument: {path} is a directory; list_datasets lists it")
        size = real.stat().st_size
        if size > app.settings.max_resource_bytes:
            raise ResourceError(
                f"resource-limit: {path} is {size} bytes, over the {app.settings.max_resource_bytes}-byte cap; "
                "convert, clip or preview it instead")
        data = await anyio.Path(real).read_bytes()
        return ResourceResult([ResourceContent(data, mime_type=mime_type(real.name))])
