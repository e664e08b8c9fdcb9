"""Quicklooks the model can see: PNG images of rasters and vector layers, with a text legend."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import mcp.types as mt
from fastmcp import Context
from fastmcp.tools import ToolResult
from pydantic import Field

from gdal_mcp.app import App
from gdal_mcp.tools._base import WRITE, gdal_tool

MaxSize = Annotated[int, Field(ge=16, le=4096, description="Longest side of the image in pixels (default 768)")]
PreviewOutput = Annotated[str | None, Field(description="Also save the PNG at this workspace path")]


def register(mcp: Any, app: App) -> None:
    async def render(ctx: Any, func: str, kwargs: dict[str, Any], src: Any, output: str | None,
                     overwrite: bool) -> ToolResult:
        target = None
        if output is not None:
            app.require_writable("preview output")
            target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=[src])
        result = await app.execute(func, {**kwargs, "dst": str(target.tmp_path) if target else None}, ctx=ctx,
                                   quick=True, output=target)
        info = app.sandbox.scrub_obj(result.model_dump())
        assert isinstance(info, dict)
        info["path"] = src.display
        info["dst"] = target.display if target else None
        if target:
            info["uri"] = app.sandbox.uri(target.display)
        legend = app.sandbox.scrub(result.legend)
        return ToolResult(
            content=[mt.ImageContent(type="image", data=base64.b64encode(result.png).decode("ascii"), mime_type="image/png"),
                     mt.TextContent(type="text", text=legend)],
            structured_content=info,
        )

    @gdal_tool(mcp, app, title="Preview raster", annotations=WRITE, tags={"raster", "preview"})
    async def raster_preview(
        input: Annotated[str, Field(description="Raster to look at (workspace path, /vsizip/…, subdataset)")],
        bands: Annotated[list[int] | None, Field(description="1 band (drawn with a colormap) or 3 bands (RGB); default "
                                                             "RGB for 3+ bands, else band 1")] = None,
        stretch: Annotated[Literal["percentile", "minmax", "none"], Field(
            description="Value to colour mapping: percentile (default, robust), minmax, none (0-255 as is)")] = "percentile",
        percentiles: Annotated[list[float], Field(min_length=2, max_length=2,
                                                  description="Low and high percentile for stretch=percentile")] = [2, 98],  # noqa: B006
        colormap: Annotated[str | None, Field(description="For one band: gray, viridis, magma, terrain, rdylgn, "
                                                          "spectral …")] = None,
        max_size: MaxSize = 768,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                  description="Only this area: [minx, miny, maxx, maxy]")] = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default the raster's")] = None,
        output: PreviewOutput = None,
        overwrite: Annotated[bool, Field(description="Replace output if it exists")] = False,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Look at a raster: returns a PNG image (RGB composite or one band through a colormap; nodata
        transparent) plus a short legend with the value range, colormap, CRS and extent. Reads overviews or a
        decimated window, never the full-resolution raster, so it is fast on large files."""
        src = app.sandbox.resolve_input(input)
        return await render(ctx, "gdal_mcp.engine.preview.raster:raster_preview", {
            "path": src.gdal_path, "bands": bands, "stretch": stretch, "percentiles": tuple(percentiles),
            "colormap": colormap, "max_size": max_size, "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs,
        }, src, output, overwrite)

    @gdal_tool(mcp, app, title="Preview vector", annotations=WRITE, tags={"vector", "preview"})
    async def vector_preview(
        input: Annotated[str, Field(description="Vector dataset to look at")],
        layer: Annotated[str | None, Field(description="Layer; required when the source has several")] = None,
        max_size: MaxSize = 768,
        color_by: Annotated[str | None, Field(description="Colour features by this attribute (categories or a "
                                                          "numeric ramp)")] = None,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                  description="Only this area: [minx, miny, maxx, maxy]")] = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default the layer's")] = None,
        where: Annotated[str | None, Field(description="Attribute filter on the features drawn")] = None,
        output: PreviewOutput = None,
        overwrite: Annotated[bool, Field(description="Replace output if it exists")] = False,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Look at a vector layer: returns a PNG map (polygons filled and outlined, lines, points) drawn with
        GDAL, optionally coloured by an attribute, plus a legend. Streams the features, so large layers work."""
        src = app.sandbox.resolve_input(input)
        return await render(ctx, "gdal_mcp.engine.preview.vector:vector_preview", {
            "path": src.gdal_path, "layer": layer, "max_size": max_size, "color_by": color_by,
            "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs, "where": where,
        }, src, output, overwrite)
