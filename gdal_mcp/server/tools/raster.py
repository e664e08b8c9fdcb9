"""Raster processing tools: the classic GDAL utilities (gdal_translate, gdalwarp, gdalbuildvrt …)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import BaseModel, ConfigDict, Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import (
    OverviewsResult,
    RasterClipResult,
    RasterStatsResult,
    RasterWriteResult,
    Resampling,
    SampleResult,
    TableWriteResult,
)
from gdal_mcp.server.app import App
from gdal_mcp.server.results import (
    drop_object_side_files,
    is_object,
    optional_input,
    read_result,
    resolve_inputs,
    unchangeable,
    write_output,
    write_result,
)
from gdal_mcp.server.tools.params import (
    CRS_FORMS,
    Band,
    Bands,
    BBox,
    BBoxCRS,
    CreationOptions,
    CrsCheck,
    CsvOutput,
    GeometryCRS,
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
    Thresholds,
    VectorFormat,
    as_bbox,
    resolution_description,
)
from gdal_mcp.server.tools.registry import MODIFY, READ, WRITE, tool


class ReclassRange(BaseModel):
    """One range of raster_reclassify: [min, max) -> value."""

    model_config = ConfigDict(extra="forbid")
    min: float | None = Field(None, description="Lower bound (inclusive); null: open-ended")
    max: float | None = Field(None, description="Upper bound (exclusive; the last range's is inclusive); null: open-ended")
    value: float = Field(description="New value for pixels in the range")


@tool(title="Convert raster", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_convert(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    bands: Annotated[list[int] | None, Field(description="Bands to keep, in this order (1-based); default all")] = None,
    bbox: Annotated[
        list[float] | None,
        Field(
            min_length=4,
            max_length=4,
            description=(
                "Subset [minx, miny, maxx, maxy] in bbox_crs (default: the raster's CRS), whole pixels (gdal_translate -projwin)"
            ),
        ),
    ] = None,
    bbox_crs: BBoxCRS = None,
    output_type: OutputType = None,
    nodata: Nodata = None,
    scale: Annotated[
        bool | list[float] | None,
        Field(
            description="Rescale values linearly: true (source min/max to 0-255), [src_min, src_max] (to 0-255) "
            "or [src_min, src_max, dst_min, dst_max]"
        ),
    ] = None,
    resolution: Annotated[
        float | list[float] | None,
        Field(description=resolution_description("the input's CRS") + " (gdal_translate -tr); not with size"),
    ] = None,
    size: Size = None,
    resampling: Annotated[
        Resampling,
        Field(
            description=(
                "How to resample with resolution/size (gdal_translate -r): nearest for categorical data, "
                "bilinear/cubic/lanczos for continuous data, average/mode when shrinking a lot"
            )
        ),
    ] = "nearest",
    overview_resampling: Annotated[
        OverviewResampling | None,
        Field(
            description="Overview resampling for format=COG: nearest (categorical), average/bilinear/cubic "
            "(continuous); default GDAL's (nearest for paletted, else cubic)"
        ),
    ] = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Convert a raster to another format or subset it (like gdal_translate). format="COG" writes a Cloud
    Optimized GeoTIFF with overviews (add creation_options such as COMPRESS=DEFLATE,
    OVERVIEW_RESAMPLING=AVERAGE). Also selects/reorders bands, cuts a bbox, changes the data type,
    sets nodata and rescales values, and resamples to a resolution or size without reprojecting. Keeps GCPs and
    RPCs. Does not reproject: use raster_reproject for that."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ConvertRasterJob(
        src=src.gdal_path,
        format=format,
        options=creation_options,
        bands=bands,
        projwin=as_bbox(bbox),
        projwin_crs=bbox_crs,
        output_type=output_type,
        nodata=nodata,
        scale=scale,
        resolution=resolution,
        size=size,
        resampling=resampling,
        overview_resampling=overview_resampling,
        threads=app.gdal_threads(),
        max_pixels=app.settings.max_pixels,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Reproject raster", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_reproject(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    dst_crs: Annotated[
        str | None,
        CrsCheck,
        Field(description=(f"Target CRS: {CRS_FORMS}; default the input's (then give resolution or size to resample, or like)")),
    ] = None,
    like: Annotated[
        str | None,
        Field(
            description=(
                "A raster whose grid (CRS, extent, pixel size) the output takes, e.g. to line rasters up before band "
                "math (gdalwarp -t_srs -te -ts from it); not with dst_crs, resolution, size, bbox"
            )
        ),
    ] = None,
    src_crs: SrcCRS = None,
    resampling: ResamplingParam = "nearest",
    resolution: Resolution = None,
    size: Size = None,
    bbox: GridBBox = None,
    bbox_crs: GridBBoxCRS = None,
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Nodata value of the output, also used for the margins outside the source; default the input's, else "
                "(margins to mark) NaN for floats or a value no input pixel takes (warnings say which)"
            )
        ),
    ] = None,
    src_nodata: Annotated[
        float | None,
        Field(description=("Nodata value of the input (gdalwarp -srcnodata): pixels with it are not used; default the input's")),
    ] = None,
    output_type: OutputType = None,
    gcp_transformer: Annotated[
        Literal["polynomial", "polynomial_1", "polynomial_2", "polynomial_3", "tps", "rpc"] | None,
        Field(
            description=(
                "For inputs georeferenced by GCPs or RPCs (raster_info shows them): polynomial (order from the GCP count), "
                "polynomial_1..3 (gdalwarp -order n), tps (thin plate spline, gdalwarp -tps) or rpc (gdalwarp -rpc); "
                "default: rpc if the input has RPCs and no geotransform, else its GCPs, polynomial"
            )
        ),
    ] = None,
    target_aligned_pixels: Annotated[
        bool, Field(description="Align the extent to multiples of resolution (gdalwarp -tap); needs resolution")
    ] = False,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Reproject or resample a raster (like gdalwarp): to dst_crs, onto the grid of another raster (like=), or
    to a new resolution/size in its own CRS. Keeps the whole source extent unless bbox is given; the resolution
    defaults to GDAL's suggestion. Warps GCP- and RPC-georeferenced rasters (scanned maps, Sentinel-1, satellite
    scenes) onto a map grid. Use nearest (default) for categorical data (land cover, classes), bilinear or cubic
    for continuous data (elevation, reflectance). Keeps compression and band metadata; warns outside the target CRS's area
    of use, and of a ballpark datum shift. Multi-threaded by tiles, each within GDAL's 0.125-pixel warp tolerance."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    like_path = optional_input(app, like, "like", inputs)
    job = jobs.ReprojectRasterJob(
        src=src.gdal_path,
        dst_crs=dst_crs,
        src_crs=src_crs,
        resampling=resampling,
        resolution=resolution,
        size=size,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        nodata=nodata,
        src_nodata=src_nodata,
        output_type=output_type,
        like=like_path,
        gcp_transformer=gcp_transformer,
        target_aligned_pixels=target_aligned_pixels,
        format=format,
        options=creation_options,
        threads=app.gdal_threads(),
        max_pixels=app.settings.max_pixels,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=inputs, output=output, overwrite=overwrite)


@tool(title="Mosaic rasters", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_mosaic(
    app: App,
    output: MosaicOutput,
    inputs: Annotated[
        list[str] | None,
        Field(
            min_length=1,
            max_length=10000,
            description=("Rasters to combine, in order: later ones win where they overlap (or give input_pattern)"),
        ),
    ] = None,
    input_pattern: InputPattern = None,
    resolution: Annotated[
        Literal["highest", "lowest", "average"] | list[float],
        Field(
            description=(
                "Output pixel size: average (default, as gdalbuildvrt), highest, lowest of the inputs, or [xres, yres] "
                "in the units of dst_crs"
            )
        ),
    ] = "average",
    separate: Annotated[bool, Field(description="Stack the inputs' bands instead of mosaicking them")] = False,
    dst_crs: Annotated[
        str | None,
        CrsCheck,
        Field(description="Output CRS; default the first input's. Inputs in other CRSs are warped to it"),
    ] = None,
    resampling: ResamplingParam = "nearest",
    nodata: Annotated[
        float | None, Field(description=("Nodata value to declare on the output; default src_nodata, else the first input's"))
    ] = None,
    src_nodata: Annotated[
        float | None,
        Field(
            description=(
                "Treat this value in every input as nodata (gdalbuildvrt -srcnodata), e.g. 0 for black collars, so it "
                "never covers data of other inputs"
            )
        ),
    ] = None,
    bbox: GridBBox = None,
    bbox_crs: GridBBoxCRS = None,
    format: MosaicFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Combine many rasters into one (like gdalbuildvrt + gdal_translate, or gdal_merge). format="VRT" (or a
    .vrt output) writes a virtual mosaic that references the inputs instead of copying pixels. Inputs'
    nodata pixels never cover data from earlier inputs. Give inputs, or input_pattern (a glob such as
    'tiles/*.tif'). bbox sets the output extent (gdalbuildvrt -te)."""
    srcs = await resolve_inputs(app, ctx, inputs, input_pattern)
    job = jobs.MosaicJob(
        inputs=[s.gdal_path for s in srcs],
        resolution=resolution,
        separate=separate,
        dst_crs=dst_crs,
        resampling=resampling,
        nodata=nodata,
        src_nodata=src_nodata,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        format=format,
        options=creation_options,
        threads=app.gdal_threads(),
        max_pixels=app.settings.max_pixels,
    )
    return await write_result(
        app, ctx, job, model=RasterWriteResult, inputs=srcs, output=output, overwrite=overwrite, final_dir_arg="vrt_dir"
    )


@tool(title="Clip raster", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_clip(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    bbox: Annotated[
        list[float] | None,
        Field(
            min_length=4,
            max_length=4,
            description=(
                "Clip to [minx, miny, maxx, maxy] in bbox_crs (default: the raster's CRS): whole source pixels, chosen "
                "as gdal_translate -projwin does (see all_touched)"
            ),
        ),
    ] = None,
    bbox_crs: BBoxCRS = None,
    geometry: Annotated[
        dict[str, Any] | None, Field(description="Clip to a GeoJSON geometry, Feature or FeatureCollection (polygons)")
    ] = None,
    geometry_crs: GeometryCRS = None,
    mask: Annotated[
        str | None,
        Field(description="Clip to the polygons of a vector file in the workspace; reprojected to the raster's CRS"),
    ] = None,
    mask_layer: Annotated[str | None, Field(description="Layer of mask (required when it has several)")] = None,
    mask_where: Annotated[str | None, Field(description="Attribute filter on mask, e.g. \"name = 'Bahamas'\"")] = None,
    crop: Annotated[bool, Field(description="Shrink the output to the clip window (false keeps the full grid)")] = True,
    all_touched: Annotated[
        bool,
        Field(
            description=(
                "false (default): a bbox keeps the window gdal_translate -projwin keeps (first pixel: the one holding "
                "the bbox's upper-left corner, to 1/1000 pixel; size: the bbox's size in pixels rounded to the nearest "
                "whole number, halves up), so an edge pixel whose centre lies outside may be kept and one whose centre "
                "lies inside dropped; a geometry or mask keeps "
                "the pixels whose centre is inside it. true: every pixel the bbox, geometry or mask touches"
            )
        ),
    ] = False,
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Value for pixels outside the shape; default the input's nodata; without one, floats use NaN and "
                "integers a mask band (no kept value is ever declared nodata)"
            )
        ),
    ] = None,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterClipResult:
    """Clip a raster by a bbox, a GeoJSON geometry or a vector mask file. Give exactly one of bbox, geometry, mask.
    Pixels keep their values and grid (no resampling); the result's window says which source pixels were kept
    (col_off, row_off, width, height of the source grid).

    The window, with the bbox or the shapes' bounding box in fractional pixel coordinates (col_min, row_min) -
    (col_max, row_max) of the source grid:
    - bbox (default): exactly gdal_translate -projwin: col_off = floor(col_min + 0.001), width =
      floor(col_max - col_min + 0.5), rows alike. E.g. on 10 m pixels, x from 26 to 74 (columns 2.6 to 7.4) keeps
      columns 2..6: the pixel holding x = 26, then 4.8 rounded to 5 columns.
    - bbox with all_touched=true: every pixel the bbox overlaps (columns 2..7 in the example).
    - geometry or mask: the pixels whose centre lies within the shapes' bounding box (all_touched=true: that it
      touches); inside it, pixels whose centre is outside the shapes (all_touched=true: that the shapes do not
      touch) become nodata, as with gdalwarp -cutline or rasterio.mask.
    A window reaching past the raster's edge is limited to the raster, with a warning (gdal_translate would pad it
    with nodata). Streamed window by window."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    mask_path = optional_input(app, mask, "mask", inputs)
    job = jobs.ClipRasterJob(
        src=src.gdal_path,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        geometry=geometry,
        geometry_crs=geometry_crs,
        mask=mask_path,
        mask_layer=mask_layer,
        mask_where=mask_where,
        crop=crop,
        all_touched=all_touched,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
    )
    target, result, warnings = await write_output(app, ctx, job, inputs=inputs, output=output, overwrite=overwrite)
    return result.model_copy(update={"output": target.display, "uri": app.sandbox.uri(target.display), "warnings": warnings})


@tool(title="Raster overviews", annotations=MODIFY, tags={"raster"}, writes=True)
async def raster_overviews(
    app: App,
    input: Annotated[str, Field(description="GeoTIFF (or other updatable raster) in the workspace")],
    action: Annotated[
        Literal["add", "delete"],
        Field(
            description="add (default) or delete overviews; both modify the input in place. raster_info lists the "
            "overviews a raster has"
        ),
    ] = "add",
    levels: Annotated[
        Literal["auto"] | list[int],
        Field(description='"auto" (halve until <= 256 px, like gdaladdo) or factors such as [2, 4, 8, 16]'),
    ] = "auto",
    resampling: Annotated[
        OverviewResampling,
        Field(description=("nearest (categorical, default), average/bilinear/cubic/lanczos (continuous), mode, gauss, rms")),
    ] = "nearest",
    external: Annotated[
        bool,
        Field(
            description=(
                "With add: write the overviews to <input>.ovr beside the file and leave the file itself untouched "
                "(gdaladdo -ro); works on a COG or a file you must not rewrite"
            )
        ),
    ] = False,
    ctx: Context | None = None,
) -> OverviewsResult:
    """Build or remove the internal overviews (pyramids) of a raster, like gdaladdo. Overviews make
    zoomed-out display and previews fast. Rewrites the input in place (atomically: a failed or
    cancelled job leaves it untouched), or with external=true writes <input>.ovr beside it; refused on a
    read-only server. A COG cannot be changed in place: use external=true, or make a new one with
    raster_convert format=COG."""
    src = app.sandbox.resolve_input(input)
    if is_object(app, src, input):  # rewritten with its overviews, then replacing the object in the version approved
        if external:
            raise GdalMcpError(
                "unsupported",
                f"'{input}' is an object in object storage: external overviews are not written beside it; use "
                "external=false (the object is rewritten with internal overviews) or raster_convert format=COG",
            )
        job = jobs.OverviewsJob(src=src.gdal_path, action=action, levels=levels, resampling=resampling)
        target, result, _ = await write_output(app, ctx, job, inputs=[], output=input, overwrite=True)
        if action == "delete" and not result.levels:
            await drop_object_side_files(app, input, (".ovr",))
        result.path = target.display
        return result
    if src.network or len(src.files) != 1 or src.gdal_path != str(src.files[0]):
        raise unchangeable(
            src, input, "raster_overviews", "make a new raster that holds its own overviews: raster_convert format=COG"
        )
    if external:
        if action != "add":
            raise GdalMcpError(
                "invalid-argument",
                "external applies to action=add; action=delete removes internal and external overviews alike",
            )
        ext_job = jobs.ExternalOverviewsJob(src=src.gdal_path, levels=levels, resampling=resampling)
        ovr, ext_result, _ = await write_output(
            app, ctx, ext_job, inputs=[], output=src.display + ".ovr", overwrite=True, side_file=True
        )
        ext_result.path = src.display
        return ext_result
    job = jobs.OverviewsJob(src=src.gdal_path, action=action, levels=levels, resampling=resampling)
    target, result, _ = await write_output(app, ctx, job, inputs=[], output=src.display, overwrite=True)
    if action == "delete":
        stale = target.final.with_name(target.final.name + ".ovr")
        if stale.exists() and not result.levels:
            stale.unlink()  # external overviews removed on the copy must not come back from the old .ovr
    result.path = target.display
    return result


@tool(title="Edit raster metadata", annotations=MODIFY, tags={"raster"}, writes=True)
async def raster_edit(
    app: App,
    input: Annotated[
        str,
        Field(
            description=(
                "Raster file in the workspace to change in place (GeoTIFF edited directly; other formats GDAL can update "
                "are edited on a copy that replaces the file only on success)"
            )
        ),
    ],
    crs: Annotated[str | None, CrsCheck, Field(description=(f"Set (or fix) the CRS without reprojecting: {CRS_FORMS}"))] = None,
    nodata: Annotated[float | None, Field(description="Declare this nodata value on every band")] = None,
    unset_nodata: Annotated[bool, Field(description="Remove the nodata value (pixels keep their values)")] = False,
    scale: Annotated[
        float | list[float] | None,
        Field(description=("Scale factor: one for all bands or one per band (value = raw * scale + offset)")),
    ] = None,
    offset: Annotated[float | list[float] | None, Field(description=("Offset: one for all bands or one per band"))] = None,
    bounds: Annotated[
        list[float] | None,
        Field(
            min_length=4,
            max_length=4,
            description=(
                "Set the georeferenced extent [minx, miny, maxx, maxy] in the raster's CRS (gdal_edit.py -a_ullr): the "
                "pixel size follows from it"
            ),
        ),
    ] = None,
    metadata: Annotated[
        dict[str, str | None] | None,
        Field(description=('Dataset metadata items to set, e.g. {"SOURCE": "survey 2024"}; null removes an item')),
    ] = None,
    band_descriptions: Annotated[
        list[str | None] | None, Field(description=("One description per band (null leaves a band unchanged)"))
    ] = None,
    band_units: Annotated[
        str | list[str | None] | None,
        Field(
            description=('Unit of the pixel values, e.g. "m" or "degC" (gdal_edit.py -units): one for all bands or one per band')
        ),
    ] = None,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Change a raster's metadata in place, like gdal_edit.py: assign a missing or wrong CRS, set or remove
    nodata, scale/offset, the extent, metadata items, band descriptions and units. Never changes pixel
    values and never reprojects (use raster_reproject for that). Destructive: refused on a read-only server."""
    src = app.sandbox.resolve_input(input)
    if not is_object(app, src, input) and (src.network or len(src.files) != 1 or src.gdal_path != str(src.files[0])):
        raise unchangeable(
            src, input, "raster_edit", "write a corrected copy under a new name with raster_convert (or raster_reproject)"
        )
    job = jobs.EditRasterJob(
        src=src.gdal_path,
        crs=crs,
        nodata=nodata,
        unset_nodata=unset_nodata,
        scale=scale,
        offset=offset,
        bounds=as_bbox(bounds),
        metadata=metadata,
        band_descriptions=band_descriptions,
        units=band_units,
    )
    # A GeoTIFF is edited in place, unless it has other hard links (they could be anywhere, outside the
    # workspace too, and would change with it): then on a copy, which the commit puts in its place. An object in
    # storage is edited on a copy too, which replaces it only in the version approved.
    if not src.network and src.files[0].suffix.lower() in (".tif", ".tiff") and src.files[0].stat().st_nlink == 1:
        summary, warnings = await app.execute(job, ctx=ctx)
        return RasterWriteResult(
            output=src.display,
            uri=app.sandbox.uri(src.display),
            summary=app.scrub_model(summary),
            warnings=[app.sandbox.scrub(w) for w in warnings],
        )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[], output=src.display, overwrite=True)


@tool(title="Reclassify raster", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_reclassify(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    classes: Annotated[
        list[ReclassRange] | None,
        Field(
            min_length=1,
            max_length=10000,
            description=(
                'Value ranges to new values: [{"min": 0, "max": 5, "value": 1}, {"min": 5, "max": 15, "value": 2}, '
                '{"min": 15, "value": 3}]; min inclusive, max exclusive, the last range closed; a missing min/max is '
                "open-ended; the first matching range wins. Not with mapping"
            ),
        ),
    ] = None,
    mapping: Annotated[
        dict[str, float] | None,
        Field(description=('Exact values to new values, e.g. land-cover codes {"11": 1, "12": 1, "21": 2}. Not with classes')),
    ] = None,
    default: Annotated[
        Literal["nodata", "keep"] | float,
        Field(description=('What pixels matching no class become: "nodata" (default), "keep" (their own value) or a number')),
    ] = "nodata",
    band: Band = 1,
    output_type: Annotated[
        OutputType,
        Field(description=("Output data type; default the smallest that holds the new values (Byte for small class numbers)")),
    ] = None,
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Reclassify a band into classes: value ranges (e.g. slope into 4 classes) or exact values (recode land
    cover). Nodata stays nodata; the warnings count the pixels no class matched. Streamed window by window.
    For class areas afterwards use raster_stats(categorical=true) or zonal_stats."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ReclassifyJob(
        src=src.gdal_path,
        classes=[c.model_dump(exclude_none=True) for c in classes] if classes else None,
        mapping=dict(mapping) if mapping is not None else None,
        default=default,
        band=band,
        output_type=output_type,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Raster statistics", annotations=READ, tags={"raster"})
async def raster_stats(
    app: App,
    input: RasterInput,
    bands: Bands = None,
    percentiles: Annotated[
        list[float] | None,
        Field(max_length=100, description="Exact percentiles to compute, 0-100; default [2, 25, 50, 75, 98]"),
    ] = None,
    histogram_bins: Annotated[
        int | None,
        Field(ge=1, le=10000, description="Also return an equal-width histogram over [min, max] with this many bins"),
    ] = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    categorical: Annotated[
        bool,
        Field(
            description=(
                "Class areas instead of statistics (land cover, classified rasters): per band and value, the pixel "
                "count, area in m² and ha (geodesic per row on lon/lat rasters) and fraction of the valid pixels, in "
                "categories; bands is then empty. Refused above 10000 distinct values (use raster_reclassify "
                "first)"
            )
        ),
    ] = False,
    thresholds: Thresholds = None,
    weights: Annotated[
        Literal["none", "area"],
        Field(
            description=(
                "area: weight mean, std and percentiles by each pixel's ground area (geodesic per row), for lon/lat "
                "rasters, whose pixels shrink toward the poles; percentiles are then numpy's weighted inverted_cdf "
                "(the smallest value whose cumulative area reaches q% of the valid area). min, max, sum, counts and "
                "histogram stay per pixel. none (default): every valid pixel counts once"
            )
        ),
    ] = "none",
    ctx: Context | None = None,
) -> RasterStatsResult:
    """Exact statistics of a raster's pixels per band: min, max, mean, std, sum, valid and nodata counts,
    exact percentiles (numpy's linear definition) and an optional histogram; honours nodata, NaN and masks.
    Computed from the pixels, streamed (never the possibly stale values stored in the file). With
    thresholds: per band and threshold, the count, share and area of the pixels above it (>) and at or below
    it (<=), in one call (e.g. the share of a scene with NDVI above 0.3). weights=area: area-weighted mean,
    std and percentiles (lon/lat rasters). With categorical=true: the count, area and fraction of each class
    value instead. Bands of a netCDF/HDF5/Zarr variable say which time and level they hold (bands[].dimensions,
    e.g. {"time": "2020-07-01T00:00:00"}: CF times decoded with the file's calendar)."""
    src = app.sandbox.resolve_input(input)
    if categorical:
        if percentiles is not None or histogram_bins is not None or thresholds is not None or weights != "none":
            raise GdalMcpError(
                "invalid-argument",
                "percentiles, histogram_bins, thresholds and weights do not apply with categorical=true (class areas, "
                "already per value); omit them, or omit categorical",
            )
        cats = await read_result(
            app,
            ctx,
            jobs.CategoriesJob(path=src.gdal_path, bands=bands, bbox=as_bbox(bbox), bbox_crs=bbox_crs),
            display=src.display,
        )
        return RasterStatsResult(
            path=cats.path,
            window=cats.window,
            bands=[],
            categories=cats.bands,
            area_method=cats.area_method,
            pixel_area_m2=cats.pixel_area_m2,
            warnings=cats.warnings,
        )
    job = jobs.RasterStatsJob(
        path=src.gdal_path,
        bands=bands,
        percentiles=percentiles,
        histogram_bins=histogram_bins,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        thresholds=thresholds,
        weights=weights,
    )
    return await read_result(app, ctx, job, display=src.display)


@tool(title="Sample raster at points", annotations=WRITE, tags={"raster"})
async def raster_sample(
    app: App,
    input: RasterInput,
    points: Annotated[
        list[Annotated[list[float], Field(min_length=2, max_length=2)]] | None,
        Field(
            min_length=1,
            max_length=10000,
            description=("Points as [[x, y], …] (lon/lat order for geographic CRSs); or give points_input"),
        ),
    ] = None,
    points_crs: Annotated[
        str | None, CrsCheck, Field(description="CRS of points; default the raster's (use EPSG:4326 for lon/lat)")
    ] = None,
    bands: Bands = None,
    points_input: Annotated[
        str | None,
        Field(
            description=(
                "Instead of points: a point layer to sample at every feature (wells.gpkg, stations.shp …), "
                "reprojected to the raster's CRS; needs output"
            )
        ),
    ] = None,
    points_layer: Annotated[str | None, Field(description=("Layer of points_input; required when it has several"))] = None,
    output: Annotated[
        str | None,
        Field(
            description=(
                "With points_input: the vector file to write, relative to the workspace: the points with all their "
                "attributes and geometries unchanged, plus one field per band (band_1 …, null for nodata or off the "
                "raster); the extension picks the format (.gpkg, .shp, .geojson, .fgb, .csv …)"
            )
        ),
    ] = None,
    format: VectorFormat = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> SampleResult:
    """Pixel values at coordinates (like gdallocationinfo): row/col and one value per band for each point;
    nodata is null and points outside the raster say inside=false. At most 10000 points. Or extract values
    to points: with points_input and output, every feature of a point layer gets the band values as new
    attributes, written to output (streamed, any number of points)."""
    src = app.sandbox.resolve_input(input)
    if points_input is not None:
        if points is not None or points_crs is not None:
            raise GdalMcpError("invalid-argument", "give points (with points_crs) or points_input, not both")
        if output is None:
            raise GdalMcpError(
                "invalid-argument",
                "points_input needs output: the vector file to write the "
                "points with their sampled values to (e.g. wells_values.gpkg)",
            )
        app.require_writable("raster_sample output")
        pts = app.sandbox.resolve_input(points_input, what="points_input")
        layer_job = jobs.SampleLayerJob(
            src=src.gdal_path, points=pts.gdal_path, points_layer=points_layer, bands=bands, format=format
        )
        target, result, warnings = await write_output(app, ctx, layer_job, inputs=[src, pts], output=output, overwrite=overwrite)
        return result.model_copy(
            update={
                "path": src.display,
                "output": target.display,
                "uri": app.sandbox.uri(target.display),
                "warnings": warnings,
            }
        )
    if points is None:
        raise GdalMcpError("invalid-argument", "give points ([[x, y], …]) or points_input (a point layer)")
    if output is not None or points_layer is not None or format is not None:
        raise GdalMcpError(
            "invalid-argument",
            "output, points_layer and format go with points_input; with points the values are returned, not written",
        )
    job = jobs.SampleJob(path=src.gdal_path, points=[(p[0], p[1]) for p in points], points_crs=points_crs, bands=bands)
    return await read_result(app, ctx, job, display=src.display, quick=len(points) <= 100)


@tool(title="Raster to XYZ", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_to_xyz(
    app: App,
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
    job = jobs.XyzJob(src=src.gdal_path, bands=bands, skip_nodata=skip_nodata, bbox=as_bbox(bbox), bbox_crs=bbox_crs)
    target, table, warnings = await write_output(app, ctx, job, inputs=[src], output=output, overwrite=overwrite)
    return TableWriteResult(
        output=target.display,
        uri=app.sandbox.uri(target.display),
        rows=table["rows"],
        columns=table["columns"],
        file_size=target.final.stat().st_size,
        warnings=warnings,
    )
