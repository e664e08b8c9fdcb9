"""Quicklooks the model can see: PNG images of rasters and vector layers, with a text legend."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.sandbox import ResolvedInput
from gdal_mcp.server.app import App
from gdal_mcp.server.results import prepare_output
from gdal_mcp.server.tools.params import BBox, BBoxCRS, Layer, Overwrite, PngOutput, RasterInput, VectorInput, Where, as_bbox
from gdal_mcp.server.tools.registry import WRITE, tool

MaxSize = Annotated[
    int,
    Field(
        ge=16,
        le=4096,
        description="Longest side of the image in pixels (default 768). A raster larger than this is read decimated to it; "
        "a smaller one is enlarged by the largest whole factor that fits (max_size // its longest side, nearest "
        "neighbour: each pixel a k x k block), e.g. 50x40 at 400 gives 400x320",
    ),
]
ScaleBarParam = Annotated[
    bool,
    Field(
        description="Draw a scale bar (1, 2 or 5 x 10^n m, true at the image centre; geodesic for lon/lat) in the "
        "bottom-left corner; the legend states the scale either way"
    ),
]
PreviewOutput = PngOutput


async def _render(
    app: App,
    ctx: Context | None,
    job: jobs.RasterPreviewJob | jobs.VectorPreviewJob,
    src: ResolvedInput,
    output: str | None,
    overwrite: bool,
) -> ToolResult:
    """Run a preview job: the PNG and its legend as the answer, the PNG also written to `output` if given.

    Not write_output: the job is quick, returns one model (not (result, warnings)), and writes only when asked;
    its output is resolved and committed as every other (prepare_output, App.execute).
    """
    target = None
    if output is not None:
        app.require_writable("preview output")
        target, job = prepare_output(app, job, output=output, overwrite=overwrite, inputs=[src])
    result = await app.execute(job, ctx=ctx, quick=True, output=target)
    info = app.sandbox.scrub_obj(result.model_dump())
    assert isinstance(info, dict)
    info["path"] = src.display
    info["dst"] = target.display if target else None
    if target:
        info["uri"] = app.sandbox.uri(target.display)
    legend = app.sandbox.scrub(result.legend)
    return ToolResult(
        content=[
            mt.ImageContent(type="image", data=base64.b64encode(result.png).decode("ascii"), mime_type="image/png"),
            mt.TextContent(type="text", text=legend),
        ],
        structured_content=info,
    )


@tool(title="Preview raster", annotations=WRITE, tags={"raster", "preview"})
async def raster_preview(
    app: App,
    input: RasterInput,
    bands: Annotated[
        list[int] | None,
        Field(description="1 band (drawn with a colormap) or 3 bands (RGB); default RGB for 3+ bands, else band 1"),
    ] = None,
    stretch: Annotated[
        Literal["percentile", "minmax", "none"],
        Field(description="Value to colour mapping: percentile (default, robust), minmax, none (0-255 as is)"),
    ] = "percentile",
    percentiles: Annotated[
        list[float], Field(min_length=2, max_length=2, description="Low and high percentile for stretch=percentile")
    ] = [2, 98],  # noqa: B006
    colormap: Annotated[str | None, Field(description="For one band: gray, viridis, magma, terrain, rdylgn, spectral …")] = None,
    max_size: MaxSize = 768,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    scale_bar: ScaleBarParam = True,
    output: PreviewOutput = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ToolResult:
    """Look at a raster: returns a PNG image (RGB composite or one band through a colormap; nodata
    transparent; a scale bar bottom left) plus a short legend with the value range, colormap, CRS, extent and
    scale. Reads overviews or a decimated window, never the full-resolution raster, so it is fast on large files;
    small rasters are enlarged by a whole factor (nearest neighbour) up to max_size."""
    src = app.sandbox.resolve_input(input)
    job = jobs.RasterPreviewJob(
        path=src.gdal_path,
        bands=bands,
        stretch=stretch,
        percentiles=(percentiles[0], percentiles[1]),
        colormap=colormap,
        max_size=max_size,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        scale_bar=scale_bar,
    )
    return await _render(app, ctx, job, src, output, overwrite)


@tool(title="Preview vector", annotations=WRITE, tags={"vector", "preview"})
async def vector_preview(
    app: App,
    input: VectorInput,
    layer: Layer = None,
    max_size: MaxSize = 768,
    color_by: Annotated[str | None, Field(description="Colour features by this attribute (categories or a numeric ramp)")] = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    where: Where = None,
    scale_bar: ScaleBarParam = True,
    output: PreviewOutput = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ToolResult:
    """Look at a vector layer: returns a PNG map (polygons filled and outlined, lines, points; a scale bar
    bottom left) drawn with GDAL, optionally coloured by an attribute, plus a legend. Streams the features, so
    large layers work."""
    src = app.sandbox.resolve_input(input)
    job = jobs.VectorPreviewJob(
        path=src.gdal_path,
        layer=layer,
        max_size=max_size,
        color_by=color_by,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        where=where,
        scale_bar=scale_bar,
    )
    return await _render(app, ctx, job, src, output, overwrite)
