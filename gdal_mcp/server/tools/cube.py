"""Time series of multidimensional data: a variable of a netCDF, HDF5 or Zarr file with a time axis (and levels).

cube_info says what a variable holds, cube_aggregate reduces it over time (monthly means, seasonal sums,
climatologies, anomalies), cube_series gives its values through time at points or over zones, cube_subset cuts a
smaller cube. All read through GDAL's raster view of the variable (a band per time step and level), streamed.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import CubeAggregateResult, CubeInfo, CubeSubsetResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import prepare_output, read_result, write_output
from gdal_mcp.server.tools.params import BBox, BBoxCRS, CrsCheck, Overwrite, as_bbox
from gdal_mcp.server.tools.registry import READ, WRITE, tool

CubeInput = Annotated[
    str,
    Field(
        description="netCDF, HDF5 or Zarr file to read, relative to the workspace (era5.nc, run.zarr), or one variable "
        'of it as GDAL names it (NETCDF:"era5.nc":t2m)'
    ),
]
Variable = Annotated[
    str | None,
    Field(description="Variable to read (tas, t2m …); required when the file holds several (cube_info lists them)"),
]
Start = Annotated[
    str | None,
    Field(
        description="First time to include (ISO: 2005, 2005-03, 2005-03-15 or 2005-03-15T06:00; inclusive; in the file's "
        "calendar)"
    ),
]
End = Annotated[
    str | None,
    Field(description="Last time to include (inclusive: 2005-08 includes all of August)"),
]
Level = Annotated[
    float | str | None,
    Field(description="Level to read (e.g. 850 for 850 hPa) when the variable has a level dimension; cube_info lists them"),
]


@tool(title="Describe a data cube (netCDF/HDF5/Zarr)", annotations=READ, tags={"cube", "raster"})
async def cube_info(app: App, input: CubeInput, variable: Variable = None, ctx: Context | None = None) -> CubeInfo:
    """What a netCDF/HDF5/Zarr variable holds: its dimensions with their values (time decoded to ISO dates in the
    file's CF calendar, levels with units), time range and spacing, chunking, CRS (from the CF grid_mapping, or
    EPSG:4326 from longitude/latitude axes), nodata, scale/offset and units. Without variable it describes the only
    variable with a time or level dimension, or lists the variables. Start here before cube_aggregate/series/subset."""
    src = app.sandbox.resolve_input(input)
    job = jobs.CubeInfoJob(path=src.gdal_path, variable=variable)
    return await read_result(app, ctx, job, display=src.display, quick=True)


@tool(title="Aggregate a data cube over time", annotations=WRITE, tags={"cube", "raster"}, writes=True)
async def cube_aggregate(
    app: App,
    input: CubeInput,
    output: Annotated[
        str,
        Field(
            description="File to write, relative to the workspace (.tif: a GeoTIFF stack, one band per period, band "
            "descriptions = the periods; .nc: netCDF with a time axis)"
        ),
    ],
    variable: Variable = None,
    statistic: Annotated[
        Literal["mean", "sum", "min", "max", "std", "count", "median", "percentile"],
        Field(description="What to compute over each period's steps (nodata skipped; std is the population std)"),
    ] = "mean",
    percentile: Annotated[float | None, Field(ge=0, le=100, description="With statistic='percentile': which (0-100)")] = None,
    period: Annotated[
        str,
        Field(
            description="How to group the time steps: month (default), season (DJF, MAM, JJA, SON; December counts "
            "with the next year's DJF), year, day, hour, all (one band over the whole range), or a frequency such as "
            "10D (days), 6h (hours), 3M (months), 2Y (years)"
        ),
    ] = "month",
    climatology: Annotated[
        bool,
        Field(
            description="Group by the slot of the year across all years (12 bands January..December for month, 4 "
            "for season, one per day of the year for day) instead of by each period in turn"
        ),
    ] = False,
    start: Start = None,
    end: End = None,
    level: Level = None,
    anomaly_reference: Annotated[
        list[str] | None,
        Field(
            min_length=2,
            max_length=2,
            description="[start, end] of a reference period (e.g. ['1991', '2020']): write anomalies, each period's "
            "statistic minus the mean of that statistic over the reference's periods of the same month/season/day",
        ),
    ] = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> CubeAggregateResult:
    """Reduce a netCDF/HDF5/Zarr variable over time: monthly/seasonal/yearly (or custom frequency) mean, sum, min,
    max, std, count, median or percentile; a climatology (by month or season of the year); anomalies against a
    reference period. Writes one band per period (band description = the period, e.g. 2005-01, 2004-12/2005-02) as a
    GeoTIFF stack or netCDF. Scale/offset are applied (physical units), nodata skipped; a warning names periods the
    data cover only in part; a lon/lat grid stored 0..360 comes out as -180..180. Streamed: memory stays flat however
    many time steps."""
    src = app.sandbox.resolve_input(input)
    job = jobs.CubeAggregateJob(
        src=src.gdal_path,
        dst="",
        variable=variable,
        statistic=statistic,
        percentile=percentile,
        period=period,
        climatology=climatology,
        start=start,
        end=end,
        level=level,
        reference=(anomaly_reference[0], anomaly_reference[1]) if anomaly_reference else None,
    )
    target, summary, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    return CubeAggregateResult(output=target.display, uri=app.sandbox.uri(target.display), summary=summary, warnings=warnings)


@tool(title="Time series from a data cube", annotations=WRITE, tags={"cube", "raster"})
async def cube_series(
    app: App,
    input: CubeInput,
    variable: Variable = None,
    points: Annotated[
        list[Annotated[list[float], Field(min_length=2, max_length=2)]] | None,
        Field(min_length=1, max_length=100, description="Points as [[x, y], …] (lon/lat order on lon/lat grids); or give zones"),
    ] = None,
    points_crs: Annotated[
        str | None, CrsCheck, Field(description="CRS of points; default the cube's (use EPSG:4326 for lon/lat)")
    ] = None,
    zones: Annotated[
        str | None,
        Field(description="Instead of points: a polygon layer (basins.gpkg …); each zone's area-weighted mean per step"),
    ] = None,
    zones_layer: Annotated[str | None, Field(description="Layer of zones; required when it has several")] = None,
    zone_field: Annotated[str | None, Field(description="Field naming each zone (default zone_1, zone_2 …)")] = None,
    start: Start = None,
    end: End = None,
    level: Level = None,
    plot: Annotated[bool, Field(description="Also return a line chart of the series (PNG)")] = False,
    max_rows: Annotated[int, Field(ge=1, le=10000, description="Rows returned at most (all go to output)")] = 1000,
    output: Annotated[
        str | None,
        Field(description="Also write every row to this .csv (time, a column per point/zone), relative to the workspace"),
    ] = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ToolResult:
    """A variable's values through time at points (the pixel under each point; longitudes may be given -180..180
    on a 0..360 grid) or averaged over polygons (each pixel whose centre is inside, weighted by its ground area:
    geodesic on lon/lat grids). Rows of (time, one value per point/zone); nodata is null. Optionally a PNG plot and a
    CSV of all rows."""
    src = app.sandbox.resolve_input(input)
    if (points is None) == (zones is None):
        raise GdalMcpError("invalid-argument", "give points ([[x, y], …]) or zones (a polygon layer), one of them")
    inputs = [src]
    zones_path = None
    if zones is not None:
        z = app.sandbox.resolve_input(zones, what="zones")
        inputs.append(z)
        zones_path = z.gdal_path
    job = jobs.CubeSeriesJob(
        src=src.gdal_path,
        variable=variable,
        points=[(p[0], p[1]) for p in points] if points else None,
        points_crs=points_crs,
        zones=zones_path,
        zones_layer=zones_layer,
        zone_field=zone_field,
        start=start,
        end=end,
        level=level,
        max_rows=max_rows,
        plot=plot,
    )
    target = None
    if output is not None:
        if not output.lower().endswith(".csv"):
            raise GdalMcpError("invalid-argument", f"output '{output}': cube_series writes CSV; name it .csv (e.g. series.csv)")
        app.require_writable("cube_series output")
        target, job = prepare_output(app, job, output=output, overwrite=overwrite, inputs=inputs)
    result = await app.execute(job, ctx=ctx, output=target)
    plot_png = result.plot_png  # excluded from the model's dump, so not carried by scrub_model
    result = app.scrub_model(result)
    result.path = src.display
    if target is not None:
        result.output = target.display
        result.uri = app.sandbox.uri(target.display)
    content: list[mt.ContentBlock] = []
    if plot_png:
        png = base64.b64encode(plot_png).decode("ascii")
        content.append(mt.ImageContent(type="image", data=png, mime_type="image/png"))
    info = result.model_dump(mode="json")
    content.append(mt.TextContent(type="text", text=_text(info)))
    return ToolResult(content=content, structured_content=info)


def _text(info: dict[str, object]) -> str:
    import json

    return json.dumps(info, separators=(",", ":"))


@tool(title="Subset a data cube", annotations=WRITE, tags={"cube", "raster"}, writes=True)
async def cube_subset(
    app: App,
    input: CubeInput,
    output: Annotated[
        str,
        Field(
            description="Where to write, relative to the workspace (.nc: a smaller netCDF cube with its time axis; "
            ".tif: a GeoTIFF stack, a band per step named by its time); with per_step a new directory of one GeoTIFF "
            "per step (<variable>_<time>.tif)"
        ),
    ],
    variable: Variable = None,
    start: Start = None,
    end: End = None,
    level: Level = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    per_step: Annotated[bool, Field(description="Write one GeoTIFF per time step into the output directory")] = False,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> CubeSubsetResult:
    """Cut a smaller cube out of a netCDF/HDF5/Zarr variable: a time range, one level, a bbox. Pixels are copied
    unchanged (data type, nodata, scale/offset kept). Writes netCDF (time axis kept), a GeoTIFF stack, or a GeoTIFF
    per step (per_step, into a new directory). A lon/lat grid stored 0..360 is cut and written as -180..180, so a bbox
    across the prime meridian is one box."""
    src = app.sandbox.resolve_input(input)
    job = jobs.CubeSubsetJob(
        src=src.gdal_path,
        dst="",
        variable=variable,
        start=start,
        end=end,
        level=level,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        per_step=per_step,
    )
    if not per_step:
        target, summary, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
        return CubeSubsetResult(output=target.display, uri=app.sandbox.uri(target.display), summary=summary, warnings=warnings)
    if output.lower().endswith((".nc", ".tif", ".tiff", ".nc4")):
        raise GdalMcpError(
            "invalid-argument", "per_step writes a directory of GeoTIFFs: give output a directory name (e.g. 'steps')"
        )
    if overwrite:
        raise GdalMcpError("invalid-argument", "per_step writes a new directory and never replaces one; choose a new output name")
    app.require_writable("cube_subset output")
    target = app.sandbox.resolve_output(output, overwrite=False, inputs=[src], directory=True)
    try:
        job = job.writing_to(str(target.tmp_path))
    except BaseException:
        target.discard()
        raise
    summary, warnings = await app.execute(job, ctx=ctx, output=target)
    summary = app.scrub_model(summary)
    return CubeSubsetResult(
        output=target.display,
        uri=app.sandbox.uri(target.display),
        summary=summary,
        warnings=[app.sandbox.scrub(w) for w in warnings],
    )
