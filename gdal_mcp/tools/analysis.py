"""Analysis tools: terrain (gdaldem), band math, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterWriteResult, VectorWriteResult
from gdal_mcp.tools._base import WRITE, gdal_tool, write_output
from gdal_mcp.tools.raster import CreationOptions, Format, Output, Overwrite

BAND_SUFFIX = re.compile(r"^(.*):(\d+)$", re.S)


def register(mcp: Any, app: App) -> None:
    threads = app.settings.workers

    async def raster_out(ctx: Any, func: str, kwargs: dict[str, Any], *, inputs: list[Any], output: str,
                         overwrite: bool) -> RasterWriteResult:
        target, summary, warnings = await write_output(app, ctx, func, kwargs, inputs=inputs, output=output,
                                                       overwrite=overwrite)
        return RasterWriteResult(output=target.display, uri=app.sandbox.uri(target.display), summary=summary,
                                 warnings=warnings)

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
        input: Annotated[str, Field(description="DEM (elevation raster) in the workspace")],
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
        return await raster_out(ctx, "gdal_mcp.engine.raster.terrain:terrain", {
            "src": src.gdal_path, "product": product, "band": band, "z_factor": z_factor, "azimuth": azimuth,
            "altitude": altitude, "slope_units": slope_units, "scale": scale, "compute_edges": compute_edges,
            "format": format, "creation_options": creation_options,
        }, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Raster calculator", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
    async def raster_calc(
        inputs: Annotated[dict[str, str], Field(
            min_length=1, max_length=26,
            description='Name -> raster, optionally ":band", e.g. {"A": "red.tif", "B": "landsat.tif:4"}')],
        expression: Annotated[str, Field(max_length=2000, description=(
            "Band math on the names: + - * / ** comparisons, & | ~, where(c, a, b), sqrt, log, exp, abs, min, max, "
            "clip, sin, cos … e.g. NDVI: (B - A) / (B + A)"))],
        output: Output,
        output_type: Annotated[str | None, Field(description="Float32 (default), Float64, Int16, Byte …")] = None,
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
        return await raster_out(ctx, "gdal_mcp.engine.raster.calc:calc", {
            "inputs": resolved, "expression": expression, "output_type": output_type, "nodata": nodata,
            "format": format, "creation_options": creation_options,
        }, inputs=srcs, output=output, overwrite=overwrite)

    del threads  # the analysis engines choose their own threading
    _ = VectorWriteResult
