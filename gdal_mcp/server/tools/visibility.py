"""Visibility tools: viewshed and cumulative visibility (GDAL 3.12's `gdal raster viewshed`)."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import ViewshedResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import write_output
from gdal_mcp.server.tools.params import (
    Band,
    CreationOptions,
    CrsCheck,
    Overwrite,
    RasterFormat,
    RasterOutput,
)
from gdal_mcp.server.tools.registry import WRITE, tool

ByteValue = Annotated[int | None, Field(ge=0, le=255)]


@tool(title="Viewshed (visibility)", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_viewshed(
    app: App,
    input: Annotated[
        str,
        Field(
            description=(
                "DEM to read, relative to the workspace, in a PROJECTED CRS whose units are those of its heights "
                "(metres, e.g. UTM); a lon/lat DEM is refused: reproject it first with raster_reproject"
            )
        ),
    ],
    output: RasterOutput,
    observers: Annotated[
        list[Annotated[list[float], Field(min_length=2, max_length=3)]],
        Field(
            min_length=1,
            max_length=1000,
            description=(
                "Observer positions [[x, y], …] in observer_crs, optionally [x, y, height] to give one its own "
                "height. One observer: a visibility raster; several: cumulative visibility, each pixel counting the "
                "observers that see it (one GDAL viewshed per observer, summed)"
            ),
        ),
    ],
    observer_crs: Annotated[
        str | None,
        CrsCheck,
        Field(description="CRS of observers: EPSG:4326 for lon/lat, any code, name, PROJ string or WKT; default the DEM's"),
    ] = None,
    observer_height: Annotated[
        float, Field(description="Eye height above the ground, in the DEM's height units (metres); default 2 as GDAL")
    ] = 2.0,
    target_height: Annotated[
        float,
        Field(description="Height above the ground of what is looked at (0: the ground itself; 10: a 10 m mast); default 0"),
    ] = 0.0,
    max_distance: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Farthest distance looked at, in the DEM's ground units (metres on UTM); farther pixels are out of "
                "range, and the output is clamped to the box within max_distance of the observers; default unlimited"
            ),
        ),
    ] = None,
    curvature_coefficient: Annotated[
        float | None,
        Field(
            ge=0,
            description=(
                "Earth curvature and refraction: distant terrain is lowered by coefficient * d² / earth diameter; "
                "default GDAL's 0.85714 (visible light, refraction 1/7; 1.0 on non-Earth CRSs); 0: none"
            ),
        ),
    ] = None,
    visible_value: Annotated[ByteValue, Field(description="One observer: value of visible pixels (0..255); default 255")] = None,
    invisible_value: Annotated[
        ByteValue, Field(description="One observer: value of hidden pixels within range (0..255); default 0")
    ] = None,
    out_of_range_value: Annotated[
        ByteValue, Field(description="One observer: value of pixels beyond max_distance (0..255); default 0")
    ] = None,
    band: Band = 1,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ViewshedResult:
    """What can be seen from observer points on a DEM (GDAL's gdal raster viewshed): a Byte raster with one
    observer (visible 255 / hidden 0 / out of range 0 by default), or the number of observers seeing each pixel
    with several (Byte, UInt16 beyond 255 observers). Heights and max_distance are in the DEM's units; observers
    outside the DEM are refused with its bounds. The result gives each observer's pixel, ground elevation and
    visible pixels, the pixels and m² visible, with one observer also the pixels within reach (in_range_pixels)
    and the share of them it sees (visible_share), and the output's window in the DEM grid. Check it with
    raster_preview or raster_stats."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ViewshedJob(
        src=src.gdal_path,
        observers=[list(p) for p in observers],
        observer_crs=observer_crs,
        observer_height=observer_height,
        target_height=target_height,
        max_distance=max_distance,
        curvature_coefficient=curvature_coefficient,
        visible_value=visible_value,
        invisible_value=invisible_value,
        out_of_range_value=out_of_range_value,
        band=band,
        format=format,
        creation_options=creation_options,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    return result.model_copy(update={"output": target.display, "uri": app.sandbox.uri(target.display), "warnings": warnings})
