"""vector_pipeline: several vector steps in one streamed pass (GDAL 3.12's `gdal vector pipeline`), one approval.

The steps are a typed list (a discriminated union on `step`); the tool reads `input` first and writes `output` last
(the shared parameters, so the approval question names the file and asks before replacing it), and the engine
(gdal_mcp/engine/vector/pipeline.py) builds GDAL's arguments and runs them in a worker.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import BaseModel, ConfigDict, Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import VectorPipelineResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import read_result, write_output
from gdal_mcp.server.tools.params import (
    BBox,
    BBoxCRS,
    DstCRS,
    Geometry,
    GeometryCRS,
    Layer,
    OptionsCheck,
    OutputLayer,
    Overwrite,
    SqlDialect,
    SrcCRS,
    Units,
)
from gdal_mcp.server.tools.params import VectorFormat as Format
from gdal_mcp.server.tools.params import VectorInput as Input
from gdal_mcp.server.tools.params import VectorOutput as Output
from gdal_mcp.server.tools.query import check_input_sql
from gdal_mcp.server.tools.registry import WRITE, tool


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReprojectStep(_Step):
    """Reproject to dst_crs (like ogr2ogr -t_srs)."""

    step: Literal["reproject"]
    dst_crs: DstCRS
    src_crs: SrcCRS = None


class FilterStep(_Step):
    """Keep the features matching where and/or intersecting bbox (like ogr2ogr -where / -spat)."""

    step: Literal["filter"]
    where: Annotated[
        str | None, Field(description='Attribute filter (OGR SQL WHERE) on the fields at this step, e.g. "pop > 1000"')
    ] = None
    bbox: BBox = None
    bbox_crs: Annotated[
        BBoxCRS, Field(description="CRS of bbox; default the layer's CRS at this step (after any reproject before it)")
    ] = None


class SelectStep(_Step):
    """Keep only these attribute fields (or drop them with exclude); the geometry is always kept."""

    step: Literal["select"]
    fields: Annotated[list[str], Field(min_length=1, description="Field names")]
    exclude: Annotated[bool, Field(description="Drop the fields listed instead of keeping them")] = False


class SqlStep(_Step):
    """Replace the layer by the result of one read-only SELECT on the input layer (FROM its name), e.g. "SELECT name,
    pop * 2 AS p2, geometry FROM countries WHERE continent = 'Africa'". Must be the FIRST step: GDAL runs it on the
    input as read (put filters in its WHERE; other steps after it)."""

    step: Literal["sql"]
    sql: Annotated[str, Field(description="One read-only SELECT (no other files, ATTACH or load_extension)")]
    sql_dialect: SqlDialect = "OGRSQL"


class ClipStep(_Step):
    """Cut geometries at a region: exactly one of bbox, geometry or mask (like vector_clip); attributes kept,
    features outside or only touching it dropped; a feature cut in pieces stays one (multi-part) feature."""

    step: Literal["clip"]
    bbox: BBox = None
    bbox_crs: Annotated[
        BBoxCRS, Field(description="CRS of bbox; default the layer's CRS at this step (after any reproject before it)")
    ] = None
    geometry: Geometry = None
    geometry_crs: GeometryCRS = None
    mask: Annotated[str | None, Field(description="Clip to the polygons of another vector file in the workspace")] = None
    mask_layer: Annotated[str | None, Field(description="Layer of mask (required when it has several)")] = None
    mask_where: Annotated[str | None, Field(description="Attribute filter on mask")] = None


class MakeValidStep(_Step):
    """Repair invalid geometries (GEOS MakeValid)."""

    step: Literal["make_valid"]
    method: Annotated[
        Literal["structure", "linework"],
        Field(description="structure (default, as vector_validate repairs): rings rebuilt as areas; linework: keeps every line"),
    ] = "structure"
    keep_lower_dim: Annotated[bool, Field(description="Keep parts that collapse to lines or points")] = False


class ExplodeCollectionsStep(_Step):
    """One feature per part of multi-part geometries (like ogr2ogr -explodecollections)."""

    step: Literal["explode_collections"]


class SetGeomTypeStep(_Step):
    """Change the geometry type: to geometry_type, multi-part (multi) or single-part (single), or the dimension."""

    step: Literal["set_geom_type"]
    geometry_type: (
        Literal["Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon", "GeometryCollection"] | None
    ) = None
    multi: Annotated[bool, Field(description="Make every geometry multi-part (ogr2ogr -nlt PROMOTE_TO_MULTI)")] = False
    single: Annotated[bool, Field(description="Make multi-part geometries of one part single-part")] = False
    dim: Literal["XY", "XYZ", "XYM", "XYZM"] | None = None
    skip: Annotated[bool, Field(description="Drop features that cannot be converted (default: keep them unchanged)")] = False


class SimplifyStep(_Step):
    """Simplify geometries, topology preserved (Douglas-Peucker, GEOS TopologyPreserveSimplify), as vector_simplify."""

    step: Literal["simplify"]
    tolerance: Annotated[float, Field(gt=0, description="Largest deviation allowed, in units (metres by default)")]
    units: Units = "m"


class BufferStep(_Step):
    """Buffer every geometry, as vector_buffer: distance in metres by default, on a lon/lat layer computed in the
    UTM zone of the data and returned to the layer's CRS (data wider than a zone: reproject first or use
    vector_buffer)."""

    step: Literal["buffer"]
    distance: Annotated[float, Field(description="Buffer distance (negative shrinks polygons), in units (metres by default)")]
    units: Units = "m"
    segments: Annotated[int, Field(ge=1, le=64, description="Segments per quarter circle")] = 8
    cap_style: Annotated[
        Literal["round", "flat", "square"],
        Field(description="Ends of buffered lines: round (default), flat (cut at the end) or square (extended by the distance)"),
    ] = "round"
    join_style: Annotated[
        Literal["round", "mitre", "bevel"], Field(description="Outer corners: round (default), mitre (sharp) or bevel (cut)")
    ] = "round"
    side: Annotated[
        Literal["both", "left", "right"],
        Field(description="both (default), or a single-sided buffer of lines on their left or right"),
    ] = "both"


class SegmentizeStep(_Step):
    """Add vertices so that no segment is longer than max_length."""

    step: Literal["segmentize"]
    max_length: Annotated[
        float,
        Field(
            gt=0,
            description=(
                "Longest segment, in the units of the layer's CRS at this step: metres on a projected CRS, DEGREES on a "
                "lon/lat one (0.01° is about 1.1 km)"
            ),
        ),
    ]


class LimitStep(_Step):
    """Keep only the first `limit` features."""

    step: Literal["limit"]
    limit: Annotated[int, Field(ge=0, description="Most features to keep")]


class SwapXYStep(_Step):
    """Swap the X and Y of every coordinate (data written in lat/lon order)."""

    step: Literal["swap_xy"]


VectorPipelineStep = Annotated[
    ReprojectStep
    | FilterStep
    | SelectStep
    | SqlStep
    | ClipStep
    | MakeValidStep
    | ExplodeCollectionsStep
    | SetGeomTypeStep
    | SimplifyStep
    | BufferStep
    | SegmentizeStep
    | LimitStep
    | SwapXYStep,
    Field(discriminator="step"),
]


@tool(title="Vector pipeline", annotations=WRITE, tags={"vector"}, writes=True)
async def vector_pipeline(
    app: App,
    input: Input,
    output: Output,
    steps: Annotated[
        list[VectorPipelineStep],
        Field(
            min_length=1,
            max_length=30,
            description=(
                'The steps, applied in order between reading input and writing output, each {"step": name, …}: '
                "reproject, filter, select, sql, clip, make_valid, explode_collections, set_geom_type, simplify, buffer, "
                "segmentize, limit, swap_xy"
            ),
        ),
    ],
    layer: Layer = None,
    format: Format = None,
    output_layer: OutputLayer = None,
    open_options: Annotated[
        dict[str, str | int | float | bool] | None,
        Field(
            description=(
                'Dataset open options (ogr2ogr -oo), e.g. {"X_POSSIBLE_NAMES": "lon", "Y_POSSIBLE_NAMES": "lat"} for a CSV'
            )
        ),
    ] = None,
    layer_options: Annotated[
        dict[str, str | int | float | bool] | None,
        OptionsCheck,
        Field(description='OGR layer creation options (ogr2ogr -lco), e.g. {"SPATIAL_INDEX": "NO"} for FlatGeobuf'),
    ] = None,
    plan_only: Annotated[
        bool,
        Field(
            description=(
                "Check everything and return the plan without writing: after the read and each step, the layer's CRS, "
                "geometry type, fields and feature count (exact, or a bound on large inputs)"
            )
        ),
    ] = False,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorPipelineResult:
    """Run several vector steps in one streamed pass (GDAL's `gdal vector pipeline`): read input (layer), apply
    steps in order, write output; one approval, no intermediate files. E.g. steps=[{"step": "filter", "where":
    "continent = 'Africa'"}, {"step": "reproject", "dst_crs": "EPSG:32633"}, {"step": "buffer", "distance": 500}].
    Distances of buffer and simplify are in metres by default, as in vector_buffer / vector_simplify. A step GDAL
    refuses fails naming its index. Try plan_only=true first to see each step's CRS, fields and counts."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    options = app.sandbox.check_open_options(open_options) if open_options else None
    dumped: list[dict[str, Any]] = []
    masks: list[str] = []
    for i, step in enumerate(steps):
        values = step.model_dump()
        if isinstance(step, SqlStep):
            try:
                await check_input_sql(app, ctx, src, step.sql)
            except GdalMcpError as e:
                raise GdalMcpError(e.code, f"steps[{i}] (sql): {e.message}") from None
        if isinstance(step, ClipStep) and step.mask is not None:
            mask = app.sandbox.resolve_input(step.mask, what=f"steps[{i}].mask")
            inputs.append(mask)
            values["mask"] = mask.gdal_path
            masks.append(mask.gdal_path)
        dumped.append(values)
    common: dict[str, Any] = {
        "src": src.gdal_path,
        "steps": dumped,
        "layer": layer,
        "open_options": options,
        "format": format,
        "output_layer": output_layer,
        "layer_options": layer_options,
        "mask": masks or None,
    }
    if plan_only:
        target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=inputs)
        target.discard()  # checked (in the workspace, not an input, no replacing without overwrite), nothing written
        plan = await read_result(app, ctx, jobs.VectorPipelinePlanJob(dst=str(target.final), **common))
        return VectorPipelineResult(
            output=target.display,
            plan_only=True,
            format=plan.format,
            pipeline=plan.pipeline,
            plan=plan.stages,
            warnings=plan.warnings,
        )
    target, run, warnings = await write_output(
        app, ctx, jobs.VectorPipelineJob(**common), inputs=inputs, output=output, overwrite=overwrite
    )
    pipeline = run.pipeline.replace(app.sandbox.scrub(str(target.tmp_path)), target.display)
    return VectorPipelineResult(
        output=target.display,
        uri=app.sandbox.uri(target.display),
        format=run.format,
        pipeline=pipeline,
        summary=run.summary,
        warnings=warnings,
    )
