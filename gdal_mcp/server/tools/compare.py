"""Comparison tools: are two rasters the same, and where and by how much do they differ (`gdal raster compare`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterCompareResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import write_output
from gdal_mcp.server.tools.params import Overwrite, RasterFormat, RasterInput
from gdal_mcp.server.tools.registry import WRITE, tool


@tool(title="Compare rasters", annotations=WRITE, tags={"raster"})
async def raster_compare(
    app: App,
    input: RasterInput,
    reference: Annotated[
        str, Field(description="Raster to compare the input with (the expected result), relative to the workspace")
    ],
    tolerance: Annotated[
        float,
        Field(ge=0, description="Absolute difference up to which pixels count as equal (e.g. 1e-6 for float noise); default 0"),
    ] = 0.0,
    ignore: Annotated[
        list[Literal["crs", "geotransform", "overview", "metadata", "rpc", "geolocation", "subdataset"]] | None,
        Field(description='Comparisons to leave out (e.g. ["metadata"] to compare data only); default none'),
    ] = None,
    output: Annotated[
        str | None,
        Field(
            description=(
                "Also write the difference raster input - reference here (Float32, or Float64 for wide types; NaN "
                'where either is nodata), for raster_preview or raster_stats: GTiff (.tif), COG (format="COG"), netCDF (.nc); '
                "default: report only"
            )
        ),
    ] = None,
    format: RasterFormat = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterCompareResult:
    """Whether two rasters are identical and, if not, what differs (GDAL's gdal raster compare): CRS,
    geotransform, size, band count, data types, nodata, masks, overviews, metadata, each with GDAL's message;
    and per band, when both have the same size and band count, the number of differing pixels (|input -
    reference| > tolerance, or nodata in one only), the largest and mean |difference|, and the box holding
    them (pixels and CRS; nodata_mismatches counts those valid in one raster only). Use it to check a result
    against an expected one. Rasters on different grids are not compared pixel by pixel (pixels_identical null):
    to check a warp, reproject one onto the other's grid (raster_reproject like=…) and compare with
    ignore=["metadata"]. Reads only unless output is given; streamed window by window."""
    src = app.sandbox.resolve_input(input)
    ref = app.sandbox.resolve_input(reference, what="reference")
    job = jobs.CompareRasterJob(
        src=src.gdal_path, reference=ref.gdal_path, tolerance=tolerance, skip=list(ignore) if ignore else None, format=format
    )
    if output is None:
        if format is not None:
            raise GdalMcpError("invalid-argument", "format goes with output (the difference raster); omit it or give output")
        report, _ = await app.execute(job, ctx=ctx)
        report = app.scrub_model(report)
    else:
        app.require_writable("raster_compare output")
        target, report, _ = await write_output(app, ctx, job, inputs=[src, ref], output=output, overwrite=overwrite)
        report = report.model_copy(update={"output": target.display, "uri": app.sandbox.uri(target.display)})
    return report.model_copy(update={"input": src.display, "reference": ref.display})
