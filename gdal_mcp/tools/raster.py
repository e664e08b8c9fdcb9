"""Raster processing tools: the classic GDAL utilities (gdal_translate, gdalwarp, gdalbuildvrt …)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.app import App
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import OverviewsResult, RasterStatsResult, RasterWriteResult, SampleResult, TableWriteResult
from gdal_mcp.tools._base import MODIFY, READ, WRITE, gdal_tool, optional_input, read_result, write_output, write_result
from gdal_mcp.tools.params import (
    Bands,
    BBox,
    BBoxCRS,
    CreationOptions,
    CsvOutput,
    DstCRS,
    GridBBox,
    GridBBoxCRS,
    InputPattern,
    MosaicFormat,
    MosaicOutput,
    Nodata,
    OutputType,
    OverviewResampling,
    Overwrite,
    RasterFormat,
    RasterInput,
    RasterOutput,
    ResamplingParam,
    Resolution,
    Size,
    SrcCRS,
    as_bbox,
)


def register(mcp: Any, app: App) -> None:
    threads = app.settings.workers

    @gdal_tool(mcp, app, title="Convert raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_convert(
        input: RasterInput,
        output: RasterOutput,
        format: RasterFormat = None,
        creation_options: CreationOptions = None,
        bands: Annotated[list[int] | None, Field(description="Bands to keep, in this order (1-based); default all")] = None,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4, description=(
            "Subset [minx, miny, maxx, maxy] in bbox_crs (default: the raster's CRS), whole pixels "
            "(gdal_translate -projwin)"))] = None,
        bbox_crs: BBoxCRS = None,
        output_type: OutputType = None,
        nodata: Nodata = None,
        scale: Annotated[bool | list[float] | None, Field(
            description="Rescale values linearly: true (source min/max to 0-255), [src_min, src_max] (to 0-255) "
                        "or [src_min, src_max, dst_min, dst_max]")] = None,
        overview_resampling: Annotated[OverviewResampling | None, Field(
            description="Overview resampling for format=COG: nearest (categorical), average/bilinear/cubic "
                        "(continuous); default GDAL's (nearest for paletted, else cubic)")] = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Convert a raster to another format or subset it (like gdal_translate). format="COG" writes a Cloud
        Optimized GeoTIFF with overviews (add creation_options such as COMPRESS=DEFLATE,
        OVERVIEW_RESAMPLING=AVERAGE). Also selects/reorders bands, cuts a bbox, changes the data type,
        sets nodata and rescales values. Keeps GCPs. Does not reproject: use raster_reproject for that."""
        src = app.sandbox.resolve_input(input)
        job = jobs.ConvertRasterJob(
            src=src.gdal_path, format=format, options=creation_options, bands=bands,
            projwin=as_bbox(bbox), projwin_crs=bbox_crs, output_type=output_type, nodata=nodata, scale=scale,
            resampling=overview_resampling, threads=threads)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Reproject raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_reproject(
        input: RasterInput,
        output: RasterOutput,
        dst_crs: DstCRS,
        src_crs: SrcCRS = None,
        resampling: ResamplingParam = "nearest",
        resolution: Resolution = None,
        size: Size = None,
        bbox: GridBBox = None,
        bbox_crs: GridBBoxCRS = None,
        nodata: Annotated[float | None, Field(description=(
            "Nodata value of the output, also used for the margins outside the source; default the input's"))] = None,
        target_aligned_pixels: Annotated[bool, Field(description="Align the extent to multiples of resolution "
                                                                 "(gdalwarp -tap); needs resolution")] = False,
        format: RasterFormat = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Reproject a raster to another CRS (like gdalwarp). Keeps the whole source extent unless bbox is given;
        the resolution defaults to GDAL's suggestion. Use nearest (default) for categorical data (land cover,
        classes), bilinear or cubic for continuous data (elevation, reflectance). Streamed and multi-threaded."""
        src = app.sandbox.resolve_input(input)
        job = jobs.ReprojectRasterJob(
            src=src.gdal_path, dst_crs=dst_crs, src_crs=src_crs, resampling=resampling, resolution=resolution,
            size=size, bbox=as_bbox(bbox), bbox_crs=bbox_crs, nodata=nodata,
            target_aligned_pixels=target_aligned_pixels, format=format, options=creation_options, threads=threads)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Mosaic rasters", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_mosaic(
        output: MosaicOutput,
        inputs: Annotated[list[str] | None, Field(min_length=1, max_length=10000, description=(
            "Rasters to combine, in order: later ones win where they overlap (or give input_pattern)"))] = None,
        input_pattern: InputPattern = None,
        resolution: Annotated[Literal["highest", "lowest", "average"] | list[float], Field(description=(
            "Output pixel size: average (default, as gdalbuildvrt), highest, lowest of the inputs, or [xres, yres] "
            "in the units of dst_crs"))] = "average",
        separate: Annotated[bool, Field(description="Stack the inputs' bands instead of mosaicking them")] = False,
        dst_crs: Annotated[str | None, Field(description="Output CRS; default the first input's. Inputs in other "
                                                         "CRSs are warped to it")] = None,
        resampling: ResamplingParam = "nearest",
        nodata: Nodata = None,
        format: MosaicFormat = None,
        creation_options: CreationOptions = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> RasterWriteResult:
        """Combine many rasters into one (like gdalbuildvrt + gdal_translate, or gdal_merge). format="VRT" (or a
        .vrt output) writes a virtual mosaic that references the inputs instead of copying pixels. Inputs'
        nodata pixels never cover data from earlier inputs. Give inputs, or input_pattern (a glob such as
        'tiles/*.tif')."""
        srcs = app.sandbox.resolve_inputs(inputs, input_pattern)
        job = jobs.MosaicJob(
            inputs=[s.gdal_path for s in srcs], resolution=resolution, separate=separate, dst_crs=dst_crs,
            resampling=resampling, nodata=nodata, format=format, options=creation_options, threads=threads)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=srcs, output=output,
                                  overwrite=overwrite, final_dir_arg="vrt_dir")

    @gdal_tool(mcp, app, title="Clip raster", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_clip(
        input: RasterInput,
        output: RasterOutput,
        bbox: Annotated[list[float] | None, Field(min_length=4, max_length=4, description=(
            "Clip to [minx, miny, maxx, maxy] in bbox_crs (default: the raster's CRS), whole pixels"))] = None,
        bbox_crs: BBoxCRS = None,
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
        nodata: Annotated[float | None, Field(description=(
            "Value for pixels outside the shape; default the input's nodata; without one, floats use NaN and "
            "integers a mask band (no kept value is ever declared nodata)"))] = None,
        format: RasterFormat = None,
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
        job = jobs.ClipRasterJob(
            src=src.gdal_path, bbox=as_bbox(bbox), bbox_crs=bbox_crs, geometry=geometry, geometry_crs=geometry_crs,
            mask=mask_path, mask_layer=mask_layer, mask_where=mask_where, crop=crop, all_touched=all_touched,
            nodata=nodata, format=format, creation_options=creation_options)
        return await write_result(app, ctx, job, model=RasterWriteResult, inputs=inputs, output=output,
                                  overwrite=overwrite)

    @gdal_tool(mcp, app, title="Raster overviews", annotations=MODIFY, tags={"raster"}, writes=True)
    async def raster_overviews(
        input: Annotated[str, Field(description="GeoTIFF (or other updatable raster) in the workspace")],
        action: Annotated[Literal["add", "delete"], Field(
            description="add (default) or delete overviews; both modify the input in place. raster_info lists the "
                        "overviews a raster has")] = "add",
        levels: Annotated[Literal["auto"] | list[int], Field(
            description='"auto" (halve until <= 256 px, like gdaladdo) or factors such as [2, 4, 8, 16]')] = "auto",
        resampling: Annotated[OverviewResampling, Field(description=(
            "nearest (categorical, default), average/bilinear/cubic/lanczos (continuous), mode, gauss, rms"))] = "nearest",
        ctx: Context | None = None,
    ) -> OverviewsResult:
        """Build or remove the internal overviews (pyramids) of a raster, like gdaladdo. Overviews make
        zoomed-out display and previews fast. Rewrites the input in place (atomically: a failed or
        cancelled job leaves it untouched); refused on a read-only server. A COG cannot be changed in
        place: make a new one with raster_convert format=COG."""
        src = app.sandbox.resolve_input(input)
        if src.network or len(src.files) != 1 or src.gdal_path != str(src.files[0]):
            raise GdalMcpError("unsupported", f"{input} is not a plain workspace file; overviews can only be "
                               "changed on files (convert it to GTiff first)")
        job = jobs.OverviewsJob(src=src.gdal_path, action=action, levels=levels, resampling=resampling)
        target, result, _ = await write_output(app, ctx, job, inputs=[], output=src.display, overwrite=True)
        if action == "delete":
            stale = target.final.with_name(target.final.name + ".ovr")
            if stale.exists() and not result.levels:
                stale.unlink()  # external overviews removed on the copy must not come back from the old .ovr
        result.path = target.display
        return result

    @gdal_tool(mcp, app, title="Raster statistics", annotations=READ, tags={"raster"})
    async def raster_stats(
        input: RasterInput,
        bands: Bands = None,
        percentiles: Annotated[list[float] | None, Field(
            max_length=100, description="Exact percentiles to compute, 0-100; default [2, 25, 50, 75, 98]")] = None,
        histogram_bins: Annotated[int | None, Field(ge=1, le=10000, description="Also return an equal-width histogram "
                                                                              "over [min, max] with this many bins")] = None,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        ctx: Context | None = None,
    ) -> RasterStatsResult:
        """Exact statistics of a raster's pixels per band: min, max, mean, std, sum, valid and nodata counts,
        exact percentiles (numpy's linear definition) and an optional histogram; honours nodata, NaN and masks.
        Computed from the pixels, streamed (never the possibly stale values stored in the file)."""
        src = app.sandbox.resolve_input(input)
        job = jobs.RasterStatsJob(path=src.gdal_path, bands=bands, percentiles=percentiles,
                                  histogram_bins=histogram_bins, bbox=as_bbox(bbox), bbox_crs=bbox_crs)
        return await read_result(app, ctx, job, display=src.display)

    @gdal_tool(mcp, app, title="Sample raster at points", annotations=READ, tags={"raster"})
    async def raster_sample(
        input: RasterInput,
        points: Annotated[list[Annotated[list[float], Field(min_length=2, max_length=2)]], Field(
            min_length=1, max_length=10000, description="Points as [[x, y], …] (lon/lat order for geographic CRSs)")],
        points_crs: Annotated[str | None, Field(description="CRS of points; default the raster's "
                                                            "(use EPSG:4326 for lon/lat)")] = None,
        bands: Bands = None,
        ctx: Context | None = None,
    ) -> SampleResult:
        """Pixel values at coordinates (like gdallocationinfo): row/col and one value per band for each point;
        nodata is null and points outside the raster say inside=false. At most 10000 points."""
        src = app.sandbox.resolve_input(input)
        job = jobs.SampleJob(path=src.gdal_path, points=[(p[0], p[1]) for p in points], points_crs=points_crs,
                             bands=bands)
        return await read_result(app, ctx, job, display=src.display, quick=len(points) <= 100)

    @gdal_tool(mcp, app, title="Raster to XYZ", annotations=WRITE, tags={"raster"}, writes=True)
    async def raster_to_xyz(
        input: RasterInput,
        output: CsvOutput,
        bands: Annotated[list[int] | None, Field(description="Bands as value columns (1-based); default all")] = None,
        skip_nodata: Annotated[bool, Field(description="Leave out pixels that are nodata in every band")] = True,
        bbox: BBox = None,
        bbox_crs: BBoxCRS = None,
        overwrite: Overwrite = False,
        ctx: Context | None = None,
    ) -> TableWriteResult:
        """Write pixel centres and values as CSV (like gdal2xyz -csv): header x,y,band_1,…, one row per pixel.
        Streamed; large rasters give very large files, so prefer a bbox."""
        src = app.sandbox.resolve_input(input)
        job = jobs.XyzJob(src=src.gdal_path, bands=bands, skip_nodata=skip_nodata, bbox=as_bbox(bbox),
                          bbox_crs=bbox_crs)
        target, table, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
        return TableWriteResult(output=target.display, uri=app.sandbox.uri(target.display), rows=table["rows"],
                                columns=table["columns"], file_size=target.final.stat().st_size, warnings=warnings)
