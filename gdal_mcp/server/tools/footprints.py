"""Outlines of datasets: a raster's valid-data footprint (`gdal raster footprint`) and tile indexes of many datasets
(`gdal raster index` / `gdal vector index`, formerly gdaltindex / ogrtindex)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import DatasetIndexResult, FootprintResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import resolve_inputs, write_output
from gdal_mcp.server.tools.params import (
    Bands,
    CrsCheck,
    InputPattern,
    OutputLayer,
    Overwrite,
    RasterInput,
    VectorFormat,
    VectorOutput,
)
from gdal_mcp.server.tools.registry import WRITE, tool


@tool(title="Raster footprint (valid-data outline)", annotations=WRITE, tags={"raster", "vector"}, writes=True)
async def raster_footprint(
    app: App,
    input: RasterInput,
    output: VectorOutput,
    bands: Bands = None,
    combine_bands: Annotated[
        Literal["union", "intersection"],
        Field(
            description=(
                "How the bands' validity masks combine: union (default; a pixel counts when any band is valid) or "
                "intersection (only when every band is)"
            )
        ),
    ] = "union",
    src_nodata: Annotated[
        float | None,
        Field(
            description=(
                "Treat this value in every band read as nodata instead of the declared nodata/mask, e.g. 0 for a black "
                "collar the file does not declare"
            )
        ),
    ] = None,
    dst_crs: Annotated[
        str | None,
        CrsCheck,
        Field(description="CRS of the footprint, e.g. EPSG:4326 for lon/lat; default the raster's"),
    ] = None,
    simplify: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Simplification tolerance in the units of the OUTPUT CRS (metres for UTM, degrees for EPSG:4326); default none"
            ),
        ),
    ] = None,
    min_ring_area: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Drop rings (islands and holes) smaller than this, in the output CRS's units squared (m² for UTM, "
                "square degrees for EPSG:4326)"
            ),
        ),
    ] = None,
    max_points: Annotated[
        int | None,
        Field(
            ge=4,
            description=(
                "At most this many vertices per feature: GDAL simplifies further until it fits (default 100, as GDAL; "
                "about 0.2% of the area moves on a real collar). null: no limit, the exact pixel outline"
            ),
        ),
    ] = 100,
    convex_hull: Annotated[bool, Field(description="Write the convex hull of the footprint instead of its outline")] = False,
    split_multipolygons: Annotated[
        bool, Field(description="One feature per separate polygon instead of one MultiPolygon feature")
    ] = False,
    format: VectorFormat = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> FootprintResult:
    """The outline of a raster's valid pixels as polygons (GDAL 3.12 gdal raster footprint): where it has
    data, leaving out nodata borders, collars and holes (its nodata, alpha or mask; or src_nodata). Holes
    stay holes. Streamed: memory grows with the outline, not the raster. The result gives the footprint's
    bounds (summary.extent), its planar area in the output CRS's units squared and its geodesic area in m².
    For the rectangles of many files use dataset_index; to polygonize values use raster_polygonize."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FootprintJob(
        src=src.gdal_path,
        bands=bands,
        combine_bands=combine_bands,
        src_nodata=src_nodata,
        dst_crs=dst_crs,
        simplify=simplify,
        min_ring_area=min_ring_area,
        max_points=max_points,
        convex_hull=convex_hull,
        split_multipolygons=split_multipolygons,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result


@tool(title="Tile index of datasets", annotations=WRITE, tags={"raster", "vector"}, writes=True)
async def dataset_index(
    app: App,
    output: VectorOutput,
    inputs: Annotated[
        list[str] | None,
        Field(
            min_length=1,
            max_length=10000,
            description="Rasters (or vector datasets) to index, relative to the workspace (or give input_pattern)",
        ),
    ] = None,
    input_pattern: InputPattern = None,
    dataset_type: Annotated[
        Literal["raster", "vector"] | None,
        Field(description="What the inputs are; default raster when the first input opens as a raster, else vector"),
    ] = None,
    dst_crs: Annotated[
        str | None,
        CrsCheck,
        Field(
            description=(
                "Reproject every extent to this CRS (their four corners) and record each input's own CRS in src_srs; "
                "default the inputs' common CRS, or the first input's when they differ"
            )
        ),
    ] = None,
    layers: Annotated[
        list[str] | None,
        Field(min_length=1, description="Vector inputs: index only the layers of these names; default every layer"),
    ] = None,
    metadata_fields: Annotated[
        list[str] | None,
        Field(
            min_length=1,
            max_length=20,
            description=(
                "Raster inputs: metadata items (default domain, as raster_info lists them) to copy into text fields "
                "of the same name, e.g. ['TIFFTAG_DATETIME'] for an acquisition date; null where a raster has none"
            ),
        ),
    ] = None,
    format: VectorFormat = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> DatasetIndexResult:
    """A tile index (GDAL 3.12 gdal raster index / gdal vector index, like gdaltindex / ogrtindex): one
    polygon feature per raster (its extent) or per layer of each vector dataset, with `location` = its
    workspace-relative path ('tiles/a.tif'; vector layers 'roads.gpkg,0' with the layer index). Absolute
    server paths are never written. Inputs in several CRSs are reprojected to the first one's (or dst_crs),
    each one's CRS kept in src_srs. GDAL's GTI driver opens the index as one mosaic from the workspace's root
    directory (GTI:index.gpkg), e.g. after downloading the workspace; this server does not open tile indexes
    itself: give raster_mosaic the files (input_pattern). vector_features with bbox or intersects then finds
    the files covering an area."""
    srcs = await resolve_inputs(app, ctx, inputs, input_pattern)
    job = jobs.DatasetIndexJob(
        inputs=[s.gdal_path for s in srcs],
        names=[s.display for s in srcs],
        dataset_type=dataset_type,
        dst_crs=dst_crs,
        layers=layers,
        metadata_fields=metadata_fields,
        format=format,
        output_layer=output_layer,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=srcs, output=output, overwrite=overwrite)
    result.output, result.uri, result.warnings = target.display, app.sandbox.uri(target.display), warnings
    return result
