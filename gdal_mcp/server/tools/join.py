"""vector_join: attributes or statistics of a second layer added to the features of the first (by location,
by nearest neighbours, or by key)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import JoinResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import optional_input, write_output
from gdal_mcp.server.tools.params import DistanceUnits, Layer, OutputLayer, Overwrite
from gdal_mcp.server.tools.params import VectorFormat as Format
from gdal_mcp.server.tools.params import VectorInput as Input
from gdal_mcp.server.tools.params import VectorOutput as Output
from gdal_mcp.server.tools.registry import WRITE, tool


@tool(title="Join layers", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_join(
    app: App,
    input: Input,
    join: Annotated[
        str,
        Field(
            description=(
                "The layer or table whose attributes are joined (workspace path: GPKG, shapefile, GeoJSON, CSV, XLSX …); "
                "reprojected to the input's CRS"
            )
        ),
    ],
    output: Output,
    predicate: Annotated[
        Literal["intersects", "within", "contains", "nearest"],
        Field(
            description=(
                "Spatial relation of an input feature to a join feature: intersects, within (input inside join), "
                "contains (input contains join) or nearest (the k closest join features, ties all kept)"
            )
        ),
    ] = "intersects",
    on: Annotated[
        str | list[str] | None,
        Field(
            description=(
                'A join by key instead of by location: the key field, or ["input_field", "join_field"]. Keys of '
                "different types (integer and text) are refused before writing unless key_cast says how to compare them"
            )
        ),
    ] = None,
    k: Annotated[
        int,
        Field(
            ge=1,
            le=1000,
            description=(
                "nearest only: how many nearest join features per input feature, one output row each with its distance "
                "and (k > 1) its rank (1 = nearest; ties share a rank and are all kept)"
            ),
        ),
    ] = 1,
    max_distance: Annotated[
        float | None,
        Field(ge=0, description="nearest only: ignore join features farther than this, in units"),
    ] = None,
    units: Annotated[
        DistanceUnits,
        Field(
            description=(
                "nearest only: units of max_distance and of the distance field: m (default), km, ft, mi — ground "
                "distances, geodesic on lon/lat layers — or deg / layer (the layer's own units, planar) when asked for"
            )
        ),
    ] = "m",
    how: Annotated[
        Literal["left", "inner"],
        Field(description=("left: every input feature (nulls where nothing matched); inner: only input features with a match")),
    ] = "left",
    aggregate: Annotated[
        dict[str, list[str]] | None,
        Field(
            description=(
                "Statistics of the matching features instead of their attributes, one output feature per input feature: "
                '{"*": ["count"], "pop": ["sum", "mean"], "continent": ["count_by"]}; functions count, sum, mean, min, '
                "max, median, std, first, last, count_distinct (nulls ignored); output fields <field>_<func> and count; "
                "count_by counts the matches per value of a join-layer field: one field <field>_<value> each (at most 100)"
            )
        ),
    ] = None,
    distance_field: Annotated[
        str | None,
        Field(
            description=(
                "nearest only: name of the field receiving the distance (in units); default 'distance' "
                "('nearest_distance' if the layers have a field named so)"
            )
        ),
    ] = None,
    key_cast: Annotated[
        Literal["number", "text"] | None,
        Field(
            description=(
                'on= only, when the key fields\' types differ: compare them as numbers ("7" = 7 = 7.0) or as text '
                '(7 = "7", "07" ≠ 7); reported in warnings'
            )
        ),
    ] = None,
    layer: Layer = None,
    join_layer: Annotated[str | None, Field(description="Layer of join (required when it has several)")] = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> JoinResult:
    """Add to each input feature the attributes of the join features it matches (like geopandas.sjoin /
    sjoin_nearest; one output feature per match; names found on both sides, whatever their case, suffixed
    _left/_right), or with aggregate their statistics (how many schools per district, population sum per zone,
    cities per continent with count_by), or join a table by key (on=). predicate=nearest gives the k nearest join
    features with their distance (and rank): on lon/lat layers the geodesic distance on the ellipsoid between the
    features' nearest points, in units (metres by default); the result's `nearest` names the fields, units and
    method. The join layer is held in memory and the input streamed, so the join should be the smaller; with
    aggregate the smaller of the two is indexed and the larger streamed (1 M points in 3 000 polygons works in
    little memory). To cut geometries use vector_overlay."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    other = optional_input(app, join, "join", inputs)
    assert other is not None
    job = jobs.JoinJob(
        src=src.gdal_path,
        join=other,
        predicate=predicate,
        on=on,
        max_distance=max_distance,
        units=units,
        k=k,
        how=how,
        aggregate=aggregate,
        distance_field=distance_field,
        key_cast=key_cast,
        layer=layer,
        join_layer=join_layer,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=inputs, output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result
