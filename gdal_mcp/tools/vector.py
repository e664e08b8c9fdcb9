"""Vector tools: the OGR side of GDAL (ogr2ogr, ogrinfo) plus geometry operations with unit safety."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp.app import App
from gdal_mcp.models import FeaturePage, ValidationReport, VectorWriteResult
from gdal_mcp.tools._base import READ, WRITE, gdal_tool, optional_input, write_output, write_result

Input = Annotated[str, Field(description="Vector dataset to read: workspace path (.gpkg, .shp, .geojson, .fgb, .gpx, "
                                         ".osm.pbf …), /vsizip/a.zip/x.shp, GPKG:f.gpkg:layer")]
Output = Annotated[str, Field(description="File to write, relative to the workspace; the extension picks the format "
                                          "unless format= is given (.gpkg, .shp, .geojson, .fgb, .csv, .kml, .gml)")]
Layer = Annotated[str | None, Field(description="Layer to read; required when the source has several (vector_info "
                                                "lists them)")]
Format = Annotated[str | None, Field(description="OGR driver short name: GPKG, ESRI Shapefile, GeoJSON, FlatGeobuf, "
                                                 "CSV, KML, GML …; default from the output extension")]
OutputLayer = Annotated[str | None, Field(description="Name of the layer written; default the input layer's")]
Overwrite = Annotated[bool, Field(description="Replace the output if it exists (default false: refuse)")]
BBox = Annotated[list[float] | None, Field(min_length=4, max_length=4, description="[minx, miny, maxx, maxy]")]
BBoxCRS = Annotated[str | None, Field(description="CRS of bbox; default the layer's")]
Units = Annotated[Literal["layer", "m", "km", "ft", "mi", "deg"], Field(
    description="Units of the distance/tolerance: layer (the layer's own units: degrees for EPSG:4326!), m, km, ft, "
                "mi or deg. Metres on a geographic layer are applied in a local projected CRS")]


def register(mcp: Any, app: App) -> None:
    @gdal_tool(mcp, app, title="Convert vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_convert(
        input: Input,
        output: Output,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        where: Annotated[str | None, Field(description="Attribute filter, e.g. \"continent = 'Africa'\"")] = None,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        fields: Annotated[list[str] | None, Field(description="Attributes to keep (default all)")] = None,
        sql: Annotated[str | None, Field(description="A read-only SELECT on the source instead of layer/where/fields")] = None,
        dst_crs: Annotated[str | None, Field(description="Reproject on the way: EPSG:4326, 3857, PROJ, WKT")] = None,
        src_crs: Annotated[str | None, Field(description="Override or assign the source CRS")] = None,
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
        return await write_result(app, ctx, "gdal_mcp.engine.vector.convert:convert", {
            "src": src.gdal_path, "layer": layer, "format": format, "output_layer": output_layer, "where": where,
            "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs, "fields": fields, "sql": sql,
            "dst_crs": dst_crs, "src_crs": src_crs, "explode_collections": explode_collections,
            "promote_to_multi": promote_to_multi, "layer_options": layer_options,
        }, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Reproject vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_reproject(
        input: Input,
        output: Output,
        dst_crs: Annotated[str, Field(description="Target CRS: EPSG:4326, 3857, OGC:CRS84, PROJ string or WKT")],
        src_crs: Annotated[str | None, Field(description="Override or assign the source CRS")] = None,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Reproject a vector layer to another CRS (like ogr2ogr -t_srs), keeping Z and attributes. Coordinates
        are handled in x/y (lon/lat) order whatever the CRS's axis order."""
        src = app.sandbox.resolve_input(input)
        return await write_result(app, ctx, "gdal_mcp.engine.vector.convert:reproject", {
            "src": src.gdal_path, "dst_crs": dst_crs, "src_crs": src_crs, "layer": layer, "format": format,
            "output_layer": output_layer,
        }, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Clip vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_clip(
        input: Input,
        output: Output,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        geometry: Annotated[dict[str, Any] | None, Field(
            description="Clip to a GeoJSON geometry, Feature or FeatureCollection (polygons)")] = None,
        geometry_crs: Annotated[str | None, Field(description="CRS of geometry; default EPSG:4326 as GeoJSON says")] = None,
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
        return await write_result(app, ctx, "gdal_mcp.engine.vector.clip:clip", {
            "src": src.gdal_path, "layer": layer, "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs,
            "geometry": geometry, "geometry_crs": geometry_crs, "mask": mask_path, "mask_layer": mask_layer,
            "mask_where": mask_where, "format": format, "output_layer": output_layer,
        }, model=VectorWriteResult, inputs=inputs, output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Read features", annotations=READ, tags={"vector"})
    async def vector_features(
        input: Input,
        layer: Layer = None,
        where: Annotated[str | None, Field(description="Attribute filter, e.g. \"pop_est > 1000000\"")] = None,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        fields: Annotated[list[str] | None, Field(description="Attributes to include (default all)")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Most features to return (default 50)")] = 50,
        offset: Annotated[int, Field(ge=0, description="Skip this many matching features (paging)")] = 0,
        geometry: Annotated[Literal["full", "simplified", "none"], Field(
            description="full coordinates, simplified (≈100 vertices per feature) or none")] = "full",
        dst_crs: Annotated[str | None, Field(description="Return coordinates in this CRS (e.g. EPSG:4326)")] = None,
        ctx: Context | None = None,
    ) -> FeaturePage:
        """Read features as a bounded GeoJSON FeatureCollection to look at attributes and shapes; page with
        offset/limit (truncated and remaining say what is left). Large geometries are simplified or omitted with
        a warning so the answer stays small."""
        src = app.sandbox.resolve_input(input)
        result = await app.execute("gdal_mcp.engine.vector.features:features", {
            "path": src.gdal_path, "layer": layer, "where": where, "bbox": tuple(bbox) if bbox else None,
            "bbox_crs": bbox_crs, "fields": fields, "limit": limit, "offset": offset, "geometry": geometry,
            "dst_crs": dst_crs,
        }, ctx=ctx, quick=True)
        return app.scrub_model(result)

    @gdal_tool(mcp, app, title="Buffer vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_buffer(
        input: Input,
        output: Output,
        distance: Annotated[float, Field(description="Buffer distance (negative shrinks polygons), in units")],
        units: Units = "layer",
        segments: Annotated[int, Field(ge=1, le=64, description="Segments per quarter circle")] = 8,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Buffer every geometry by a distance. Give units="m" (or km, ft, mi) for ground distances: on a
        geographic layer (EPSG:4326) the buffer is computed in a local projected CRS and returned in the layer's
        CRS, so 1000 m means 1000 m on the ground. units="layer" on a geographic layer means degrees (warned)."""
        src = app.sandbox.resolve_input(input)
        return await write_result(app, ctx, "gdal_mcp.engine.vector.geometry:buffer", {
            "src": src.gdal_path, "distance": distance, "units": units, "segments": segments, "layer": layer,
            "format": format, "output_layer": output_layer,
        }, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Simplify vector", annotations=WRITE, tags={"vector"}, writes=True)
    async def vector_simplify(
        input: Input,
        output: Output,
        tolerance: Annotated[float, Field(gt=0, description="Largest deviation allowed, in units")],
        units: Units = "layer",
        preserve_topology: Annotated[bool, Field(description="Keep polygons valid (no self-intersections)")] = True,
        layer: Layer = None,
        format: Format = None,
        output_layer: OutputLayer = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Simplify geometries (Douglas-Peucker; topology-preserving by default). Tolerances in metres on a
        geographic layer are applied in a local projected CRS."""
        src = app.sandbox.resolve_input(input)
        return await write_result(app, ctx, "gdal_mcp.engine.vector.geometry:simplify", {
            "src": src.gdal_path, "tolerance": tolerance, "units": units, "preserve_topology": preserve_topology,
            "layer": layer, "format": format, "output_layer": output_layer,
        }, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)

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
        return await write_result(app, ctx, "gdal_mcp.engine.vector.geometry:dissolve", {
            "src": src.gdal_path, "by": by, "layer": layer, "format": format, "output_layer": output_layer,
        }, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Validate geometries", annotations=WRITE, tags={"vector"})
    async def vector_validate(
        input: Input,
        layer: Layer = None,
        fix_output: Annotated[str | None, Field(description="Also write a repaired copy (make_valid) here")] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> ValidationReport:
        """Report invalid geometries (count, reasons, first few feature ids); with fix_output, write a repaired
        copy where every geometry is valid (parts of the original dimension kept). Reading only unless
        fix_output is given."""
        src = app.sandbox.resolve_input(input)
        if fix_output is None:
            report, _ = await app.execute("gdal_mcp.engine.vector.validate:validate",
                                          {"path": src.gdal_path, "layer": layer}, ctx=ctx)
            report = app.scrub_model(report)
            report.path = src.display
            return report
        app.require_writable("vector_validate")
        target, report, warnings = await write_output(app, ctx, "gdal_mcp.engine.vector.validate:validate", {
            "path": src.gdal_path, "layer": layer,
        }, inputs=[src], output=fix_output, overwrite=overwrite)
        report.path = src.display
        report.fixed_output = target.display
        report.fixed_uri = app.sandbox.uri(target.display)
        return report
