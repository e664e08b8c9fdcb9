"""Raster processing tools: the classic GDAL utilities (gdal_translate, gdalwarp, gdalbuildvrt …)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import OverviewsResult, RasterStatsResult, RasterWriteResult, Resampling, SampleResult, TableWriteResult
from gdal_mcp.tools._base import MODIFY, READ, WRITE, gdal_tool, optional_input, write_output, write_result

Input = Annotated[str, Field(description="Raster to read: workspace path, or /vsizip/a.zip/f.tif, NETCDF:\"f.nc\":var …")]
Output = Annotated[str, Field(description="File to write, relative to the workspace; the extension picks the format "
                                          "unless format= is given (.tif GTiff, .png, .jpg, .nc, .gpkg, .vrt)")]
Overwrite = Annotated[bool, Field(description="Replace the output if it exists (default false: refuse)")]
Format = Annotated[str | None, Field(description="GDAL driver short name: GTiff, COG, PNG, JPEG, netCDF, GPKG, VRT …; "
                                                 "default from the output extension")]
CreationOptions = Annotated[dict[str, str | int | float | bool] | None,
                            Field(description='GDAL creation options, e.g. {"COMPRESS": "DEFLATE", "TILED": "YES"}')]
CRS = Annotated[str, Field(description="EPSG:4326, 4326, OGC:CRS84, a PROJ string or WKT")]
OptionalCRS = Annotated[str | None, Field(description="EPSG:4326, 4326, OGC:CRS84, a PROJ string or WKT")]
BBox = Annotated[list[float] | None, Field(min_length=4, max_length=4, description="[minx, miny, maxx, maxy]")]
Nodata = Annotated[float | None, Field(description="Nodata value to set on the output")]
ResamplingArg = Annotated[Resampling, Field(description="nearest for categorical data; bilinear/cubic/lanczos for "
                                                        "continuous data; average/mode when shrinking a lot")]


def register(mcp: Any, app: App) -> None:
    threads = app.settings.workers

    @gdal_tool(mcp, app, title="Convert raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_convert(
        input: Input,
        output: Output,
        format: Format = None,
        creation_options: CreationOptions = None,
        bands: Annotated[list[int] | None, Field(description="Bands to keep, in this order (1-based); default all")] = None,
        projwin: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                     description="Subset [minx, miny, maxx, maxy] (whole pixels)")] = None,
        projwin_crs: Annotated[str | None, Field(description="CRS of projwin; default the raster's")] = None,
        output_type: Annotated[str | None, Field(description="Byte, Int16, UInt16, Int32, Float32, Float64 …; "
                                                             "values are rounded and clamped as GDAL does")] = None,
        nodata: Nodata = None,
        scale: Annotated[bool | list[float] | None, Field(
            description="Rescale values linearly: true (source min/max to 0-255), [src_min, src_max] (to 0-255) "
                        "or [src_min, src_max, dst_min, dst_max]")] = None,
        resampling: Annotated[Resampling | None, Field(
            description="Overview resampling for format=COG: nearest (categorical), average/bilinear/cubic "
                        "(continuous); default GDAL's (nearest for paletted, else cubic)")] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Convert a raster to another format or subset it (like gdal_translate). format="COG" writes a Cloud
        Optimized GeoTIFF with overviews (add creation_options such as COMPRESS=DEFLATE,
        OVERVIEW_RESAMPLING=AVERAGE). Also selects/reorders bands, cuts a projwin, changes the data type,
        sets nodata and rescales values. Does not reproject: use raster_reproject for that."""
        src = app.sandbox.resolve_input(input)
        return await write_result(app, ctx, "gdal_mcp.engine.raster.convert:convert", {
            "src": src.gdal_path, "format": format, "options": creation_options, "bands": bands,
            "projwin": tuple(projwin) if projwin else None, "projwin_crs": projwin_crs, "output_type": output_type,
            "nodata": nodata, "scale": scale, "resampling": resampling, "threads": threads,
        }, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Reproject raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_reproject(
        input: Input,
        output: Output,
        dst_crs: CRS,
        src_crs: Annotated[str | None, Field(description="Override the input's CRS (or give one it lacks)")] = None,
        resampling: ResamplingArg = "nearest",
        resolution: Annotated[float | list[float] | None, Field(
            description="Output pixel size in target CRS units: one number or [xres, yres]; not with size")] = None,
        size: Annotated[list[int] | None, Field(min_length=2, max_length=2,
                                                description="Output [width, height] in pixels; not with resolution")] = None,
        bbox: BBox = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default dst_crs")] = None,
        nodata: Nodata = None,
        target_aligned_pixels: Annotated[bool, Field(description="Align the extent to multiples of resolution "
                                                                 "(gdalwarp -tap); needs resolution")] = False,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Reproject a raster to another CRS (like gdalwarp). Keeps the whole source extent unless bbox is given;
        the resolution defaults to GDAL's suggestion. Use nearest (default) for categorical data (land cover,
        classes), bilinear or cubic for continuous data (elevation, reflectance). Streamed and multi-threaded."""
        src = app.sandbox.resolve_input(input)
        return await write_result(app, ctx, "gdal_mcp.engine.raster.warp:reproject", {
            "src": src.gdal_path, "dst_crs": dst_crs, "src_crs": src_crs, "resampling": resampling,
            "resolution": resolution, "size": size, "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs,
            "nodata": nodata, "target_aligned_pixels": target_aligned_pixels, "format": format,
            "options": creation_options, "threads": threads,
        }, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Mosaic rasters", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_mosaic(
        inputs: Annotated[list[str], Field(min_length=1, max_length=10000,
                                           description="Rasters to combine, in order: later ones win where they overlap")],
        output: Output,
        resolution: Annotated[Literal["highest", "lowest", "average"] | list[float], Field(
            description="Output pixel size: highest, lowest, average of the inputs, or [xres, yres]")] = "highest",
        separate: Annotated[bool, Field(description="Stack the inputs' bands instead of mosaicking them")] = False,
        dst_crs: Annotated[str | None, Field(description="Output CRS; default the first input's. Inputs in other "
                                                         "CRSs are warped to it")] = None,
        resampling: ResamplingArg = "nearest",
        nodata: Nodata = None,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Combine many rasters into one (like gdalbuildvrt + gdal_translate, or gdal_merge). format="VRT" (or a
        .vrt output) writes a virtual mosaic that references the inputs instead of copying pixels. Inputs'
        nodata pixels never cover data from earlier inputs."""
        srcs = [app.sandbox.resolve_input(p, what=f"inputs[{i}]") for i, p in enumerate(inputs)]
        return await write_result(app, ctx, "gdal_mcp.engine.raster.mosaic:mosaic", {
            "inputs": [s.gdal_path for s in srcs], "resolution": resolution,
            "separate": separate, "dst_crs": dst_crs, "resampling": resampling, "nodata": nodata, "format": format,
            "options": creation_options, "threads": threads,
        }, model=RasterWriteResult, inputs=srcs, output=output, overwrite=overwrite,
                                  final_dir_arg="vrt_dir")

    @gdal_tool(mcp, app, title="Clip raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_clip(
        input: Input,
        output: Output,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                  description="Clip to [minx, miny, maxx, maxy] (whole pixels)")] = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default the raster's")] = None,
        geometry: Annotated[dict[str, Any] | None, Field(
            description="Clip to a GeoJSON geometry, Feature or FeatureCollection (polygons)")] = None,
        geometry_crs: Annotated[str | None, Field(description="CRS of geometry; default EPSG:4326 as GeoJSON says")] = None,
        mask: Annotated[str | None, Field(description="Clip to the polygons of a vector file in the workspace; "
                                                      "reprojected to the raster's CRS")] = None,
        mask_layer: Annotated[str | None, Field(description="Layer of mask (required when it has several)")] = None,
        mask_where: Annotated[str | None, Field(description="Attribute filter on mask, e.g. \"name = 'Bahamas'\"")] = None,
        crop: Annotated[bool, Field(description="Shrink the output to the clip extent (false keeps the full grid)")] = True,
        all_touched: Annotated[bool, Field(description="Keep every pixel the shape touches, not only those whose "
                                                       "centre is inside")] = False,
        nodata: Annotated[float | None, Field(description="Value for pixels outside the shape; default the "
                                                          "input's nodata, else 0 (integers) or NaN (floats)")] = None,
        format: Format = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Clip a raster by a bbox, a GeoJSON geometry or a vector mask file (like gdalwarp -cutline
        -crop_to_cutline or rasterio.mask). Give exactly one of bbox, geometry, mask. Pixels keep their values and
        grid (no resampling); pixels outside the shape become nodata. Streamed window by window."""
        src = app.sandbox.resolve_input(input)
        inputs = [src]
        mask_path = optional_input(app, mask, "mask", inputs)
        return await write_result(app, ctx, "gdal_mcp.engine.raster.clip:clip", {
            "src": src.gdal_path, "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs, "geometry": geometry,
            "geometry_crs": geometry_crs, "mask": mask_path, "mask_layer": mask_layer, "mask_where": mask_where,
            "crop": crop, "all_touched": all_touched, "nodata": nodata, "format": format,
            "creation_options": creation_options,
        }, model=RasterWriteResult, inputs=inputs, output=output, overwrite=overwrite)

    @gdal_tool(mcp, app, title="Raster overviews", annotations=MODIFY, tags={"raster"})
    async def raster_overviews(
        input: Annotated[str, Field(description="GeoTIFF (or other updatable raster) in the workspace")],
        action: Annotated[Literal["add", "delete", "list"], Field(
            description="list (read only), add or delete overviews; add/delete modify the input in place")] = "list",
        levels: Annotated[Literal["auto"] | list[int], Field(
            description='"auto" (halve until <= 256 px, like gdaladdo) or factors such as [2, 4, 8, 16]')] = "auto",
        resampling: Annotated[str, Field(description="nearest (categorical), average, bilinear, cubic, lanczos, "
                                                     "mode, gauss, rms …")] = "nearest",
        ctx: Context | None = None,
    ) -> OverviewsResult:
        """List, build or remove the internal overviews (pyramids) of a raster, like gdaladdo. Overviews make
        zoomed-out display and previews fast. add/delete rewrite the input in place (atomically: a failed or
        cancelled job leaves it untouched) and are refused on a read-only server. A COG cannot be changed in
        place: make a new one with raster_convert format=COG."""
        src = app.sandbox.resolve_input(input)
        if action == "list":
            result = await app.execute("gdal_mcp.engine.raster.overviews:overviews",
                                       {"path": src.gdal_path, "action": "list"}, ctx=ctx, quick=True)
            result = app.scrub_model(result)
            result.path = src.display
            return result
        app.require_writable("raster_overviews")
        if src.network or len(src.files) != 1 or src.gdal_path != str(src.files[0]):
            raise GdalMcpError("unsupported", f"{input} is not a plain workspace file; overviews can only be "
                               "changed on files (convert it to GTiff first)")
        target, result, _ = await write_output(app, ctx, "gdal_mcp.engine.raster.overviews:overviews_on_copy", {
            "src": src.gdal_path, "action": action, "levels": levels, "resampling": resampling,
        }, inputs=[], output=src.display, overwrite=True)
        if action == "delete":
            stale = target.final.with_name(target.final.name + ".ovr")
            if stale.exists() and not result.levels:
                stale.unlink()  # external overviews removed on the copy must not come back from the old .ovr
        result.path = target.display
        return result

    @gdal_tool(mcp, app, title="Raster statistics", annotations=READ, tags={"raster"})
    async def raster_stats(
        input: Input,
        bands: Annotated[list[int] | None, Field(description="Bands (1-based); default all")] = None,
        percentiles: Annotated[list[float] | None, Field(
            max_length=100, description="Exact percentiles to compute, 0-100; default [2, 25, 50, 75, 98]")] = None,
        histogram_bins: Annotated[int | None, Field(ge=1, le=10000, description="Also return an equal-width histogram "
                                                                              "over [min, max] with this many bins")] = None,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                  description="Only pixels in [minx, miny, maxx, maxy]")] = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default the raster's")] = None,
        ctx: Context | None = None,
    ) -> RasterStatsResult:
        """Exact statistics of a raster's pixels per band: min, max, mean, std, sum, valid and nodata counts,
        exact percentiles (numpy's linear definition) and an optional histogram; honours nodata, NaN and masks.
        Computed from the pixels, streamed (never the possibly stale values stored in the file)."""
        src = app.sandbox.resolve_input(input)
        result = await app.execute("gdal_mcp.engine.raster.stats:raster_stats", {
            "path": src.gdal_path, "bands": bands, "percentiles": percentiles, "histogram_bins": histogram_bins,
            "bbox": tuple(bbox) if bbox else None, "bbox_crs": bbox_crs,
        }, ctx=ctx)
        result = app.scrub_model(result)
        result.path = src.display
        return result

    @gdal_tool(mcp, app, title="Sample raster at points", annotations=READ, tags={"raster"})
    async def raster_sample(
        input: Input,
        points: Annotated[list[Annotated[list[float], Field(min_length=2, max_length=2)]], Field(
            min_length=1, max_length=10000, description="Points as [[x, y], …] (lon/lat order for geographic CRSs)")],
        points_crs: Annotated[str | None, Field(description="CRS of points; default the raster's "
                                                            "(use EPSG:4326 for lon/lat)")] = None,
        bands: Annotated[list[int] | None, Field(description="Bands (1-based); default all")] = None,
        ctx: Context | None = None,
    ) -> SampleResult:
        """Pixel values at coordinates (like gdallocationinfo): row/col and one value per band for each point;
        nodata is null and points outside the raster say inside=false. At most 10000 points."""
        src = app.sandbox.resolve_input(input)
        result = await app.execute("gdal_mcp.engine.raster.sample:sample", {
            "path": src.gdal_path, "points": [tuple(p) for p in points], "points_crs": points_crs, "bands": bands,
        }, ctx=ctx, quick=len(points) <= 100)
        result = app.scrub_model(result)
        result.path = src.display
        return result

    @gdal_tool(mcp, app, title="Raster to XYZ", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_to_xyz(
        input: Input,
        output: Annotated[str, Field(description="CSV file to write, relative to the workspace")],
        bands: Annotated[list[int] | None, Field(description="Bands as value columns (1-based); default all")] = None,
        skip_nodata: Annotated[bool, Field(description="Leave out pixels that are nodata in every band")] = True,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4,
                                                  description="Only pixels in [minx, miny, maxx, maxy]")] = None,
        bbox_crs: Annotated[str | None, Field(description="CRS of bbox; default the raster's")] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> TableWriteResult:
        """Write pixel centres and values as CSV (like gdal2xyz -csv): header x,y,band_1,…, one row per pixel.
        Streamed; large rasters give very large files, so prefer a bbox."""
        src = app.sandbox.resolve_input(input)
        target, table, warnings = await write_output(app, ctx, "gdal_mcp.engine.raster.xyz:to_xyz", {
            "src": src.gdal_path, "bands": bands, "skip_nodata": skip_nodata, "bbox": tuple(bbox) if bbox else None,
            "bbox_crs": bbox_crs,
        }, inputs=[src], output=output, overwrite=overwrite)
        return TableWriteResult(output=target.display, uri=app.sandbox.uri(target.display), rows=table["rows"],
                                columns=table["columns"], file_size=target.final.stat().st_size, warnings=warnings)
