"""Interpolation tool: scattered points to a raster grid (GDAL's `gdal vector grid`, formerly gdal_grid)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import RasterWriteResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import write_result
from gdal_mcp.server.tools.params import (
    CreationOptions,
    DataType,
    GridBBox,
    GridBBoxCRS,
    Layer,
    Overwrite,
    RasterFormat,
    RasterOutput,
    Size,
    VectorInput,
    Where,
    as_bbox,
    resolution_description,
)
from gdal_mcp.server.tools.registry import WRITE, tool

Method = Literal["invdist", "invdistnn", "nearest", "average", "linear", "minimum", "maximum", "range", "count"]


@tool(title="Interpolate points to raster", annotations=WRITE, tags={"vector", "raster", "analysis"}, writes=True)
async def vector_interpolate(
    app: App,
    input: VectorInput,
    output: RasterOutput,
    method: Annotated[
        Method,
        Field(
            description=(
                "invdist: inverse distance to a power (all points, or those within radius); invdistnn: the same over "
                "the max_points nearest within radius (fast on many points); nearest: the nearest point's value "
                "(Voronoi cells); average: mean within radius; linear: the plane of the Delaunay triangle around the "
                "pixel (outside the points' hull the nearest point within radius); minimum, maximum, range, count: of "
                "the points within radius"
            )
        ),
    ] = "invdist",
    z_field: Annotated[
        str | None,
        Field(description="Numeric field holding the value to interpolate; default the geometries' Z (3D points)"),
    ] = None,
    resolution: Annotated[
        float | list[float] | None, Field(description=resolution_description("the layer's CRS") + "; not with size")
    ] = None,
    size: Size = None,
    bbox: GridBBox = None,
    bbox_crs: GridBBoxCRS = None,
    radius: Annotated[
        float | None,
        Field(
            ge=0,
            description=(
                "Search radius in the layer's CRS units (DEGREES on lon/lat layers); required by invdistnn, average, "
                "minimum, maximum, range and count; optional for invdist and nearest (default: every point); for "
                "linear, how far outside the hull the nearest point is used (default any distance, 0: nodata there)"
            ),
        ),
    ] = None,
    power: Annotated[float | None, Field(gt=0, description="invdist/invdistnn weighting power (default 2)")] = None,
    smoothing: Annotated[float | None, Field(ge=0, description="invdist/invdistnn smoothing (default 0)")] = None,
    min_points: Annotated[
        int | None,
        Field(ge=1, description="Fewest points within radius for a value, else nodata (with radius; default 1)"),
    ] = None,
    max_points: Annotated[
        int | None,
        Field(ge=1, description="Most points used, the nearest first (invdist/average with radius; invdistnn default 12)"),
    ] = None,
    layer: Layer = None,
    where: Where = None,
    output_type: Annotated[DataType, Field(description="Output data type (default Float32)")] = "Float32",
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Value of pixels left without a result (outside radius, under min_points), declared nodata on the "
                "output; default NaN, required for integer output types"
            )
        ),
    ] = None,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Interpolate scattered points into a new raster (like gdal_grid): each pixel centre gets a value from the
    points' z (z_field, or the geometries' Z). Give resolution or size; the extent is bbox, default the points'
    extent (with resolution widened by half a pixel, so the outermost points sit on pixel centres); points outside
    the extent still count. Distances, radius and resolution are in the layer's CRS units: DEGREES on lon/lat
    layers, so reproject the points first (vector_reproject) to work in metres. Lines and polygons contribute
    their vertices. Every point is held in memory (at most 10 million)."""
    src = app.sandbox.resolve_input(input)
    job = jobs.InterpolateJob(
        src=src.gdal_path,
        method=method,
        layer=layer,
        where=where,
        z_field=z_field,
        power=power,
        smoothing=smoothing,
        radius=radius,
        min_points=min_points,
        max_points=max_points,
        resolution=resolution,
        size=size,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        output_type=output_type,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
        max_pixels=app.settings.max_pixels,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)
