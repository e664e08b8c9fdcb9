"""raster_pipeline: several raster steps in one GDAL pass (GDAL 3.12's `gdal raster pipeline`), approved once.

The steps are a discriminated union on `step` ({"step": "reproject", "dst_crs": "EPSG:32614"} …) whose fields
carry the shared vocabulary of params.py; the engine (engine/raster/pipeline.py) turns them into GDAL's arguments.
The read step is the tool's `input`, the write step its `output` (+ format, creation_options, overwrite), so the output
goes through write_result's path as every writing tool's does: the sandbox, the --confirm question (the only one for
the whole pipeline), the temporary file and its atomic, no-replace commit.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Literal

from fastmcp import Context
from pydantic import BaseModel, ConfigDict, Discriminator, Field

from gdal_mcp import jobs
from gdal_mcp.models import RasterPipelineResult
from gdal_mcp.server.app import App
from gdal_mcp.server.results import optional_input, read_result, write_output
from gdal_mcp.server.tools.params import (
    CRS_FORMS,
    Band,
    BBoxCRS,
    CreationOptions,
    CrsCheck,
    DataType,
    GridBBox,
    GridBBoxCRS,
    Overwrite,
    RasterFormat,
    RasterInput,
    RasterOutput,
    ResamplingParam,
    Size,
    SrcCRS,
    resolution_description,
)
from gdal_mcp.server.tools.registry import WRITE, tool

MAX_STEPS = 20  # engine.raster.pipeline.MAX_STEPS (not imported: the server never loads GDAL)
HERE = "the raster reaching this step"


Algorithm = Annotated[
    Literal["Horn", "ZevenbergenThorne"],
    Field(description="Gradient: Horn (3x3, default) or ZevenbergenThorne (4 edge neighbours; smoother landscapes)"),
]
ComputeEdges = Annotated[
    bool, Field(description="Also compute the outermost pixels (gdaldem -compute_edges); default they are nodata")
]
TerrainScale = Annotated[
    float | None,
    Field(
        gt=0, description="gdaldem -s: horizontal units per vertical unit (default 1; e.g. 111120 for a lon/lat DEM in metres)"
    ),
]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReprojectStep(_Step):
    """Reproject or resample, as raster_reproject (gdalwarp's grid)."""

    step: Literal["reproject"]
    dst_crs: Annotated[
        str | None,
        CrsCheck,
        Field(description=f"Target CRS: {CRS_FORMS}; default that of {HERE} (then give resolution or size)"),
    ] = None
    src_crs: SrcCRS = None
    resampling: ResamplingParam = "nearest"
    resolution: Annotated[float | list[float] | None, Field(description=resolution_description("dst_crs"))] = None
    size: Size = None
    bbox: GridBBox = None
    bbox_crs: GridBBoxCRS = None
    target_aligned_pixels: Annotated[
        bool, Field(description="Align the extent to multiples of resolution (gdalwarp -tap); needs resolution")
    ] = False
    nodata: Annotated[
        float | None,
        Field(description=f"Output nodata, also for the margins outside the source; default that of {HERE} (else see warnings)"),
    ] = None
    src_nodata: Annotated[float | None, Field(description=f"Nodata of {HERE} (gdalwarp -srcnodata); default its own")] = None


class ClipStep(_Step):
    """Cut a window of whole pixels, as raster_clip with a bbox (gdal_translate -projwin): no resampling."""

    step: Literal["clip"]
    bbox: Annotated[
        list[float] | None,
        Field(
            min_length=4,
            max_length=4,
            description=f"[minx, miny, maxx, maxy] in bbox_crs (default: the CRS of {HERE}), within its extent",
        ),
    ] = None
    bbox_crs: BBoxCRS = None
    like: Annotated[
        str | None, Field(description="Instead of bbox: a raster or vector file in the workspace whose bounding box to clip to")
    ] = None
    all_touched: Annotated[
        bool,
        Field(description="false: gdal_translate -projwin's whole pixels (raster_clip's default); true: every pixel touched"),
    ] = False


class ResizeStep(_Step):
    """Change the pixel size, same extent and CRS, as raster_convert size/resolution (gdal_translate -outsize/-tr)."""

    step: Literal["resize"]
    size: Size = None
    resolution: Annotated[float | list[float] | None, Field(description=resolution_description(HERE) + "; not with size")] = None
    resampling: Annotated[
        Literal["nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode"],
        Field(description="nearest for categories; bilinear/cubic/lanczos for continuous data; average/mode when shrinking"),
    ] = "nearest"


class SelectStep(_Step):
    """Keep some bands, in a new order."""

    step: Literal["select"]
    bands: Annotated[list[int], Field(min_length=1, description="Bands to keep, in this order (1-based)")]


class SetTypeStep(_Step):
    """Change the data type (gdal_translate -ot)."""

    step: Literal["set-type"]
    output_type: Annotated[DataType, Field(description="New data type; values are rounded and clamped as GDAL does")]


class FillNodataStep(_Step):
    """Fill nodata gaps of one band from their edges, as raster_fill_nodata; hands on that band only."""

    step: Literal["fill-nodata"]
    band: Band = 1
    max_distance: Annotated[int, Field(ge=1, description="How far to search for valid values, in PIXELS (default 100)")] = 100
    smoothing_iterations: Annotated[int, Field(ge=0, le=100, description="3x3 smoothing passes over the filled pixels")] = 0


class HillshadeStep(_Step):
    """Hillshade (Byte 1..255, nodata 0), as raster_terrain / gdaldem."""

    step: Literal["hillshade"]
    band: Annotated[int, Field(ge=1, description="Elevation band")] = 1
    z_factor: Annotated[float, Field(gt=0, description="Vertical exaggeration")] = 1.0
    azimuth: Annotated[
        float, Field(ge=0, le=360, description="Light direction, degrees clockwise from north (not multidirectional)")
    ] = 315.0
    altitude: Annotated[float, Field(ge=0, le=90, description="Light elevation above the horizon, degrees (not igor)")] = 45.0
    scale: TerrainScale = None
    algorithm: Algorithm = "Horn"
    hillshade_mode: Annotated[
        Literal["standard", "combined", "multidirectional", "igor"], Field(description="As raster_terrain's hillshade_mode")
    ] = "standard"
    compute_edges: ComputeEdges = False


class SlopeStep(_Step):
    """Slope (Float32, nodata -9999), as raster_terrain / gdaldem."""

    step: Literal["slope"]
    band: Annotated[int, Field(ge=1, description="Elevation band")] = 1
    slope_units: Annotated[Literal["degrees", "percent"], Field(description="Units of slope")] = "degrees"
    scale: TerrainScale = None
    algorithm: Algorithm = "Horn"
    compute_edges: ComputeEdges = False


class AspectStep(_Step):
    """Aspect in degrees (Float32, nodata -9999), as raster_terrain / gdaldem."""

    step: Literal["aspect"]
    band: Annotated[int, Field(ge=1, description="Elevation band")] = 1
    trigonometric: Annotated[bool, Field(description="0 = east, counter-clockwise (default: azimuth, 0 = north)")] = False
    algorithm: Algorithm = "Horn"
    compute_edges: ComputeEdges = False


class TerrainIndexStep(_Step):
    """Roughness, TRI or TPI (Float32, nodata -9999, elevation units), as raster_terrain / gdaldem."""

    step: Literal["roughness", "tri", "tpi"]
    band: Annotated[int, Field(ge=1, description="Elevation band")] = 1
    compute_edges: ComputeEdges = False


STEP_NAMES = "reproject, clip, resize, select, set-type, fill-nodata, hillshade, slope, aspect, roughness, tri, tpi"
Step = Annotated[
    ReprojectStep
    | ClipStep
    | ResizeStep
    | SelectStep
    | SetTypeStep
    | FillNodataStep
    | HillshadeStep
    | SlopeStep
    | AspectStep
    | TerrainIndexStep,
    Discriminator("step"),
]


@tool(title="Raster pipeline", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_pipeline(
    app: App,
    input: RasterInput,
    output: RasterOutput,
    steps: Annotated[
        list[Step],
        Field(
            min_length=1,
            max_length=MAX_STEPS,
            description=(
                "What to do between reading input and writing output, in order, each an object with its name in 'step', e.g. "
                '[{"step": "reproject", "dst_crs": "EPSG:32614", "resampling": "bilinear"}, {"step": "clip", "bbox": '
                '[500000, 4000000, 600000, 4100000]}, {"step": "hillshade"}]. Steps: ' + STEP_NAMES + ". Each takes the "
                "arguments of the separate tool it matches (raster_reproject, raster_clip, raster_convert, "
                "raster_fill_nodata, raster_terrain); a bbox/CRS/band refers to the raster reaching that step"
            ),
        ),
    ],
    format: RasterFormat = None,
    creation_options: CreationOptions = None,
    overwrite: Overwrite = False,
    plan_only: Annotated[
        bool,
        Field(
            description=(
                "Only check the steps and return the plan: each step's CRS, grid, bands and type, and the output's estimated "
                "size; nothing is run or written (no approval asked)"
            )
        ),
    ] = False,
    ctx: Context | None = None,
) -> RasterPipelineResult:
    """Run several raster steps in ONE pass with GDAL's raster pipeline: no intermediate files, one approval for
    the whole chain, faster than calling the tools one by one (e.g. reproject + clip + COG). Each step works as the
    tool it matches (raster_reproject, raster_clip, raster_convert, raster_fill_nodata, raster_terrain); after a
    reproject, steps that read parts of it (clip, resize, select …) sample the warp within GDAL's 0.125-pixel
    tolerance, so a few pixels may differ from the separate tools'. plan_only=true first on large data: what each
    step makes (CRS, width x height, resolution, bounds, bands, type) and the output's size, nothing run or written.
    Band math is raster_calc's (GDAL's calc step cannot follow another step)."""
    src = app.sandbox.resolve_input(input)
    inputs = [src]
    steps_data = []
    for i, step in enumerate(steps):
        data = step.model_dump(exclude_none=True)
        if "like" in data:
            data["like"] = optional_input(app, data["like"], f"steps[{i}].like", inputs)
        steps_data.append(data)
    if plan_only:
        target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=inputs)  # refused now, not after the run
        target.discard()
        plan = jobs.RasterPipelinePlanJob(
            src=src.gdal_path,
            steps=steps_data,
            output_name=PurePosixPath(output).name,
            format=format,
            options=creation_options,
            threads=app.gdal_threads(),
            max_pixels=app.settings.max_pixels,
        )
        result = await read_result(app, ctx, plan)
        return result.model_copy(update={"output": target.display})
    job = jobs.RasterPipelineJob(
        src=src.gdal_path,
        dst="",
        steps=steps_data,
        format=format,
        options=creation_options,
        threads=app.gdal_threads(),
        max_pixels=app.settings.max_pixels,
    )
    written, result, warnings = await write_output(app, ctx, job, inputs=inputs, output=output, overwrite=overwrite)
    return result.model_copy(update={"output": written.display, "uri": app.sandbox.uri(written.display), "warnings": warnings})
