"""Vector tools: the OGR side of GDAL (ogr2ogr, ogrinfo) plus geometry operations with unit safety."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.app import App
from gdal_mcp.models import FeaturePage, ValidationReport, VectorWriteResult
from gdal_mcp.tools._base import READ, WRITE, gdal_tool, optional_input, read_result, write_output, write_result
from gdal_mcp.tools.params import (
    BBox,
    BBoxCRS,
    DstCRS,
    GeometryCRS,
    Layer,
    OptionalDstCRS,
    OutputLayer,
    Overwrite,
    SrcCRS,
    Units,
    VectorFormat,
    VectorInput,
    VectorOutput,
    Where,
    as_bbox,
)

Input = VectorInput
Output = VectorOutput
Format = VectorFormat


def register(mcp: Any, app: App) -> None:
    @gdal_tool(mcp, app, title="Convert vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_convert(
        input: Input,
        output: Output,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        where: Where = None,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        fields: Annotated[list[str] | None, Field(description="Attributes to keep (default all)")] = None,
        sql: Annotated[str | None, Field(description="A read-only SELECT on the source instead of layer/where/fields")] = None,
        dst_crs: OptionalDstCRS = None,
        src_crs: SrcCRS = None,
        explode_collections: Annotated[bool, Field(description="One feature per part of multi-part geometries")] = False,
        promote_to_multi: Annotated[bool, Field(description="Make every geometry Multi* (mixed single/multi layers)")] = False,
        layer_options: Annotated[dict[str, str | int | float | bool] | None, Field(
            description='OGR layer creation options (ogr2ogr -lco), e.g. {"SPATIAL_INDEX": "NO"} for FlatGeobuf')] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Convert a vector layer to another format (like ogr2ogr), optionally filtering by attribute (where),
        bbox, fields or a read-only SQL SELECT, and reprojecting (dst_crs). Streamed in batches: layers of
        millions of features never need to fit in memory. Multi-layer sources need layer=."""
        src = app.sandbox.resolve_input(input)
        job = jobs.ConvertVectorJob(
            src=src.gdal_path, layer=layer, format=format, output_layer=output_layer, where=where, bbox=as_bbox(bbox),
            bbox_crs=bbox_crs, fields=fields, sql=sql, dst_crs=dst_crs, src_crs=src_crs,
            explode_collections=explode_collections, promote_to_multi=promote_to_multi, layer_options=layer_options)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Reproject vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_reproject(
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
        job = jobs.ReprojectVectorJob(src=src.gdal_path, dst_crs=dst_crs, src_crs=src_crs, layer=layer, format=format,
                                      output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Clip vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_clip(
        input: Input,
        output: Output,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        geometry: Annotated[dict[str, Any] | None, Field(
            description="Clip to a GeoJSON geometry, Feature or FeatureCollection (polygons)")] = None,
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
            src=src.gdal_path, layer=layer, bbox=as_bbox(bbox), bbox_crs=bbox_crs, geometry=geometry,
            geometry_crs=geometry_crs, mask=mask_path, mask_layer=mask_layer, mask_where=mask_where, format=format,
            output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=inputs, output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Read features", annotations=READ, tags={"vector"})
    async def vector_features(
        input: Input,
        layer: Layer = None,
        where: Where = None,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        fields: Annotated[list[str] | None, Field(description="Attributes to include (default all)")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most features to return (default 50)")] = 50,
        offset: Annotated[int, Field(ge=0, description="Skip this many matching features (paging)")] = 0,
        geometry_mode: Annotated[Literal["full", "simplified", "none"], Field(
            description="full coordinates, simplified (≈100 vertices per feature) or none")] = "full",
        dst_crs: Annotated[str | None, Field(description="Return coordinates in this CRS (e.g. EPSG:4326)")] = None,
        ctx: Context | None = None,
    ) -> FeaturePage:
        """Read features as a bounded GeoJSON FeatureCollection to look at attributes and shapes; page with
        offset/limit (truncated and remaining say what is left). Large geometries are simplified or omitted with
        a warning so the answer stays small."""
        src = app.sandbox.resolve_input(input)
        job = jobs.FeaturesJob(path=src.gdal_path, layer=layer, where=where, bbox=as_bbox(bbox), bbox_crs=bbox_crs,
                               fields=fields, limit=limit, offset=offset, geometry=geometry_mode, dst_crs=dst_crs)
        return await read_result(app, ctx, job, quick=True)

    @gdal_tool(mcp, app, title="Buffer vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_buffer(
        input: Input,
        output: Output,
        distance: Annotated[float, Field(description="Buffer distance (negative shrinks polygons), in units "
                                                     "(metres by default)")],
        units: Units = "m",
        segments: Annotated[int, Field(ge=1, le=64, description="Segments per quarter circle")] = 8,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Buffer every geometry by a distance, in metres by default: on a geographic layer (EPSG:4326) the buffer is
        computed in a local projected CRS and returned in the layer's CRS, so 1000 m means 1000 m on the ground.
        Degrees only with units="deg" (or "layer") asked for explicitly."""
        src = app.sandbox.resolve_input(input)
        job = jobs.BufferJob(src=src.gdal_path, distance=distance, units=units, segments=segments, layer=layer,
                             format=format, output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Simplify vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_simplify(
        input: Input,
        output: Output,
        tolerance: Annotated[float, Field(gt=0, description="Largest deviation allowed, in units (metres by "
                                                            "default)")],
        units: Units = "m",
        preserve_topology: Annotated[bool, Field(description="Keep polygons valid (no self-intersections)")] = True,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Simplify geometries (Douglas-Peucker; topology-preserving by default). The tolerance is in metres by
        default, applied in a local projected CRS on geographic layers."""
        src = app.sandbox.resolve_input(input)
        job = jobs.SimplifyJob(src=src.gdal_path, tolerance=tolerance, units=units,
                               preserve_topology=preserve_topology, layer=layer, format=format,
                               output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Dissolve vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_dissolve(
        input: Input,
        output: Output,
        by: Annotated[str | list[str] | None, Field(description="Field(s) whose equal values are merged; "
                                                                "default: everything into one feature")] = None,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Merge geometries that share the value(s) of `by` into one feature each (union); the output keeps only
        the `by` fields."""
        src = app.sandbox.resolve_input(input)
        job = jobs.DissolveJob(src=src.gdal_path, by=by, layer=layer, format=format, output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Validate geometries", annotations=WRITE, tags={"vector"})
    async def vector_validate(
        input: Input,
        layer: Layer = None,
        output: Annotated[str | None, Field(description=(
            "Also write a repaired copy (make_valid) here: .gpkg, .shp, .geojson, .fgb …; default: report only"))] = None,
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
        target, report, warnings = await write_output(app, ctx, job, inputs=[src], output=output,
                                                      overwrite=overwrite)
        report.path = src.display
        report.fixed_output = target.display
        report.fixed_uri = app.sandbox.uri(target.display)
        return report
