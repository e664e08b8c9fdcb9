"""Inspection tools: raster_info, vector_info, list_datasets."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import DatasetList, RasterInfo, VectorInfo
from gdal_mcp.sandbox import ARCHIVE_VSI
from gdal_mcp.sandbox.remote import is_remote
from gdal_mcp.sandbox.remote import shown as url_of
from gdal_mcp.server.app import App
from gdal_mcp.server.results import read_result
from gdal_mcp.server.tools.params import InspectPath as DatasetPath
from gdal_mcp.server.tools.params import Layer
from gdal_mcp.server.tools.registry import READ, tool


def _shown[M: (RasterInfo, VectorInfo)](app: App, result: M, display: str) -> M:
    """A metadata result with paths made workspace-relative and `path` as the user sees it."""
    shown = app.scrub_model(result)
    shown.path = display
    return shown


@tool(title="Raster info", annotations=READ, tags={"raster"})
async def raster_info(
    app: App,
    path: DatasetPath,
    band: Annotated[int | None, Field(ge=1, description="Only this band (1-based); default all bands")] = None,
    stats: Annotated[
        bool,
        Field(
            description="Compute exact statistics from the pixels (reads the whole "
            "band, streamed); never the values stored in the file"
        ),
    ] = False,
    ctx: Context | None = None,
) -> RasterInfo:
    """Describe a raster (like gdalinfo): driver, size, bands, CRS (EPSG code, name, WKT), geotransform,
    bounds (native and WGS84), resolution, per band dtype/nodata/scale/offset/unit/colour/block
    size/overviews, subdatasets, compression, tiling and whether it is a valid COG (cog_note says why a small
    file needs no tiles or overviews).

    Use it first on any raster. stats=true scans every pixel (slower on large rasters) and returns exact
    min, max, mean, std and valid percent honouring nodata and masks. A netCDF/HDF5 file of several variables
    answers kind="container" with its subdatasets (path + description) and null size/transform/bounds: pass a
    subdataset's path back here or to any raster tool. Bands of a netCDF/HDF5/Zarr variable carry their place on
    its other dimensions (bands[].dimensions, e.g. {"time": "2020-07-01T00:00:00", "level": 850.0}; times
    decoded from the CF units and calendar), so a band's date never has to be guessed from its number."""
    src = app.sandbox.resolve_input(path)
    job = jobs.RasterInfoJob(path=src.gdal_path, band=band, stats=stats)
    if stats:
        return await read_result(app, ctx, job, display=src.display)
    return _shown(app, await app.metadata(job, src, ctx=ctx), src.display)


@tool(title="Vector info", annotations=READ, tags={"vector"})
async def vector_info(
    app: App,
    path: DatasetPath,
    layer: Layer = None,
    ctx: Context | None = None,
) -> VectorInfo:
    """Describe a vector dataset (like ogrinfo -so): every layer with geometry type, exact feature count,
    CRS, extent and fields with types. With layer=, also the first 5 features as a GeoJSON
    FeatureCollection (large geometries are summarised). Use it before any vector work; multi-layer
    sources (GPKG, GPX, OSM) list their layers here."""
    src = app.sandbox.resolve_input(path)
    job = jobs.VectorInfoJob(path=src.gdal_path, layer=layer)
    return _shown(app, await app.metadata(job, src, ctx=ctx), src.display)


@tool(title="List datasets", annotations=READ, tags={"workspace"})
async def list_datasets(
    app: App,
    path: Annotated[
        str,
        Field(
            description="Directory to list, relative to the workspace; an archive ('a.zip') to list its contents; or an "
            "allowed s3://, gs:// or az:// prefix ('s3://bucket/data') to list its objects"
        ),
    ] = ".",
    pattern: Annotated[str | None, Field(description="Glob on the file name or relative path, e.g. '*.tif' or 'dem/**'")] = None,
    recursive: Annotated[bool, Field(description="Descend into subdirectories")] = True,
    limit: Annotated[int, Field(ge=1, le=1000, description="Most entries to return")] = 200,
    ctx: Context | None = None,
) -> DatasetList:
    """List the files in a workspace directory and whether GDAL reads each as raster, vector or other, with
    the CRS and pixel size of rasters and the CRS of vectors (sidecars such as .prj/.aux.xml, archives and
    unreadable files are 'other', with a reason). The datasets inside .zip/.tar/.gz archives follow the archive,
    each with the path that opens it ('/vsizip/a.zip/dem.tif'). Bounded: `truncated` and `remaining` say what
    was left out. Use it to find inputs."""
    bucket = app.sandbox.bucket_location(path, what="path")
    if bucket is not None or is_remote(path):  # a prefix of the bucket workspace, or one the operator allows
        location = bucket or app.sandbox.remote.check(path, what="path")
        if location.scheme not in ("s3", "gs", "az"):
            raise GdalMcpError(
                "unsupported",
                f"path '{location.url.split('?', 1)[0]}': only s3://, gs:// and az:// prefixes are listed (an HTTP server "
                "does not list its files: give a file's URL, or search a STAC catalog with stac_search)",
            )
        listed = await app.execute(
            jobs.ListRemoteJob(prefix=location.gdal_path, pattern=pattern, recursive=recursive, limit=limit), ctx=ctx, quick=True
        )
        for entry in listed.entries:
            entry.path = app.sandbox.display(url_of(entry.path))
        listed.path = app.sandbox.display(location.url.rstrip("/"))
        return listed
    plain = path
    for prefix in ARCHIVE_VSI + ("/vsigzip/",):
        if path.lower().startswith(prefix):
            plain = path[len(prefix) :].rstrip("/") or "."
    real = app.sandbox.resolve_file(plain, what="path")
    directory, shown = real, app.sandbox.display(real)
    if pattern is not None and (pattern.startswith(("/", "~")) or ".." in pattern.replace("\\", "/").split("/")):
        raise GdalMcpError(
            "invalid-argument",
            f"pattern '{pattern}' must match names below path, without '..' "
            "or an absolute path (list another directory with path=)",
        )
    job = jobs.ListDatasetsJob(directory=str(directory), pattern=pattern, recursive=recursive, limit=limit)
    result = await app.execute(job, ctx=ctx, quick=True)
    for entry in result.entries:
        entry.path = app.sandbox.display(entry.path)
    result.path = shown
    return result
