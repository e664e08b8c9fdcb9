"""Answers from a layer without writing a file: vector_query (rows of an SQL SELECT or of a filtered, grouped, ordered
layer) and vector_measure (areas, lengths, centroids per feature); and the SQL check vector_convert shares."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import MeasureResult, QueryResult
from gdal_mcp.sandbox import ResolvedInput
from gdal_mcp.server.app import App
from gdal_mcp.server.results import read_result, write_output
from gdal_mcp.server.tools.params import (
    Layer,
    MeasureUnits,
    OptionalVectorOutput,
    OutputLayer,
    Overwrite,
    Sql,
    SqlDialect,
    Where,
)
from gdal_mcp.server.tools.params import VectorFormat as Format
from gdal_mcp.server.tools.params import VectorInput as Input
from gdal_mcp.server.tools.registry import READ, WRITE, tool


async def check_input_sql(app: App, ctx: Context | None, src: ResolvedInput, sql: str) -> None:
    """The sandbox's SQL check (Sandbox.check_sql), with the input's layer names when the SQL names a table that looks
    like a file ('nc.gpkg' is a fine GeoPackage layer name): a worker lists them, the server never opens the data."""
    layers: list[str] = []
    if app.sandbox.sql_file_like_tables(sql):
        layers = await app.execute(jobs.LayerNamesJob(path=src.gdal_path), ctx=ctx, quick=True)
    app.sandbox.check_sql(sql, layers=layers)


def _names(value: str | list[str] | None) -> list[str] | None:
    return [value] if isinstance(value, str) else (list(value) if value else None)


@tool(title="Query a layer", annotations=READ, tags={"vector"})
async def vector_query(
    app: App,
    input: Input,
    sql: Sql = None,
    sql_dialect: SqlDialect = "OGRSQL",
    layer: Layer = None,
    where: Where = None,
    fields: Annotated[list[str] | None, Field(description="Attributes to return, in this order (default all)")] = None,
    group_by: Annotated[
        str | list[str] | None,
        Field(
            description=(
                "Field(s) to group by: one row per distinct value (or combination; null is a group too) with the aggregate "
                "statistics, ordered by the group values unless order_by says otherwise"
            )
        ),
    ] = None,
    aggregate: Annotated[
        dict[str, list[str]] | None,
        Field(
            description=(
                'Statistics per group (or of the whole layer without group_by), e.g. {"*": ["count"], "pop": ["sum", "mean"]}: '
                'count, sum, mean, min, max, median, std, first, last, count_distinct (nulls ignored; "*" counts features); '
                'columns "<field>_<func>" ("count" for "*"); default with group_by: {"*": ["count"]}'
            )
        ),
    ] = None,
    order_by: Annotated[
        str | list[str] | None,
        Field(
            description=(
                'Sort by these columns (fields, group_by fields or aggregate columns such as "count"), each optionally '
                'followed by DESC: "pop_est DESC" or ["continent", "pop_est DESC"]; nulls last'
            )
        ),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="Most rows to return (default 100)")] = 100,
    offset: Annotated[int, Field(ge=0, description="Skip this many rows (paging)")] = 0,
    geometry: Annotated[
        Literal["none", "wkt", "geojson"],
        Field(
            description=(
                "Each row's geometry under 'geometry': wkt (text) or geojson (an object); default none. A page holds at "
                "most ~200 000 characters of geometry"
            )
        ),
    ] = "none",
    ctx: Context | None = None,
) -> QueryResult:
    """Answer a question about a layer with rows, directly, no file written: how many features per continent
    (group_by="continent"), the 10 largest by population (order_by="pop_est DESC", limit=10), sums and means
    (aggregate), the rows matching where, or any read-only SQL SELECT (sql=, OGRSQL or SQLITE dialect, sandboxed
    as vector_convert's). Pages with offset/limit; total, truncated and remaining say what is left. Geometry is off
    by default (geometry="wkt" or "geojson" adds it). For GeoJSON features to look at use vector_features; to write
    the result to a file use vector_convert (sql=) or vector_dissolve."""
    src = app.sandbox.resolve_input(input)
    if sql is not None:
        await check_input_sql(app, ctx, src, sql)
    job = jobs.QueryJob(
        src=src.gdal_path,
        sql=sql,
        sql_dialect=sql_dialect if sql is not None else None,
        layer=layer,
        where=where,
        fields=fields,
        group_by=_names(group_by),
        aggregate=aggregate,
        order_by=_names(order_by),
        limit=limit,
        offset=offset,
        geometry=geometry,
    )
    return await read_result(app, ctx, job)


@tool(title="Measure features", annotations=WRITE, tags={"vector"})
async def vector_measure(
    app: App,
    input: Input,
    output: OptionalVectorOutput = None,
    measures: Annotated[
        list[Literal["area", "length", "perimeter", "centroid", "bounds"]],
        Field(
            min_length=1,
            description=(
                "What to measure: area (polygons; fields area_<unit>), length (lines; length_<unit>), perimeter "
                "(polygons, all rings; perimeter_<unit>), centroid (centroid_x/centroid_y in the layer's CRS), "
                "bounds (min_x, min_y, max_x, max_y)"
            ),
        ),
    ] = ["area", "length", "perimeter", "centroid", "bounds"],  # noqa: B006
    units: MeasureUnits = "m",
    layer: Layer = None,
    where: Where = None,
    geodesic: Annotated[
        bool,
        Field(
            description=(
                "On a projected layer, measure area, length and perimeter on the ellipsoid (the CRS's own lon/lat), as on "
                "lon/lat layers, instead of in the projection's plane; no reprojected copy is needed. Lon/lat layers are "
                "always geodesic"
            )
        ),
    ] = False,
    id_field: Annotated[
        str | None,
        Field(
            description=(
                "Attribute added to each row to identify the feature (rows always carry 'index': 0-based, of those measured)"
            )
        ),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=10000, description="Most rows returned when no output is written")] = 200,
    offset: Annotated[int, Field(ge=0, description="Skip this many features (paging the rows)")] = 0,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> MeasureResult:
    """Area, length, perimeter, centroid and bounds of every feature (or of those matching where). On lon/lat
    layers the measures are geodesic (on the ellipsoid, in metres, never degrees²); on projected layers planar in the
    CRS's unit converted to units, or geodesic with geodesic=true. Returns a bounded table (offset/limit, totals over
    all features measured), or with output writes the layer with the measure fields added. For geometry outputs
    (centroid points, hulls) use vector_geometry."""
    src = app.sandbox.resolve_input(input)
    job = jobs.MeasureJob(
        src=src.gdal_path,
        measures=list(measures),
        units=units,
        layer=layer,
        id_field=id_field,
        limit=limit,
        offset=offset,
        format=format,
        output_layer=output_layer,
        where=where,
        geodesic=geodesic,
    )
    if output is None:
        result, _ = await app.execute(job, ctx=ctx)
        return app.scrub_model(result)
    app.require_writable("vector_measure output")
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result
