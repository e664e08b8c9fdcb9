"""Analysis tools: terrain (gdaldem), band math, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterWriteResult, VectorWriteResult, ZonalResult
from gdal_mcp.tools._base import WRITE, gdal_tool, optional_input, write_output, write_result
from gdal_mcp.tools.params import (
    Band,
    CreationOptions,
    GridBBox,
    GridBBoxCRS,
    Layer,
    OptionalVectorOutput,
    OutputType,
    Overwrite,
    RasterFormat,
    RasterInput,
    RasterOutput,
    VectorFormat,
    VectorInput,
    VectorOutput,
    Where,
    as_bbox,
    resolution_description,
)

Output = RasterOutput
Format = RasterFormat

BAND_SUFFIX = re.compile(r"^(.*):(\d+)$", re.S)


def register(mcp: Any, app: App) -> None:
    def band_input(spec: str, what: str) -> Any:
        """Resolve "path" or "path:band" through the sandbox; the band suffix stays on the GDAL path."""
        try:
            return app.sandbox.resolve_input(spec, what=what), None
        except GdalMcpError as e:
            m = BAND_SUFFIX.match(spec)
            if e.code != "not-found" or not m:
                raise
            return app.sandbox.resolve_input(m.group(1), what=what), int(m.group(2))

    @gdal_tool(mcp, app, title="Terrain analysis", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
    async def raster_terrain(
        input: Annotated[str, Field(description="DEM (elevation raster) to read, relative to the workspace")],
        output: Output,
        product: Annotated[Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi"],
                           Field(description="What to compute (like gdaldem)")],
        band: Annotated[int, Field(ge=1, description="Elevation band")] = 1,
        z_factor: Annotated[float, Field(gt=0, description="Vertical exaggeration (hillshade, slope)")] = 1.0,
        azimuth: Annotated[float, Field(ge=0, le=360, description="Hillshade light direction, degrees clockwise "
                                                                  "from north")] = 315.0,
        altitude: Annotated[float, Field(ge=0, le=90, description="Hillshade light elevation, degrees")] = 45.0,
        slope_units: Annotated[Literal["degrees", "percent"], Field(description="Units of slope")] = "degrees",
        scale: Annotated[float | None, Field(gt=0, description="Horizontal units per vertical unit; default 1, or "
                                                               "111120 (metres per degree) for geographic DEMs")] = None,
        compute_edges: Annotated[bool, Field(description="Also compute the outermost pixels (gdaldem "
                                                         "-compute_edges); default they are nodata")] = False,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Hillshade, slope, aspect, roughness, TRI or TPI of a DEM, exactly as gdaldem computes them (Horn's
        method), streamed window by window. Slope/aspect/tri/tpi/roughness are Float32 with nodata -9999;
        hillshade is Byte with nodata 0. Geographic DEMs (lon/lat) are scaled automatically."""
        src = app.sandbox.resolve_input(input)
        job = jobs.TerrainJob(src=src.gdal_path, product=product, band=band, z_factor=z_factor, azimuth=azimuth,
                              altitude=altitude, slope_units=slope_units, scale=scale, compute_edges=compute_edges,
                              format=format, creation_options=creation_options)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Raster calculator", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
    async def raster_calc(
        inputs: Annotated[dict[str, str], Field(
            min_length=1, max_length=26,
            description='Name -> raster, optionally ":band", e.g. {"A": "red.tif", "B": "landsat.tif:4"}')],
        expression: Annotated[str, Field(max_length=2000, description=(
            "Band math on the names: + - * / ** comparisons, & | ~, where(c, a, b), sqrt, log, exp, abs, min, max, "
            "clip, sin, cos … e.g. NDVI: (B - A) / (B + A)"))],
        output: Output,
        output_type: Annotated[OutputType, Field(description="Output data type; default Float32")] = None,
        nodata: Annotated[float | None, Field(description="Output nodata (default -9999)")] = None,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Band math over rasters on the same grid (like gdal_calc). The expression is checked against a safe
        whitelist (no attribute access, imports or arbitrary calls). Pixels that are nodata in any input used, or
        divide by zero, become nodata. Inputs on different grids are refused with the reprojection to do."""
        resolved = {}
        srcs = []
        for name, spec in inputs.items():
            src, band = band_input(spec, f"inputs[{name}]")
            srcs.append(src)
            resolved[name] = src.gdal_path + (f":{band}" if band is not None else "")
        job = jobs.CalcJob(inputs=resolved, expression=expression, output_type=output_type, nodata=nodata,
                           format=format, creation_options=creation_options)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=srcs, output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Polygonize raster", annotations=WRITE, tags={"raster", "vector", "analysis"}, writes=True)
    async def raster_polygonize(
        input: RasterInput,
        output: VectorOutput,
        band: Band = 1,
        mask: Annotated[str | None, Field(description="Raster of the same size: only its non-zero pixels are "
                                                      "polygonized")] = None,
        connectivity: Annotated[Literal[4, 8], Field(description="4: edge neighbours only; 8: also diagonal")] = 4,
        field: Annotated[str, Field(description="Name of the attribute holding the pixel value")] = "value",
        nodata_excluded: Annotated[bool, Field(description="Leave nodata pixels out (default)")] = True,
        format: VectorFormat = None,
        output_layer: Annotated[str | None, Field(description="Layer name; default from the file name")] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> VectorWriteResult:
        """Turn connected regions of equal pixel value into polygons with the value as an attribute (like
        gdal_polygonize). GDAL reads the band itself, so memory does not grow with the raster. Best on
        classified/categorical rasters; continuous data gives one polygon per pixel value run."""
        src = app.sandbox.resolve_input(input)
        inputs = [src]
        mask_path = optional_input(app, mask, "mask", inputs)
        job = jobs.PolygonizeJob(src=src.gdal_path, band=band, mask=mask_path, connectivity=connectivity, field=field,
                                 nodata_excluded=nodata_excluded, format=format, output_layer=output_layer)
        return await write_result(app, ctx, job, model=VectorWriteResult, inputs=inputs, output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Rasterize vector", annotations=WRITE, tags={"vector", "raster", "analysis"}, writes=True)
    async def vector_rasterize(
        input: VectorInput,
        output: Output,
        burn_value: Annotated[float | None, Field(description="Value burnt for every feature (or use attribute)")] = None,
        attribute: Annotated[str | None, Field(description="Numeric field whose value is burnt")] = None,
        like: Annotated[str | None, Field(description="Raster whose grid (CRS, extent, pixel size) is copied")] = None,
        resolution: Annotated[float | list[float] | None, Field(description=resolution_description(
            "crs (the layer's CRS by default)") + "; without like; not with size")] = None,
        size: Annotated[list[int] | None, Field(min_length=2, max_length=2, description="[width, height] (without "
                                                                                        "like)")] = None,
        bbox: GridBBox = None,
        bbox_crs: GridBBoxCRS = None,
        crs: Annotated[str | None, Field(description="Output CRS (without like); default the layer's")] = None,
        layer: Layer = None,
        where: Where = None,
        all_touched: Annotated[bool, Field(description="Burn every pixel a feature touches")] = False,
        invert: Annotated[bool, Field(description="Burn where there are no features")] = False,
        output_type: Annotated[OutputType, Field(description=(
            "Output data type; default the smallest that holds the burnt values"))] = None,
        nodata: Annotated[float | None, Field(description="Nodata value to declare (background pixels are 0 "
                                                          "unless nodata is given)")] = None,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Burn vector features into a raster (like gdal_rasterize): a fixed burn_value or a numeric attribute, on
        the grid of another raster (like=) or on a grid from resolution/size + bbox + crs. Written window by
        window, so large outputs do not need large memory."""
        src = app.sandbox.resolve_input(input)
        inputs = [src]
        like_path = optional_input(app, like, "like", inputs)
        if bbox is not None and bbox_crs is not None:
            raise GdalMcpError("unsupported", "vector_rasterize takes bbox in the output CRS (crs); bbox_crs is not "
                               "supported yet: give the bbox in the output CRS")
        job = jobs.RasterizeJob(
            src=src.gdal_path, layer=layer, where=where, burn_value=burn_value, attribute=attribute, like=like_path,
            resolution=resolution, size=size, bbox=as_bbox(bbox), crs=crs, all_touched=all_touched, invert=invert,
            dtype=output_type, nodata=nodata, format=format, creation_options=creation_options)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=inputs, output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Zonal statistics", annotations=WRITE, tags={"raster", "vector", "analysis"})
    async def zonal_stats(
        input: Annotated[str, Field(description="Raster with the values, relative to the workspace (dem.tif …)")],
        zones: Annotated[str, Field(description=(
            "Vector dataset with the zones (polygons; points and lines work too): zones.gpkg, districts.shp …"))],
        layer: Annotated[str | None, Field(description="Zones layer; required when the source has several")] = None,
        band: Band = 1,
        stats: Annotated[list[str] | None, Field(description=(
            "Statistics: count, min, max, mean, sum, std, median, majority, minority, unique, range, nodata, "
            "percentile_<q>; default count, min, max, mean, sum, std, median, majority"))] = None,
        all_touched: Annotated[bool, Field(description="Count every pixel a zone touches, not only pixel centres "
                                                       "inside")] = False,
        id_field: Annotated[str | None, Field(description="Zone attribute used as row id (default: feature index)")] = None,
        output: OptionalVectorOutput = None,
        format: VectorFormat = None,
        limit: Annotated[int, Field(ge=1, le=10000, description="Most rows returned in the answer")] = 200,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> ZonalResult:
        """Statistics of a raster under each zone polygon (zones reprojected to the raster's CRS; the raster is
        never resampled), returned as a bounded table and optionally written as a vector file. Reads only the
        raster window under each zone."""
        r = app.sandbox.resolve_input(input)
        z = app.sandbox.resolve_input(zones, what="zones")
        job = jobs.ZonalJob(raster=r.gdal_path, zones=z.gdal_path, layer=layer, band=band, stats=stats,
                            all_touched=all_touched, id_field=id_field, limit=limit, format=format)
        if output is None:
            result, warnings = await app.execute(job, ctx=ctx)
            return app.scrub_model(result)
        app.require_writable("zonal_stats output")
        target, result, warnings = await write_output(app, ctx, job, inputs=[r, z], output=output,
                                                      overwrite=overwrite)
        result.warnings = warnings
        return result

