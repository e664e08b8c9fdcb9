"""Workspace files as MCP resources.

- gdal-mcp://files/{path}          the file's bytes (the URI every write tool returns), size-capped
- gdal-mcp://info/raster/{path}    raster_info as JSON, for a host to attach a dataset's description
- gdal-mcp://info/vector/{path}    vector_info as JSON
- gdal-mcp://catalog               what the workspace holds (bounded, like list_datasets)
"""

from __future__ import annotations

import anyio
from fastmcp.exceptions import ResourceError
from fastmcp.resources import ResourceContent, ResourceResult

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.formats import mime_type
from gdal_mcp.models import RasterInfo, VectorInfo
from gdal_mcp.sandbox import RESOURCE_PREFIX
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.registry import resource

INFO_PREFIX = "gdal-mcp://info/"
CATALOG_URI = "gdal-mcp://catalog"
CATALOG_LIMIT = 500


def _error(app: App, e: GdalMcpError) -> ResourceError:
    return ResourceError(f"{e.code}: {app.sandbox.scrub(e.message)}")


async def _describe(app: App, kind: str, path: str) -> str:
    """raster_info or vector_info of a workspace dataset as JSON, failures as a ResourceError."""
    try:
        src = app.sandbox.resolve_input(path, what="resource")
        info: RasterInfo | VectorInfo
        if kind == "raster":
            info = await app.metadata(jobs.RasterInfoJob(path=src.gdal_path), src)
        else:
            info = await app.metadata(jobs.VectorInfoJob(path=src.gdal_path), src)
        result = app.scrub_model(info)
    except GdalMcpError as e:
        raise _error(app, e) from None
    result.path = src.display
    return str(result.model_dump_json())


@resource(
    INFO_PREFIX + "raster/{path*}",
    name="raster-info",
    mime_type="application/json",
    description="raster_info of a workspace raster as JSON (driver, size, CRS, bounds, bands, COG validity)",
)
async def raster_info_resource(app: App, path: str) -> str:
    return await _describe(app, "raster", path)


@resource(
    INFO_PREFIX + "vector/{path*}",
    name="vector-info",
    mime_type="application/json",
    description="vector_info of a workspace vector dataset as JSON (layers, counts, CRS, fields)",
)
async def vector_info_resource(app: App, path: str) -> str:
    return await _describe(app, "vector", path)


@resource(
    CATALOG_URI,
    name="workspace-catalog",
    mime_type="application/json",
    description=f"The datasets in the workspace and their kinds (at most {CATALOG_LIMIT}, with "
    "truncated/remaining); list_datasets filters and pages",
)
async def catalog(app: App) -> str:
    bucket = app.sandbox.bucket  # a bucket workspace's objects, else the first workspace's files
    job: jobs.ListRemoteJob | jobs.ListDatasetsJob = (
        jobs.ListRemoteJob(prefix=bucket.gdal_path, limit=CATALOG_LIMIT)
        if bucket is not None
        else jobs.ListDatasetsJob(directory=str(app.sandbox.roots[0]), limit=CATALOG_LIMIT)
    )
    try:
        result = await app.execute(job, quick=True)
    except GdalMcpError as e:
        raise _error(app, e) from None
    for entry in result.entries:
        entry.path = app.sandbox.display(entry.path)
    result.path = "."
    return result.model_dump_json()


@resource(
    RESOURCE_PREFIX + "{path*}",
    name="workspace-file",
    mime_type="application/octet-stream",
    description="A file in the workspace (the URI every write tool returns). Files larger than the "
    "cap are refused: convert, clip or preview them instead.",
)
async def workspace_file(app: App, path: str) -> ResourceResult:
    path = app.sandbox.resource_path(path)
    try:
        location = app.sandbox.bucket_location(path, what="resource") if app.sandbox.bucket is not None else None
    except GdalMcpError as e:
        raise _error(app, e) from None
    if location is not None:  # an object of the bucket workspace: read by a worker, through the allow-list
        cap = app.settings.max_resource_bytes
        try:
            size, data = await app.execute(jobs.ReadObjectJob(path=location.gdal_path, length=cap + 1), quick=True)
        except GdalMcpError as e:
            raise _error(app, e) from None
        if size > cap:
            raise ResourceError(
                f"resource-limit: {path} is {size} bytes, over the {cap}-byte cap; convert, clip or preview it instead"
            )
        return ResourceResult([_content(data, mime_type(path.rsplit("/", 1)[-1]))])
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
    return ResourceResult([_content(data, mime_type(real.name))])


#: media types read back as text (a provenance record, GeoJSON, CSV …), when their bytes are UTF-8
TEXT_TYPES = ("application/json", "application/geo+json", "application/xml", "application/gml+xml")


def _content(data: bytes, mime: str) -> ResourceContent:
    """A file's bytes as MCP content: text for a textual type that decodes as UTF-8 (a model reads it as is), else a
    blob (base64)."""
    if mime.startswith("text/") or mime in TEXT_TYPES:
        try:
            return ResourceContent(data.decode("utf-8"), mime_type=mime)
        except UnicodeDecodeError:
            pass
    return ResourceContent(data, mime_type=mime)
