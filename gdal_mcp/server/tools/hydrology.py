"""Hydrology tools: depression conditioning, D8 flow direction, flow accumulation, watersheds, stream networks
(engine/hydrology/: D8 steepest descent computed there, pyflwdir for accumulation, basins and Strahler order)."""

from __future__ import annotations

from typing import Annotated, Literal

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import HydroRasterResult, StreamNetworkResult, WatershedResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import with_links, write_output, write_result
from gdal_mcp.server.tools.params import (
    RASTER_EXAMPLES,
    REMOTE_NOTE,
    Band,
    CreationOptions,
    CrsCheck,
    OutputLayer,
    Overwrite,
    RasterFormat,
    RasterOutput,
    VectorFormat,
    VectorOutput,
)
from gdal_mcp.server.tools.registry import WRITE, tool

D8_RULES = (
    "D8 steepest descent: each cell flows to the neighbour with the largest drop divided by the ground distance to it, "
    "among its strictly lower neighbours (distances from the geotransform; on lon/lat from the ellipsoid per row, so "
    "east-west steps shrink with cos(latitude)); exact ties go to the first of E, SE, S, SW, W, NW, N, NE. A cell with no "
    "lower neighbour on the grid edge or next to nodata is an outlet (water leaves there); nothing flows into nodata. "
    "Flats drain to the nearest cell of the same flat that drains (breadth-first, 8-connected steps). A closed "
    "depression's bottom that cannot drain stays a pit (code 0): condition the DEM (the default condition='fill')."
)
CODES = "Codes (ESRI/pyflwdir D8): 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE, 0 outlet or pit, 247 nodata."
LIMIT = "The whole DEM is held in memory: grids over 25 million cells are refused (resource-limit); clip or coarsen first."

DemInput = Annotated[
    str, Field(description=f"DEM (elevation raster) to read, relative to the workspace ({RASTER_EXAMPLES}), {REMOTE_NOTE}")
]
FlowInput = Annotated[
    str,
    Field(
        description=(
            f"DEM to read, relative to the workspace ({RASTER_EXAMPLES}), {REMOTE_NOTE}; or a flow_direction output with "
            "input_type='flow_direction'"
        )
    ),
]
Condition = Annotated[
    Literal["fill", "breach", "none"],
    Field(
        description=(
            "Remove depressions before routing: fill (default: raise each to its pour point), breach (carve a channel from "
            "its bottom through its rim), none (the DEM is already conditioned, or pits are wanted)"
        )
    ),
]
FlowInputType = Annotated[
    Literal["dem", "flow_direction"],
    Field(description="What input is: a DEM (default), or a D8 raster written by flow_direction (used as it is)"),
]


@tool(title="Condition DEM", annotations=WRITE, tags={"raster", "hydrology"}, writes=True)
async def dem_condition(
    app: App,
    input: DemInput,
    output: RasterOutput,
    method: Annotated[
        Literal["fill", "breach"],
        Field(
            description=(
                "fill: raise every closed depression to the elevation of its lowest pour point (priority-flood, pyflwdir); "
                "breach: lower the cells on the way out instead, from the depression's bottom along the fill's route over "
                "its pour point, to the bottom's elevation, until the terrain beyond is lower"
            )
        ),
    ] = "fill",
    band: Band = 1,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> HydroRasterResult:
    """Remove the depressions of a DEM so that every cell drains to an outlet on the grid edge or next to nodata (fill
    or breach); writes the conditioned DEM in the input's data type and nodata (GeoTIFF by default). The summary says
    how many cells changed (raised, lowered) and the largest change. Fill is exact for Int16/Int32/Float32 DEMs
    (pyflwdir orders its queue in float32)."""
    src = app.sandbox.resolve_input(input)
    job = jobs.DemConditionJob(src=src.gdal_path, method=method, band=band, format=format, creation_options=creation_options)
    return await write_result(app, ctx, job, model=HydroRasterResult, inputs=[src], output=output, overwrite=overwrite)


dem_condition.__doc__ = f"{dem_condition.__doc__} {LIMIT}"


@tool(title="Flow direction", annotations=WRITE, tags={"raster", "hydrology"}, writes=True)
async def flow_direction(
    app: App,
    input: DemInput,
    output: RasterOutput,
    condition: Condition = "fill",
    band: Band = 1,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> HydroRasterResult:
    """D8 flow directions of a DEM as a UInt8 raster. D-infinity is not offered (pyflwdir has none)."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FlowDirectionJob(
        src=src.gdal_path, condition=condition, band=band, format=format, creation_options=creation_options
    )
    return await write_result(app, ctx, job, model=HydroRasterResult, inputs=[src], output=output, overwrite=overwrite)


flow_direction.__doc__ = f"{flow_direction.__doc__} {D8_RULES} {CODES} {LIMIT}"


@tool(title="Flow accumulation", annotations=WRITE, tags={"raster", "hydrology"}, writes=True)
async def flow_accumulation(
    app: App,
    input: FlowInput,
    output: RasterOutput,
    measure: Annotated[
        Literal["cells", "m2", "km2"],
        Field(
            description=(
                "cells: the number of cells draining through each cell, itself included (UInt32, nodata 0); m2 or km2: "
                "their ground area (Float64, nodata -9999; geodesic per row on lon/lat)"
            )
        ),
    ] = "cells",
    input_type: FlowInputType = "dem",
    condition: Condition = "fill",
    band: Band = 1,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> HydroRasterResult:
    """Flow accumulation: for every cell, how many cells (or how much area) drain through it, the cell itself
    included, from a DEM (conditioned first, condition='fill' by default, then D8) or a D8 raster."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FlowAccumulationJob(
        src=src.gdal_path,
        band=band,
        input_type=input_type,
        condition=condition,
        units=measure,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=HydroRasterResult, inputs=[src], output=output, overwrite=overwrite)


flow_accumulation.__doc__ = f"{flow_accumulation.__doc__} {D8_RULES} {LIMIT}"


@tool(title="Watershed", annotations=WRITE, tags={"raster", "vector", "hydrology"}, writes=True)
async def watershed(
    app: App,
    input: FlowInput,
    output: Annotated[
        str,
        Field(
            description=(
                "File to write, relative to the workspace: with output_kind='polygons' a vector file (.gpkg, .shp, "
                ".geojson, .fgb …), with 'raster' a raster (.tif)"
            )
        ),
    ],
    points: Annotated[
        list[Annotated[list[float], Field(min_length=2, max_length=2)]],
        Field(min_length=1, max_length=100, description="Pour points as [[x, y], …] (lon/lat order for geographic CRSs)"),
    ],
    points_crs: Annotated[
        str | None, CrsCheck, Field(description="CRS of points; default the DEM's (use EPSG:4326 for lon/lat)")
    ] = None,
    snap_distance: Annotated[
        float,
        Field(
            ge=0,
            description=(
                "Metres (ground distance, also on lon/lat): move each pour point to the cell with the highest flow "
                "accumulation whose centre is within this distance (ties: the nearer). 0 (default): the cell containing "
                "the point, which may miss the stream by a cell; 2-5 cells' width is usual"
            ),
        ),
    ] = 0.0,
    output_kind: Annotated[
        Literal["polygons", "raster"],
        Field(
            description=(
                "polygons (default): one feature per pour point, its whole catchment, with fields id, x, y, snapped_x, "
                "snapped_y, moved_m, cells, area_m2, area_km2; raster: UInt32 basin ids (0 outside), where nested "
                "catchments are split: each cell has the id of the first pour point downstream of it"
            )
        ),
    ] = "polygons",
    input_type: FlowInputType = "dem",
    condition: Condition = "fill",
    band: Band = 1,
    format: Annotated[
        str | None, Field(description="Driver short name (GPKG, ESRI Shapefile, GTiff …); default from the output extension")
    ] = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> WatershedResult:
    """The catchment (watershed) of each pour point: every cell whose flow path passes through it. The result lists
    each basin's area (m² and km², geodesic on lon/lat; null without a CRS), cell count and the snapped location (in
    the DEM's CRS) with how far it moved."""
    src = app.sandbox.resolve_input(input)
    job = jobs.WatershedJob(
        src=src.gdal_path,
        points=[(p[0], p[1]) for p in points],
        points_crs=points_crs,
        snap_distance=snap_distance,
        band=band,
        input_type=input_type,
        condition=condition,
        output_kind=output_kind,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    return WatershedResult(
        output=target.display,
        uri=app.sandbox.uri(target.display),
        summary=result.written,
        basins=result.basins,
        compile_seconds=result.compile_seconds,
        warnings=warnings,
    )


watershed.__doc__ = f"{watershed.__doc__} {D8_RULES} {LIMIT}"


@tool(title="Stream network", annotations=WRITE, tags={"raster", "vector", "hydrology"}, writes=True)
async def stream_network(
    app: App,
    input: FlowInput,
    output: VectorOutput,
    threshold_km2: Annotated[
        float | None,
        Field(
            gt=0, description="A cell is a stream when at least this upstream area (km², geodesic on lon/lat) drains through it"
        ),
    ] = None,
    threshold_cells: Annotated[
        int | None, Field(ge=1, description="Or: when at least this many cells drain through it (itself included)")
    ] = None,
    input_type: FlowInputType = "dem",
    condition: Condition = "fill",
    band: Band = 1,
    max_size: Annotated[int, Field(ge=16, le=4096, description="Longest side of the preview image in pixels")] = 768,
    format: VectorFormat = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ToolResult:
    """Stream network: the cells draining at least the threshold (give threshold_km2 or threshold_cells), written as
    lines through the cell centres, one per segment between confluences, with fields strahler (Strahler order,
    pyflwdir's), length_m (geodesic on lon/lat), upstream_cells and upstream_km2 (at the segment's last cell). Returns a
    PNG preview of the streams (blue, darker for higher orders) over a hillshade of the DEM (a plain grey
    background for a flow-direction input), and the summary."""
    src = app.sandbox.resolve_input(input)
    job = jobs.StreamNetworkJob(
        src=src.gdal_path,
        threshold_km2=threshold_km2,
        threshold_cells=threshold_cells,
        band=band,
        input_type=input_type,
        condition=condition,
        max_size=max_size,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    answer = StreamNetworkResult(
        output=target.display,
        uri=app.sandbox.uri(target.display),
        summary=result.written,
        segments=result.segments,
        stream_cells=result.stream_cells,
        threshold_cells=result.threshold_cells,
        threshold_km2=result.threshold_km2,
        max_order=result.max_order,
        total_length_m=result.total_length_m,
        preview_width=result.preview_width,
        preview_height=result.preview_height,
        compile_seconds=result.compile_seconds,
        warnings=warnings,
    )
    linked = with_links(app, answer)
    image = mt.ImageContent(type="image", data=result.png_base64, mime_type="image/png")
    return ToolResult(content=[image, *linked.content], structured_content=linked.structured_content)


stream_network.__doc__ = f"{stream_network.__doc__} {D8_RULES} {LIMIT}"
