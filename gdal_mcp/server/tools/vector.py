"""Vector tools: the OGR side of GDAL (ogr2ogr, ogrinfo) plus geometry operations with unit safety."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import FeaturePage, FromTableResult, MergeResult, ValidationReport, VectorWriteResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import (
    is_object,
    optional_input,
    read_result,
    resolve_inputs,
    unchangeable,
    write_output,
    write_result,
)
from gdal_mcp.server.tools.params import (
    VECTOR_FORMATS,
    BBox,
    BBoxCRS,
    CrsCheck,
    DstCRS,
    GeometryCRS,
    InputPattern,
    Layer,
    OptionalDstCRS,
    OptionsCheck,
    OutputLayer,
    Overwrite,
    Sql,
    SqlDialect,
    SrcCRS,
    Units,
    Where,
    as_bbox,
)
from gdal_mcp.server.tools.params import VectorFormat as Format
from gdal_mcp.server.tools.params import VectorInput as Input
from gdal_mcp.server.tools.params import VectorOutput as Output
from gdal_mcp.server.tools.query import check_input_sql
from gdal_mcp.server.tools.registry import READ, WRITE, tool


@tool(title="Convert vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_convert(
    app: App,
    input: Input,
    output: Output,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    where: Where = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    fields: Annotated[list[str] | None, Field(description="Attributes to keep (default all)")] = None,
    sql: Sql = None,
    sql_dialect: SqlDialect = "OGRSQL",
    open_options: Annotated[
        dict[str, str | int | float | bool] | None,
        Field(
            description=(
                'Dataset open options (ogr2ogr -oo), e.g. {"X_POSSIBLE_NAMES": "lon", "Y_POSSIBLE_NAMES": "lat"} for a CSV'
            )
        ),
    ] = None,
    mode: Annotated[
        Literal["create", "append", "add_layer"],
        Field(
            description=(
                "create (default): write a new file. append: add the features to a layer of the existing output "
                "(output_layer, or its only layer; fields matched by name, reprojected to the layer's CRS; like "
                "ogr2ogr -append). add_layer: add a new layer (output_layer, default the input's layer name) to an "
                "existing GeoPackage. Both change the existing file (atomically: a failure leaves it as it was) and add "
                "features again if repeated"
            )
        ),
    ] = "create",
    dst_crs: OptionalDstCRS = None,
    src_crs: SrcCRS = None,
    explode_collections: Annotated[bool, Field(description="One feature per part of multi-part geometries")] = False,
    promote_to_multi: Annotated[bool, Field(description="Make every geometry Multi* (mixed single/multi layers)")] = False,
    layer_options: Annotated[
        dict[str, str | int | float | bool] | None,
        OptionsCheck,
        Field(description='OGR layer creation options (ogr2ogr -lco), e.g. {"SPATIAL_INDEX": "NO"} for FlatGeobuf'),
    ] = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Convert a vector layer to another format (like ogr2ogr), optionally filtering by attribute (where),
    bbox, fields or a read-only SQL SELECT (OGR SQL or the SQLite dialect with SpatiaLite functions), and
    reprojecting (dst_crs). Streamed in batches: layers of millions of features never need to fit in memory.
    Multi-layer sources need layer=. mode=append / add_layer add features or a layer to an existing file
    instead of writing a new one. For two-layer operations use vector_join or vector_overlay."""
    src = app.sandbox.resolve_input(input)
    if sql is not None:
        await check_input_sql(app, ctx, src, sql)
    options = app.sandbox.check_open_options(open_options) if open_options else None
    job = jobs.ConvertVectorJob(
        src=src.gdal_path,
        layer=layer,
        format=format,
        output_layer=output_layer,
        where=where,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        fields=fields,
        sql=sql,
        dst_crs=dst_crs,
        src_crs=src_crs,
        explode_collections=explode_collections,
        promote_to_multi=promote_to_multi,
        layer_options=layer_options,
        sql_dialect=sql_dialect if sql is not None else None,
        open_options=options,
        mode=mode,
    )
    if mode != "create":
        if overwrite:
            raise GdalMcpError(
                "invalid-argument",
                f"overwrite replaces the output, mode={mode} keeps it and adds to it: give one or the other",
            )
        try:
            existing = app.sandbox.resolve_input(output, what="output")
        except GdalMcpError as e:
            if e.code != "not-found":
                raise
            raise GdalMcpError(
                "not-found",
                f"mode={mode} adds to an existing file, and '{output}' does not exist; use mode=create to write a new one",
            ) from None
        if not is_object(app, existing, output) and (
            existing.network or len(existing.files) != 1 or existing.gdal_path != str(existing.files[0])
        ):
            raise unchangeable(
                existing, output, f"mode={mode}", "write the combined data to a new name with vector_merge (or mode=create)"
            )
        job = dataclasses.replace(job, append_to=existing.gdal_path)
        overwrite = True  # the changed copy replaces the file on success
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Reproject vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_reproject(
    app: App,
    input: Input,
    output: Output,
    dst_crs: DstCRS,
    src_crs: SrcCRS = None,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Reproject a vector layer to another CRS (like ogr2ogr -t_srs), keeping Z and attributes. Coordinates
    are handled in x/y (lon/lat) order whatever the CRS's axis order."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ReprojectVectorJob(
        src=src.gdal_path, dst_crs=dst_crs, src_crs=src_crs, layer=layer, format=format, output_layer=output_layer
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Clip vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_clip(
    app: App,
    input: Input,
    output: Output,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    geometry: Annotated[
        dict[str, Any] | None, Field(description="Clip to a GeoJSON geometry, Feature or FeatureCollection (polygons)")
    ] = None,
    geometry_crs: GeometryCRS = None,
    mask: Annotated[str | None, Field(description="Clip to the polygons of another vector file in the workspace")] = None,
    mask_layer: Annotated[str | None, Field(description="Layer of mask (required when it has several)")] = None,
    mask_where: Annotated[str | None, Field(description="Attribute filter on mask")] = None,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Clip a vector layer to a bbox, a GeoJSON geometry or the polygons of a mask file (like ogr2ogr
    -clipsrc): geometries are cut at the boundary, attributes kept, features outside dropped. Give exactly one
    of bbox, geometry, mask; it is reprojected to the layer's CRS."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    mask_path = optional_input(app, mask, "mask", inputs)
    job = jobs.ClipVectorJob(
        src=src.gdal_path,
        layer=layer,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        geometry=geometry,
        geometry_crs=geometry_crs,
        mask=mask_path,
        mask_layer=mask_layer,
        mask_where=mask_where,
        format=format,
        output_layer=output_layer,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=inputs, output=output, overwrite=overwrite)


@tool(title="Read features", annotations=READ, tags={"vector"})
async def vector_features(
    app: App,
    input: Input,
    layer: Layer = None,
    where: Where = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    fields: Annotated[list[str] | None, Field(description="Attributes to include (default all)")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="Most features to return (default 50)")] = 50,
    offset: Annotated[int, Field(ge=0, description="Skip this many matching features (paging)")] = 0,
    geometry_mode: Annotated[
        Literal["full", "simplified", "none"],
        Field(description="full coordinates, simplified (≈100 vertices per feature) or none"),
    ] = "full",
    dst_crs: Annotated[str | None, CrsCheck, Field(description="Return coordinates in this CRS (e.g. EPSG:4326)")] = None,
    intersects: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                "Only features whose geometry intersects this GeoJSON geometry, Feature or FeatureCollection (any "
                "geometry type), in intersects_crs"
            )
        ),
    ] = None,
    intersects_crs: Annotated[
        str | None, CrsCheck, Field(description=("CRS of intersects; default EPSG:4326, as GeoJSON says"))
    ] = None,
    ctx: Context | None = None,
) -> FeaturePage:
    """Read features as a bounded GeoJSON FeatureCollection to look at attributes and shapes; filter with where,
    bbox or intersects (a GeoJSON shape); page with offset/limit (truncated and remaining say what is left).
    Large geometries are simplified or omitted with a warning so the answer stays small."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FeaturesJob(
        path=src.gdal_path,
        layer=layer,
        where=where,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        fields=fields,
        limit=limit,
        offset=offset,
        geometry_mode=geometry_mode,
        dst_crs=dst_crs,
        intersects=intersects,
        intersects_crs=intersects_crs,
    )
    return await read_result(app, ctx, job, quick=True)


@tool(title="Buffer vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_buffer(
    app: App,
    input: Input,
    output: Output,
    distance: Annotated[
        float,
        Field(
            description="Buffer distance (negative shrinks polygons), in units (metres by default); ignored with distance_field"
        ),
    ],
    units: Units = "m",
    segments: Annotated[int, Field(ge=1, le=64, description="Segments per quarter circle")] = 8,
    cap_style: Annotated[
        Literal["round", "flat", "square"],
        Field(
            description=("Ends of buffered lines: round (default), flat (cut at the end) or square (extended by the distance)")
        ),
    ] = "round",
    join_style: Annotated[
        Literal["round", "mitre", "bevel"],
        Field(description=("Outer corners: round (default), mitre (sharp) or bevel (cut)")),
    ] = "round",
    dissolve: Annotated[
        bool,
        Field(
            description=(
                "Union all the buffers into one feature without attributes (e.g. the area within 500 m of any "
                "school); default one buffer per feature, attributes kept"
            )
        ),
    ] = False,
    distance_field: Annotated[
        str | None,
        Field(
            description=(
                "Numeric field holding each feature's distance (in units) instead of distance; a null distance "
                "gives a null geometry"
            )
        ),
    ] = None,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Buffer every geometry by a distance, in metres by default: on a geographic layer (EPSG:4326) the buffer is
    computed in a local projected CRS and returned in the layer's CRS, so 1000 m means 1000 m on the ground.
    Degrees only with units="deg" (or "layer") asked for explicitly. distance_field gives each feature its own
    distance; dissolve=true unions all buffers into one feature."""
    src = app.sandbox.resolve_input(input)
    job = jobs.BufferJob(
        src=src.gdal_path,
        distance=distance,
        units=units,
        segments=segments,
        layer=layer,
        format=format,
        output_layer=output_layer,
        cap_style=cap_style,
        join_style=join_style,
        dissolve=dissolve,
        distance_field=distance_field,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Simplify vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_simplify(
    app: App,
    input: Input,
    output: Output,
    tolerance: Annotated[float, Field(gt=0, description="Largest deviation allowed, in units (metres by default)")],
    units: Units = "m",
    preserve_topology: Annotated[bool, Field(description="Keep polygons valid (no self-intersections)")] = True,
    coverage: Annotated[
        bool,
        Field(
            description=(
                "The polygons tile an area (countries, parcels, districts): simplify each shared boundary once so "
                "neighbours stay edge to edge, no gaps or slivers (GEOS coverage simplification, Visvalingam-Whyatt: "
                "tolerance ≈ square root of the triangle areas removed). Holds the whole layer in memory"
            )
        ),
    ] = False,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Simplify geometries (Douglas-Peucker; topology-preserving by default). The tolerance is in metres by
    default, applied in a local projected CRS on geographic layers. For polygons that share boundaries
    (countries, parcels) use coverage=true, or gaps and slivers open between neighbours."""
    src = app.sandbox.resolve_input(input)
    job = jobs.SimplifyJob(
        src=src.gdal_path,
        tolerance=tolerance,
        units=units,
        preserve_topology=preserve_topology,
        layer=layer,
        format=format,
        output_layer=output_layer,
        coverage=coverage,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Dissolve vector", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_dissolve(
    app: App,
    input: Input,
    output: Output,
    by: Annotated[
        str | list[str] | None,
        Field(description="Field(s) whose equal values are merged; default: everything into one feature"),
    ] = None,
    aggregate: Annotated[
        dict[str, list[str]] | None,
        Field(
            description=(
                'Statistics of each group\'s features, e.g. {"*": ["count"], "pop": ["sum", "mean"]}: count, sum, '
                'mean, min, max, median, std, first, last, count_distinct (nulls ignored; "*" counts features); '
                'output fields "<field>_<func>" ("count" for "*")'
            )
        ),
    ] = None,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Merge geometries that share the value(s) of `by` into one feature each (union), like geopandas
    dissolve; the output keeps the `by` fields and, with aggregate, statistics per group (population by
    region: by="region", aggregate={"pop": ["sum"]})."""
    src = app.sandbox.resolve_input(input)
    job = jobs.DissolveJob(src=src.gdal_path, by=by, layer=layer, format=format, output_layer=output_layer, aggregate=aggregate)
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Overlay two layers", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_overlay(
    app: App,
    input: Input,
    overlay: Annotated[
        str,
        Field(
            description=("The second layer (workspace path), reprojected to the input's CRS; held in memory, so the smaller one")
        ),
    ],
    output: Output,
    how: Annotated[
        Literal["intersection", "union", "difference", "symmetric_difference", "identity"],
        Field(
            description=(
                "intersection: the pieces in both; union: all pieces of both; difference: input minus "
                "overlay; symmetric_difference: the pieces in only one; identity: the input cut by the "
                "overlay"
            )
        ),
    ] = "intersection",
    layer: Layer = None,
    overlay_layer: Annotated[str | None, Field(description="Layer of overlay (required when it has several)")] = None,
    keep_fields: Annotated[
        Literal["both", "input", "none"],
        Field(
            description=(
                "Attributes to keep: both layers' (clashing names get _1 for the input, _2 for the overlay, as "
                "geopandas), the input's only, or none"
            )
        ),
    ] = "both",
    keep_geom_type: Annotated[
        bool,
        Field(
            description=(
                "Keep only pieces of the input's geometry type (polygon overlays give polygons, never stray lines or "
                "points where shapes touch); false keeps every piece (geometry type Unknown)"
            )
        ),
    ] = True,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Overlay two layers like geopandas.overlay / ogr_layer_algebra: each output feature is a piece of
    geometry with the attributes of the input and overlay features it lies in. The input is streamed in
    batches against a spatial index of the overlay, so pass the LARGER layer as input and the smaller as
    overlay. Invalid geometries are made valid first. For attributes of matching features without cutting
    geometries use vector_join; to cut one layer by a mask use vector_clip."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    other = optional_input(app, overlay, "overlay", inputs)
    assert other is not None
    job = jobs.OverlayJob(
        src=src.gdal_path,
        overlay=other,
        how=how,
        layer=layer,
        overlay_layer=overlay_layer,
        keep_fields=keep_fields,
        keep_geom_type=keep_geom_type,
        format=format,
        output_layer=output_layer,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=inputs, output=output, overwrite=overwrite)


@tool(title="Validate geometries", annotations=WRITE, tags={"vector"})
async def vector_validate(
    app: App,
    input: Input,
    layer: Layer = None,
    output: Annotated[
        str | None,
        Field(description=(f"Also write a repaired copy (make_valid) here: {VECTOR_FORMATS}; default: report only")),
    ] = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ValidationReport:
    """Report invalid geometries (count, reasons, first few feature ids); with output, write a repaired
    copy where every geometry is valid (parts of the original dimension kept). Reading only unless
    output is given."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ValidateJob(path=src.gdal_path, layer=layer)
    if output is None:
        report, _ = await app.execute(job, ctx=ctx)
        report = app.scrub_model(report)
        report.path = src.display
        return report
    app.require_writable("vector_validate")
    target, report, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    report.path = src.display
    report.fixed_output = target.display
    report.fixed_uri = app.sandbox.uri(target.display)
    return report


@tool(title="Table to points", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_from_table(
    app: App,
    input: Annotated[
        str,
        Field(
            description=(
                "Table to read, relative to the workspace: CSV (.csv), TSV (.tsv), text (.txt, read as CSV), Excel "
                "(.xlsx), OpenDocument (.ods), or any table GDAL reads"
            )
        ),
    ],
    output: Output,
    x: Annotated[
        str | None,
        Field(
            description=(
                "Column of x (longitude, easting); default detected: lon/lat, longitude/latitude, x/y, "
                "easting/northing (case-insensitive)"
            )
        ),
    ] = None,
    y: Annotated[str | None, Field(description="Column of y (latitude, northing); with x")] = None,
    wkt: Annotated[
        str | None,
        Field(
            description=(
                "Column of WKT geometries instead of x/y (e.g. 'POLYGON ((…))'); detected when named wkt/geometry "
                "and no coordinate columns exist"
            )
        ),
    ] = None,
    crs: Annotated[
        str,
        CrsCheck,
        Field(description=("CRS of the coordinates (default EPSG:4326, lon/lat); e.g. EPSG:32632 for UTM eastings/northings")),
    ] = "EPSG:4326",
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> FromTableResult:
    """Turn a table of coordinates (CSV, TSV, XLSX, ODS; layer= picks a sheet) into points, or a WKT column
    into geometries. Column
    types are detected (numbers are numbers; codes such as "01234" stay text); the coordinate columns stay as
    attributes. Every row is written: rows whose coordinates are empty or unreadable get a null geometry and
    are reported (unparsed_rows, unparsed_row_numbers), never dropped."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FromTableJob(src=src.gdal_path, x=x, y=y, wkt=wkt, crs=crs, layer=layer, format=format, output_layer=output_layer)
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result


@tool(title="Geometry transform", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_geometry(
    app: App,
    input: Input,
    output: Output,
    operation: Annotated[
        Literal["centroid", "point_on_surface", "convex_hull", "envelope", "boundary", "explode", "make_valid", "set_precision"],
        Field(
            description=(
                "centroid / point_on_surface (a point always inside) -> points; convex_hull / envelope (bounding box) "
                "-> polygons; boundary -> rings as lines (polygons) or end points (lines); explode -> one feature per "
                "part; make_valid -> invalid geometries repaired; set_precision -> coordinates snapped to grid_size"
            )
        ),
    ],
    grid_size: Annotated[
        float | None,
        Field(
            gt=0,
            description=("Grid cell for set_precision, in the layer's units (degrees on EPSG:4326: 0.000001 is about 0.1 m)"),
        ),
    ] = None,
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """One-layer geometry transforms, attributes kept, planar in the layer's coordinates as GEOS does (on lon/lat
    layers a centroid is computed in degrees: vector_measure gives ground centroids). Results that are not of
    the output type (a hull of collinear points, a polygon collapsed by set_precision) are written with a null
    geometry and counted in warnings. For buffers use vector_buffer, for simplification vector_simplify."""
    src = app.sandbox.resolve_input(input)
    job = jobs.GeometryOpJob(
        src=src.gdal_path, operation=operation, grid_size=grid_size, layer=layer, format=format, output_layer=output_layer
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Merge vector files", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_merge(
    app: App,
    output: Output,
    inputs: Annotated[
        list[str] | None,
        Field(min_length=1, max_length=10000, description=("Vector datasets to merge, relative to the workspace, in order")),
    ] = None,
    input_pattern: InputPattern = None,
    layer: Layer = None,
    source_field: Annotated[
        str | None,
        Field(description=("Field naming each feature's source file (workspace-relative path) in mode single; null for none")),
    ] = "source",
    mode: Annotated[
        Literal["single", "layers"],
        Field(
            description=(
                "single: every feature in one layer (ogrmerge -single); layers: one layer per input in one GeoPackage "
                "(.gpkg), named after the file"
            )
        ),
    ] = "single",
    format: Format = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> MergeResult:
    """Merge many vector files into one layer with a field naming each feature's source (like ogrmerge.py
    -single), or into one GeoPackage with a layer per input. Inputs in another CRS are reprojected to the first
    input's; field sets are unioned (a field missing from an input is null; type conflicts take the wider type
    or text, and are reported). The merged layer is named output_layer, default the output file's name. Streamed: memory does
    not grow with the inputs."""
    srcs = await resolve_inputs(app, ctx, inputs, input_pattern)
    job = jobs.MergeJob(
        inputs=[s.gdal_path for s in srcs],
        source_names=[s.display for s in srcs],
        layer=layer,
        source_field=source_field or None,
        mode=mode,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=srcs, output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result
