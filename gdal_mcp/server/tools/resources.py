"""Workspace files as MCP resources.

- gdal-mcp://files/{path}          the file's bytes (the URI every write tool returns), size-capped
- gdal-mcp://info/raster/{path}    raster_info as JSON, for a host to attach a dataset's description
- gdal-mcp://info/vector/{path}    vector_info as JSON
- gdal-mcp://catalog               what the workspace holds (bounded, like list_datasets)
"""

from __future__ import annotations

import mimetypes
from typing import Any

import anyio
from fastmcp.exceptions import ResourceError
from fastmcp.resources import ResourceContent, ResourceResult

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import RESOURCE_PREFIX
from gdal_mcp.server.app import App

INFO_PREFIX = "gdal-mcp://info/"
CATALOG_URI = "gdal-mcp://catalog"
CATALOG_LIMIT = 500

MIME = {
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".geojson": "application/geo+json",
    ".json": "application/json",
    ".csv": "text/csv",
    ".gpkg": "application/geopackage+sqlite3",
    ".vrt": "application/xml",
    ".xml": "application/xml",
    ".kml": "application/vnd.google-earth.kml+xml",
    ".nc": "application/x-netcdf",
}


def mime_type(name: str) -> str:
    lower = name.lower()
    for ext, mime in MIME.items():
        if lower.endswith(ext):
            return mime
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _error(app: App, e: GdalMcpError) -> ResourceError:
    return ResourceError(f"{e.code}: {app.sandbox.scrub(e.message)}")


def register(mcp: Any, app: App) -> None:
    async def describe(kind: str, path: str) -> str:
        try:
            src = app.sandbox.resolve_input(path, what="resource")
            job: jobs.RasterInfoJob | jobs.VectorInfoJob = (
                jobs.RasterInfoJob(path=src.gdal_path) if kind == "raster" else jobs.VectorInfoJob(path=src.gdal_path)
            )
            result = app.scrub_model(await app.metadata(job, src))
        except GdalMcpError as e:
            raise _error(app, e) from None
        result.path = src.display
        return result.model_dump_json()

    @mcp.resource(
        INFO_PREFIX + "raster/{path*}",
        name="raster-info",
        mime_type="application/json",
        description="raster_info of a workspace raster as JSON (driver, size, CRS, bounds, bands, COG validity)",
    )
    async def raster_info_resource(path: str) -> str:
        return await describe("raster", path)

    @mcp.resource(
        INFO_PREFIX + "vector/{path*}",
        name="vector-info",
        mime_type="application/json",
        description="vector_info of a workspace vector dataset as JSON (layers, counts, CRS, fields)",
    )
    async def vector_info_resource(path: str) -> str:
        return await describe("vector", path)

    @mcp.resource(
        CATALOG_URI,
        name="workspace-catalog",
        mime_type="application/json",
        description=f"The datasets in the workspace and their kinds (at most {CATALOG_LIMIT}, with "
        "truncated/remaining); list_datasets filters and pages",
    )
    async def catalog() -> str:
        root = app.sandbox.roots[0]
        try:
            result = await app.execute(jobs.ListDatasetsJob(directory=str(root), limit=CATALOG_LIMIT), quick=True)
        except GdalMcpError as e:
            raise _error(app, e) from None
        for entry in result.entries:
            entry.path = app.sandbox.display(entry.path)
        result.path = "."
        return result.model_dump_json()

    @mcp.resource(
        RESOURCE_PREFIX + "{path*}",
        name="workspace-file",
        mime_type="application/octet-stream",
        description="A file in the workspace (the URI every write tool returns). Files larger than the "
        "cap are refused: convert, clip or preview them instead.",
    )
    async def workspace_file(path: str) -> ResourceResult:
        try:
            real = app.sandbox.resolve_file(path, what="resource")
        except GdalMcpError as e:
            raise _error(app, e) from None
        if real.is_dir():
            raise ResourceError(f"invalid-argument: {path} is a directory; list_datasets lists it")
        size = real.stat().st_size
        if size > app.settings.max_resource_bytes:
            raise ResourceError(
                f"resource-limit: {path} is {size} bytes, over the {app.settings.max_resource_bytes}-byte cap; "
                "convert, clip or preview it instead"
            )
        data = await anyio.Path(real).read_bytes()
        return ResourceResult([ResourceContent(data, mime_type=mime_type(real.name))])
