"""Analysis tools: terrain (gdaldem), band math, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterWriteResult, VectorWriteResult, ZonalResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import optional_input, resolve_inputs, write_output, write_result
from gdal_mcp.server.tools.params import (
    Band,
    BBox,
    BBoxCRS,
    CreationOptions,
    CrsCheck,
    DataType,
    GridBBox,
    GridBBoxCRS,
    InputPattern,
    Layer,
    OptionalVectorOutput,
    OutputLayer,
    OutputType,
    Overwrite,
    RasterFormat,
    RasterInput,
    RasterOutput,
    Thresholds,
    VectorFormat,
    VectorInput,
    VectorOutput,
    Where,
    as_bbox,
    resolution_description,
)
from gdal_mcp.server.tools.registry import WRITE, tool

Output = RasterOutput
Format = RasterFormat

BAND_SUFFIX = re.compile(r"^(.*):(\d+)$", re.S)


def _band_input(app: App, spec: str, what: str) -> Any:
    """Resolve "path" or "path:band" through the sandbox; the band suffix stays on the GDAL path."""
    try:
        return app.sandbox.resolve_input(spec, what=what), None
    except GdalMcpError as e:
        m = BAND_SUFFIX.match(spec)
        if e.code != "not-found" or not m:
            raise
        return app.sandbox.resolve_input(m.group(1), what=what), int(m.group(2))


@tool(title="Terrain analysis", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_terrain(
    app: App,
    input: Annotated[str, Field(description="DEM (elevation raster) to read, relative to the workspace")],
    output: Output,
    product: Annotated[
        Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief"],
        Field(description="What to compute (like gdaldem)"),
    ],
    band: Annotated[int, Field(ge=1, description="Elevation band")] = 1,
    z_factor: Annotated[float, Field(gt=0, description="Vertical exaggeration (hillshade, slope)")] = 1.0,
    azimuth: Annotated[
        float,
        Field(ge=0, le=360, description="Hillshade light direction, degrees clockwise from north (not used by multidirectional)"),
    ] = 315.0,
    altitude: Annotated[
        float, Field(ge=0, le=90, description="Hillshade light elevation above the horizon, degrees (not used by igor)")
    ] = 45.0,
    slope_units: Annotated[Literal["degrees", "percent"], Field(description="Units of slope")] = "degrees",
    scale: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "gdaldem's -s: horizontal units per vertical unit, one factor for both axes (default 1). Leave it out "
                "for lon/lat DEMs: they get true ground distances per row from their ellipsoid; scale=111120 there "
                "reproduces gdaldem -s 111120 (too-gentle slopes away from the equator)"
            ),
        ),
    ] = None,
    algorithm: Annotated[
        Literal["Horn", "ZevenbergenThorne"],
        Field(
            description=(
                "Gradient for hillshade, slope and aspect: Horn (3x3, default; best on rough terrain) or "
                "ZevenbergenThorne (4 edge neighbours; smoother landscapes)"
            )
        ),
    ] = "Horn",
    hillshade_mode: Annotated[
        Literal["standard", "combined", "multidirectional", "igor"],
        Field(
            description=(
                "Hillshade shading: standard (one light), combined (darkened by slope), multidirectional (four "
                "lights at 225/270/315/360 deg, weighted by aspect), igor (Igor's hillshading: slope and aspect, no "
                "black shadows)"
            )
        ),
    ] = "standard",
    zero_for_flat: Annotated[bool, Field(description="Aspect: flat pixels get 0 instead of nodata")] = False,
    trigonometric: Annotated[
        bool,
        Field(
            description=(
                "Aspect as a trigonometric angle (0 = east, counter-clockwise) instead of an azimuth (0 = north, clockwise)"
            )
        ),
    ] = False,
    colors: Annotated[
        str | list[list[int | float | str]] | None,
        Field(
            description=(
                "color-relief ramp: a list of [value, r, g, b] or [value, r, g, b, a] entries (0..255), where value "
                'is an elevation, "NN%" of the band\'s min..max (computed exactly) or "nv" for nodata pixels, '
                'e.g. [[-50, 0, 0, 128], [0, 0, 128, 0], ["100%", 255, 255, 255], ["nv", 0, 0, 0, 0]]; or a '
                "ramp name: terrain, elevation (green-brown-white), bathymetry (navy to pale cyan), gray -- defined "
                "in percentages, so they fit any DEM, with nodata transparent"
            )
        ),
    ] = None,
    color_mode: Annotated[
        Literal["interpolate", "nearest", "exact"],
        Field(
            description=(
                "color-relief: interpolate between entries (default), take the nearest entry, or only colour values "
                "equal to an entry (others 0,0,0,0)"
            )
        ),
    ] = "interpolate",
    alpha: Annotated[bool, Field(description="color-relief: add an alpha band (RGBA instead of RGB)")] = False,
    compute_edges: Annotated[
        bool, Field(description="Also compute the outermost pixels (gdaldem -compute_edges); default they are nodata")
    ] = False,
    format: Format = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Hillshade, slope, aspect, roughness, TRI, TPI or color-relief of a DEM, with gdaldem's formulas,
    streamed window by window. Slope (degrees or percent), aspect (degrees), TRI, TPI and roughness
    (elevation units) are Float32 with nodata -9999; hillshade is Byte 1..255 with nodata 0; color-relief is
    RGB (RGBA with alpha) Byte without nodata. On a lon/lat DEM, hillshade, slope and aspect use each row's
    true ground distances (east-west along its parallel, north-south along the meridian, on the CRS's
    ellipsoid), as a projected grid of the same pixels would, with elevations taken as metres (z_factor=0.3048
    for feet); the result's warnings say so. Projected DEMs: identical to gdaldem (distances in the CRS unit)."""
    src = app.sandbox.resolve_input(input)
    job = jobs.TerrainJob(
        src=src.gdal_path,
        product=product,
        band=band,
        z_factor=z_factor,
        azimuth=azimuth,
        altitude=altitude,
        slope_units=slope_units,
        scale=scale,
        algorithm=algorithm,
        hillshade_mode=hillshade_mode,
        zero_for_flat=zero_for_flat,
        trigonometric=trigonometric,
        colors=colors,
        color_mode=color_mode,
        alpha=alpha,
        compute_edges=compute_edges,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Raster calculator", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_calc(
    app: App,
    expression: Annotated[
        Annotated[str, Field(max_length=2000)]
        | Annotated[list[Annotated[str, Field(max_length=2000)]], Field(min_length=1, max_length=100)],
        Field(
            description=(
                "Band math on the input names: + - * / ** comparisons, & | ~, where(c, a, b), sqrt, log, exp, abs, "
                "min(a, b, …), max(a, b, …), clip, sin, cos … e.g. NDVI: (B - A) / (B + A). With a list of inputs: "
                "reductions of the stack S, e.g. median(S). A list of expressions writes one band each, e.g. "
                '["median(S)", "count(S)"]'
            )
        ),
    ],
    output: Output,
    inputs: Annotated[
        Annotated[dict[str, str], Field(min_length=1, max_length=26)]
        | Annotated[list[str], Field(min_length=1, max_length=1000)]
        | None,
        Field(
            description=(
                'Either name -> raster, optionally ":band", e.g. {"A": "red.tif", "B": "landsat.tif:4"}; or a list '
                'of up to 1000 rasters on one grid, e.g. ["s1.tif", "s2.tif"], that the expression reduces as the '
                "stack S (or give input_pattern)"
            )
        ),
    ] = None,
    input_pattern: InputPattern = None,
    band: Annotated[
        int | None,
        Field(
            ge=1,
            description=(
                'Band read from every input that has no ":band" suffix (default 1); use it with input_pattern on '
                "multi-band scenes"
            ),
        ),
    ] = None,
    output_type: Annotated[OutputType, Field(description="Output data type; default Float32")] = None,
    nodata: Annotated[float | None, Field(description="Output nodata (default -9999)")] = None,
    format: Format = None,
    creation_options: CreationOptions = None,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Band math over rasters on the same grid (like gdal_calc). The expression is checked against a safe
    whitelist (no attribute access, imports or arbitrary calls). Pixels that are nodata in any named input
    used, or divide by zero, become nodata. Inputs on different grids are refused with the reprojection to do.

    Several expressions (a list) write a multi-band output, one band per expression, each band described
    by its expression.

    Composites of many scenes: give inputs as a list (or input_pattern, a glob) and reduce the stack S of
    all of them per pixel with mean(S), median(S), min(S), max(S), sum(S), count(S) or std(S) (population,
    ddof=0). Nodata/NaN pixels of an input are left out of that pixel's reduction; count(S) is the number of
    valid inputs (0 where none), any other reduction is nodata where no input is valid. S is only allowed as
    the whole argument of a reduction; the results combine like any value, e.g.
    where(count(S) >= 3, median(S), nan). Example, a median composite of 12 scenes:
    inputs=["scenes/s01.tif", …, "scenes/s12.tif"] or input_pattern="scenes/*.tif", expression="median(S)";
    expression=["median(S)", "count(S)"] adds a band with the number of valid scenes. Multi-band scenes:
    band=N (or a "path:N" suffix per input) selects the band read from every input. Up to 1000 inputs,
    streamed window by window: the window shrinks with the number of inputs so that at most 8 Mi stacked
    values (64 MiB of float64) are in memory at once.

    bbox: compute only that area; the output is the window of the inputs' grid the bbox touches (the pixels
    raster_stats reads for the same bbox), and only those pixels are read: NDVI of an area of a remote scene
    (stac_search's asset inputs) reads only that area's tiles."""
    max_stack = 1000  # engine.raster.calc.MAX_STACK_INPUTS (not imported: the server never loads GDAL)
    srcs = []
    resolved: dict[str, str] | list[str]
    if isinstance(inputs, dict):
        if input_pattern is not None:
            raise GdalMcpError(
                "invalid-argument",
                'give inputs as named rasters ({"A": …}) or input_pattern (a stack S of rasters), not both',
            )
        resolved = {}
        for name, spec in inputs.items():
            src, sel = _band_input(app, spec, f"inputs[{name}]")
            srcs.append(src)
            resolved[name] = src.gdal_path + (f":{sel}" if sel is not None else "")
    elif inputs is not None and input_pattern is None:
        resolved = []
        for i, spec in enumerate(inputs):
            src, sel = _band_input(app, spec, f"inputs[{i}]")
            srcs.append(src)
            resolved.append(src.gdal_path + (f":{sel}" if sel is not None else ""))
    else:
        if inputs is None and input_pattern is None:
            raise GdalMcpError(
                "invalid-argument",
                'give inputs (named rasters {"A": "red.tif", "B": "nir.tif"}, '
                "or a list of rasters to reduce as the stack S) or input_pattern (a glob such "
                "as 'scenes/*.tif')",
            )
        srcs = await resolve_inputs(app, ctx, inputs, input_pattern, limit=max_stack)
        resolved = [s.gdal_path for s in srcs]
    job = jobs.CalcJob(
        inputs=resolved,
        expression=expression,
        band=band,
        output_type=output_type,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=srcs, output=output, overwrite=overwrite)


@tool(title="Polygonize raster", annotations=WRITE, tags={"raster", "vector", "analysis"}, writes=True)
async def raster_polygonize(
    app: App,
    input: RasterInput,
    output: VectorOutput,
    band: Band = 1,
    mask: Annotated[str | None, Field(description="Raster of the same size: only its non-zero pixels are polygonized")] = None,
    connectivity: Annotated[Literal[4, 8], Field(description="4: edge neighbours only; 8: also diagonal")] = 4,
    field: Annotated[str, Field(description="Name of the attribute holding the pixel value")] = "value",
    nodata_excluded: Annotated[bool, Field(description="Leave nodata pixels out (default)")] = True,
    format: VectorFormat = None,
    output_layer: OutputLayer = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Turn connected regions of equal pixel value into polygons with the value as an attribute (like
    gdal_polygonize). GDAL reads the band itself, so memory does not grow with the raster. Best on
    classified/categorical rasters; continuous data gives one polygon per pixel value run."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    mask_path = optional_input(app, mask, "mask", inputs)
    job = jobs.PolygonizeJob(
        src=src.gdal_path,
        band=band,
        mask=mask_path,
        connectivity=connectivity,
        field=field,
        nodata_excluded=nodata_excluded,
        format=format,
        output_layer=output_layer,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=inputs, output=output, overwrite=overwrite)


@tool(title="Rasterize vector", annotations=WRITE, tags={"vector", "raster", "analysis"}, writes=True)
async def vector_rasterize(
    app: App,
    input: VectorInput,
    output: Output,
    burn_value: Annotated[float | None, Field(description="Value burnt for every feature (or use attribute)")] = None,
    attribute: Annotated[str | None, Field(description="Numeric field whose value is burnt")] = None,
    like: Annotated[str | None, Field(description="Raster whose grid (CRS, extent, pixel size) is copied")] = None,
    resolution: Annotated[
        float | list[float] | None,
        Field(description=resolution_description("crs (the layer's CRS by default)") + "; without like; not with size"),
    ] = None,
    size: Annotated[list[int] | None, Field(min_length=2, max_length=2, description="[width, height] (without like)")] = None,
    bbox: GridBBox = None,
    bbox_crs: GridBBoxCRS = None,
    crs: Annotated[str | None, CrsCheck, Field(description="Output CRS (without like); default the layer's")] = None,
    layer: Layer = None,
    where: Where = None,
    all_touched: Annotated[bool, Field(description="Burn every pixel a feature touches")] = False,
    invert: Annotated[bool, Field(description="Burn where there are no features")] = False,
    add: Annotated[
        bool,
        Field(
            description=(
                "Add the values of overlapping features instead of the last one winning (gdal_rasterize -add): "
                "burn_value=1 counts the points per cell"
            )
        ),
    ] = False,
    output_type: Annotated[
        OutputType,
        Field(description=("Output data type; default the smallest that holds the burnt values (at least 32-bit with add)")),
    ] = None,
    init: Annotated[
        float | None,
        Field(
            description=(
                "Background value of pixels no feature covers (gdal_rasterize -init); default 0, or nodata when nodata is given"
            )
        ),
    ] = None,
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Value to declare nodata (gdal_rasterize -a_nodata); default none, so a 0/1 mask keeps its zeros as "
                "data. Must differ from burn_value"
            )
        ),
    ] = None,
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
    job = jobs.RasterizeJob(
        src=src.gdal_path,
        layer=layer,
        where=where,
        burn_value=burn_value,
        attribute=attribute,
        like=like_path,
        resolution=resolution,
        size=size,
        bbox=as_bbox(bbox),
        bbox_crs=bbox_crs,
        crs=crs,
        all_touched=all_touched,
        invert=invert,
        add=add,
        dtype=output_type,
        init=init,
        nodata=nodata,
        format=format,
        creation_options=creation_options,
        max_pixels=app.settings.max_pixels,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=inputs, output=output, overwrite=overwrite)


@tool(title="Zonal statistics", annotations=WRITE, tags={"raster", "vector", "analysis"})
async def zonal_stats(
    app: App,
    input: Annotated[str, Field(description="Raster with the values, relative to the workspace (dem.tif …)")],
    zones: Annotated[
        str,
        Field(description=("Vector dataset with the zones (polygons; points and lines work too): zones.gpkg, districts.shp …")),
    ],
    zones_layer: Annotated[str | None, Field(description="Layer of zones; required when it has several")] = None,
    band: Band = 1,
    stats: Annotated[
        list[str] | None,
        Field(
            description=(
                "Statistics: count, min, max, mean, sum, std, median, majority, minority, unique, range, nodata, "
                "percentile_<q>; default count, min, max, mean, sum, std, median, majority"
            )
        ),
    ] = None,
    all_touched: Annotated[bool, Field(description="Count every pixel a zone touches, not only pixel centres inside")] = False,
    id_field: Annotated[str | None, Field(description="Zone attribute used as row id (default: feature index)")] = None,
    categorical: Annotated[
        bool,
        Field(
            description=(
                "Class areas per zone (land cover …): each row gets classes = {value: {count, area_m2, area_ha, "
                "fraction of the zone's valid pixels}}; areas are geodesic on lon/lat rasters. Written to output as one "
                "JSON text field 'classes'. Without stats, only count besides"
            )
        ),
    ] = False,
    thresholds: Thresholds = None,
    output: OptionalVectorOutput = None,
    format: VectorFormat = None,
    limit: Annotated[int, Field(ge=1, le=10000, description="Most rows returned in the answer")] = 200,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> ZonalResult:
    """Statistics of a raster under each zone polygon (zones reprojected to the raster's CRS; the raster is
    never resampled), returned as a bounded table and optionally written as a vector file. Reads only the
    raster window under each zone. With thresholds, each zone also gets per threshold t the fields
    above_<t>_<measure> (value > t) and at_or_below_<t>_<measure> (value <= t), measure count, share (of the
    zone's valid pixels), area_m2, area_ha, area_share (of the zone's valid area); t is written with _ for the
    decimal point and m for a minus sign: above_0_3_share is the share of the zone above 0.3."""
    r = app.sandbox.resolve_input(input)
    z = app.sandbox.resolve_input(zones, what="zones")
    job = jobs.ZonalJob(
        raster=r.gdal_path,
        zones=z.gdal_path,
        layer=zones_layer,
        band=band,
        stats=stats,
        all_touched=all_touched,
        id_field=id_field,
        categorical=categorical,
        thresholds=thresholds,
        limit=limit,
        format=format,
    )
    if output is None:
        result, warnings = await app.execute(job, ctx=ctx)
        return app.scrub_model(result)
    app.require_writable("zonal_stats output")
    target, result, warnings = await write_output(app, ctx, job, inputs=[r, z], output=output, overwrite=overwrite)
    result.warnings = warnings
    return result


@tool(title="Contour lines", annotations=WRITE, tags={"raster", "vector", "analysis"}, writes=True)
async def raster_contour(
    app: App,
    input: Annotated[str, Field(description="DEM (or any continuous raster) to contour, relative to the workspace")],
    output: VectorOutput,
    interval: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Distance between levels, in the raster's value units (metres for most DEMs): levels are base + k * "
                "interval (gdal_contour -i). Give interval or levels"
            ),
        ),
    ] = None,
    levels: Annotated[
        list[float] | None,
        Field(
            min_length=1,
            max_length=10000,
            description=("Fixed levels instead of an interval, e.g. [100, 250, 500] (gdal_contour -fl)"),
        ),
    ] = None,
    base: Annotated[float, Field(description="Offset of the interval levels (gdal_contour -off); default 0")] = 0.0,
    band: Band = 1,
    polygons: Annotated[
        bool,
        Field(
            description=(
                "Write filled polygons between consecutive levels (gdal_contour -p) with fields amin and amax, one "
                "MultiPolygon per band of values, instead of lines"
            )
        ),
    ] = False,
    attribute: Annotated[str, Field(description="Name of the level field of contour lines (gdal_contour -a)")] = "elev",
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Treat this value as nodata (gdal_contour -snodata); default the band's nodata. Nodata areas get no contours"
            )
        ),
    ] = None,
    format: VectorFormat = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> VectorWriteResult:
    """Contour lines of a DEM (like gdal_contour): one LineString per contour line with fields ID and the level
    (attribute, default "elev"), or with polygons=true filled polygons between levels (fields ID, amin, amax).
    Coordinates are in the raster's CRS; lines run through the pixel centres' grid to the raster edge. It runs
    GDAL's own contour algorithm (the features gdal_contour writes), which reads the raster line by line and
    writes each line once finished, so memory stays bounded for lines (polygons are held until written, as
    gdal_contour does)."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ContourJob(
        src=src.gdal_path,
        interval=interval,
        levels=levels,
        base=base,
        band=band,
        polygons=polygons,
        attribute=attribute,
        nodata=nodata,
        format=format,
    )
    return await write_result(app, ctx, job, model=VectorWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Fill nodata gaps", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_fill_nodata(
    app: App,
    input: RasterInput,
    output: Output,
    max_distance: Annotated[
        float,
        Field(
            gt=0,
            description=(
                "How far, in PIXELS, to search for valid values around a gap (gdal_fillnodata -md); default 100. Pixels "
                "farther than this from any valid pixel stay nodata"
            ),
        ),
    ] = 100,
    smoothing_iterations: Annotated[
        int, Field(ge=0, le=100, description=("3x3 smoothing passes over the filled pixels (gdal_fillnodata -si); default 0"))
    ] = 0,
    band: Band = 1,
    format: Format = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Fill nodata gaps of one band by inverse-distance interpolation from the valid pixels around them, exactly
    as gdal_fillnodata.py (GDAL's GDALFillNodata). Writes that band with the input's data type and nodata value.
    Streamed in strips with a halo of max_distance rows; refused with resource-limit when a strip would need
    more than 1 GiB."""
    src = app.sandbox.resolve_input(input)
    job = jobs.FillNodataJob(
        src=src.gdal_path,
        max_distance=max_distance,
        smoothing_iterations=smoothing_iterations,
        band=band,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Sieve small regions", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_sieve(
    app: App,
    input: Annotated[
        str,
        Field(description=("Classified raster (land cover, classes; Byte, Int16, UInt16 or Int32), relative to the workspace")),
    ],
    output: Output,
    threshold: Annotated[
        int,
        Field(
            ge=1,
            description=("Regions smaller than this many PIXELS are merged into their largest neighbour (gdal_sieve -st)"),
        ),
    ],
    connectedness: Annotated[
        Literal[4, 8], Field(description=("4: pixels joined by edges only (default); 8: also by corners"))
    ] = 4,
    band: Band = 1,
    format: Format = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Remove regions smaller than threshold pixels from a classified raster, exactly as gdal_sieve.py (GDAL's
    GDALSieveFilter): each is merged into its largest neighbouring region; nodata pixels are left alone. The
    whole band is sieved at once (a region can span the raster), so a band needing more than 1 GiB is refused
    with resource-limit; the output keeps the input's type and nodata."""
    src = app.sandbox.resolve_input(input)
    job = jobs.SieveJob(
        src=src.gdal_path,
        threshold=threshold,
        connectedness=connectedness,
        band=band,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)


@tool(title="Proximity (distance raster)", annotations=WRITE, tags={"raster", "analysis"}, writes=True)
async def raster_proximity(
    app: App,
    input: RasterInput,
    output: Output,
    target_values: Annotated[
        list[float] | None,
        Field(
            min_length=1,
            max_length=1000,
            description=("Pixel values that are targets (gdal_proximity -values); default every non-zero pixel"),
        ),
    ] = None,
    distance_units: Annotated[
        Literal["geo", "pixel"],
        Field(
            description=(
                "geo (default): georeferenced units of the raster's CRS, i.e. metres on projected rasters but DEGREES on "
                "geographic (lon/lat) rasters; pixel: pixel widths"
            )
        ),
    ] = "geo",
    max_distance: Annotated[
        float | None,
        Field(
            gt=0,
            description=("Farthest distance computed, in distance_units; farther pixels get nodata (gdal_proximity -maxdist)"),
        ),
    ] = None,
    nodata: Annotated[
        float | None,
        Field(
            description=(
                "Value of pixels beyond max_distance, also declared as the output's nodata; default 65535 as GDAL "
                "(clamped to the output type), not declared"
            )
        ),
    ] = None,
    output_type: Annotated[DataType, Field(description="Output data type (gdal_proximity -ot); default Float32")] = "Float32",
    band: Band = 1,
    format: Format = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> RasterWriteResult:
    """Distance from every pixel centre to the nearest target pixel centre, computed by GDAL's own
    GDALComputeProximity exactly as gdal_proximity.py. Targets are non-zero pixels or target_values and get 0.
    On a geographic (lon/lat) raster geo distances are in degrees. GDAL scans the raster line by line, so
    memory does not grow with its size."""
    src = app.sandbox.resolve_input(input)
    job = jobs.ProximityJob(
        src=src.gdal_path,
        band=band,
        target_values=target_values,
        distance_units=distance_units,
        max_distance=max_distance,
        nodata=nodata,
        output_type=output_type,
        format=format,
        creation_options=creation_options,
    )
    return await write_result(app, ctx, job, model=RasterWriteResult, inputs=[src], output=output, overwrite=overwrite)
