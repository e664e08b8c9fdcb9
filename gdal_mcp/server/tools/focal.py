"""raster_focal: moving-window (focal) statistics with GDAL 3.12's `gdal raster neighbors` (engine/raster/focal.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import RasterFocalResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import write_output
from gdal_mcp.server.tools.params import (
    Bands,
    CreationOptions,
    DataType,
    Overwrite,
    RasterFormat,
    RasterInput,
    RasterOutput,
)
from gdal_mcp.server.tools.registry import WRITE, tool


@tool(title="Focal statistics", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_focal(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    statistic: Annotated[
        Literal["mean", "min", "max", "sum", "std", "median", "mode", "range"],
        Field(description="What to compute over each window: std is the population standard deviation; range = max - min"),
    ] = "mean",
    shape: Annotated[
        Literal["square", "circle"],
        Field(description="square (default), or circle: the pixels whose centres lie within the window's radius"),
    ] = "square",
    size: Annotated[
        int | None,
        Field(
            ge=3,
            le=99,
            description="Window width in pixels, odd (3, 5, 7 …; default 3); a circle's radius is (size - 1) / 2 pixels",
        ),
    ] = None,
    radius: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Instead of size: the window's half-width in metres, converted to whole pixels with the pixel size (on "
                "lon/lat rasters, the ground size of a pixel at the raster's middle latitude); at most 49 pixels"
            ),
        ),
    ] = None,
    kernel: Annotated[
        list[list[float]] | None,
        Field(
            min_length=3,
            max_length=99,
            description=(
                "Instead of size/radius/shape: an N x N list of weights (N odd, rows top to bottom), e.g. "
                "[[0,1,0],[1,1,1],[0,1,0]]; each pixel enters as value x weight, weight 0 leaves it out, mean divides "
                "by the sum of the weights used"
            ),
        ),
    ] = None,
    bands: Bands = None,
    output_type: Annotated[
        DataType,
        Field(description="Output data type; default Float32 (GDAL computes in Float32); integer types round and clamp"),
    ] = "Float32",
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Nodata value of the output, written into its nodata pixels; default the input's (NaN for float bands "
                "without one). A result equal to it reads as nodata too (e.g. a range of 0 with nodata 0)"
            )
        ),
    ] = None,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterFocalResult:
    """Moving-window (focal, neighbourhood) statistics, computed by GDAL's `gdal raster neighbors`: each output pixel
    is the statistic of the pixels in a window centred on it, e.g. a 5 x 5 mean to smooth a DEM, a circular max within
    500 m, a 3 x 3 mode to clean a classification, a range (local relief).

    Nodata pixels (and NaN in float bands) are left out of every window, and a nodata pixel stays nodata. At the
    raster's edges GDAL repeats the outer rows and columns to fill the window (min, max and range are as if the window
    were cut at the edge; mean, sum, std, median and mode count the repeated pixels). Values pass through Float32;
    std divides by n; a tied mode is one of the tied values. Every band by default, one output band each. Streamed:
    memory does not grow with the raster; time grows with the window's area. The result's window gives its size in
    pixels."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FocalJob(
        src=src.gdal_path,
        statistic=statistic,
        shape=shape,
        size=size,
        radius=radius,
        kernel=kernel,
        bands=bands,
        output_type=output_type,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    return result.model_copy(update={"output": target.display, "uri": app.sandbox.uri(target.display), "warnings": warnings})
