"""Typed job specifications: what a tool asks a worker to run.

One frozen dataclass per engine entry point. Its fields are the engine function's keyword arguments
(`progress` excepted) and `FUNC` names the function as "module:function". The server builds a job,
the executor sends it to a worker as it is, and the worker calls `FUNC(**job.kwargs(), progress=…)`.
A misspelt field or a wrong type fails in mypy; a job that drifts from its engine function fails
tests/test_jobs.py, which checks every job here against the function's signature.

GDAL-free on purpose: the server imports this module, and must never load GDAL. Results are
declared with `Job[R]` so `App.execute(job)` is typed as returning `R`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from gdal_mcp.models import (
    CategoriesResult,
    CrsDescription,
    CrsSearchResult,
    DatasetList,
    FeaturePage,
    FromTableResult,
    HydroRasterSummary,
    JoinResult,
    LineageResult,
    MeasureResult,
    MergeResult,
    OverviewsResult,
    PreviewResult,
    QueryResult,
    RasterClipResult,
    RasterInfo,
    RasterStatsResult,
    RasterSummary,
    SampleResult,
    StreamsOutput,
    TransformResult,
    ValidationReport,
    VectorInfo,
    VectorSummary,
    WatershedOutput,
    ZonalResult,
)

BBox = tuple[float, float, float, float]
Options = dict[str, Any]
Warnings = list[str]


@dataclass(frozen=True, kw_only=True)
class Job[R]:
    """A unit of GDAL work for a worker. Subclasses set FUNC and declare the engine's arguments."""

    FUNC: ClassVar[str]
    #: the engine argument that receives the path the job writes (None: the job writes nothing)
    OUTPUT: ClassVar[str | None] = None
    #: whether its output gets a provenance record (server/provenance.py)
    RECORDED: ClassVar[bool] = True

    #: the object-storage path ('/vsis3/bucket/key') the output goes to: the worker that ran the job uploads the files
    #: it wrote there, in the same task (execution/common.upload_output), so the output never has to cross from the
    #: worker's file system to the server's (a Dask worker without a shared file system). Not an engine argument.
    upload: str | None = None
    #: with `upload`, overwrite=true (approved): the upload replaces the objects that exist at its keys, each in the
    #: version seen just before it (If-Match), and those named here only in the ETag given (the version the person
    #: approved: Question targets, App.approved_versions); None: it never replaces an object. Not an engine argument.
    replace: dict[str, str] | None = None
    #: the server's part of the output's provenance record (server/provenance.py: the tool, its arguments, the paths
    #: as the caller sees them, the confirmation); the worker adds what it measures and writes the record beside the
    #: output (engine/provenance.py). None: no record (a job without an output, or --no-provenance). Not an engine
    #: argument.
    provenance: dict[str, Any] | None = dataclasses.field(default=None, repr=False)  # holds the signing key

    def kwargs(self) -> dict[str, Any]:
        """The engine function's keyword arguments: the job's fields but upload, replace and provenance."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in NOT_ENGINE_ARGUMENTS}

    def writing_to(self, path: str) -> Self:
        """The same job with its output argument set to `path` (the temporary file of an atomic write)."""
        if self.OUTPUT is None:
            raise TypeError(f"{type(self).__name__} writes no file")
        changes: dict[str, Any] = {self.OUTPUT: path}
        return dataclasses.replace(self, **changes)

    def paths(self) -> list[str]:
        """Every dataset path the job names (inputs and its output), as the server resolved them: an executor
        whose workers run elsewhere (Dask) checks them again there."""
        kwargs = self.kwargs()
        found: list[str] = []
        for key in (*PATH_FIELDS, *((self.OUTPUT,) if self.OUTPUT else ())):
            value = kwargs.get(key)
            values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            found += [v for v in values if isinstance(v, str) and v]
        return [*found, *([self.upload] if self.upload else [])]

    def input_paths(self) -> list[str]:
        """The dataset paths the job reads (Job.paths without its output and upload)."""
        output = self.output_path()
        return [p for p in self.paths() if p != output and p != self.upload]

    def output_path(self) -> str | None:
        """The path the job writes its output to (its OUTPUT argument), or None."""
        dst = getattr(self, self.OUTPUT, None) if self.OUTPUT else None
        return dst if isinstance(dst, str) and dst else None

    def modifies(self) -> list[str]:
        """Files the job changes in place (not through a temporary output the server commits): the only files
        besides its output a worker lets it write (writable()). None by default."""
        return []

    def writable(self) -> list[str]:
        """Where a worker lets this job write (gdal_mcp.execution.confine.restrict_writes): the directory its output is written
        into (a temporary directory the server made for it), and a file it changes in place with that file's
        .aux.xml. Nothing else: a job that only reads writes nothing (the worker adds its private temporary
        directory)."""
        import os

        dst = self.output_path()
        out = [os.path.dirname(dst)] if dst else []
        for path in self.modifies():
            out += [path, *[p for p in (path + ".aux.xml",) if os.path.exists(p)]]
        if self.modifies() and self.provenance and self.provenance.get("record_dir"):
            out.append(str(self.provenance["record_dir"]))  # the changed file's new provenance record, placed after
        return out

    @property
    def name(self) -> str:
        return self.FUNC

    def naming_input(self, message: str) -> str:
        """`message` prefixed with the dataset the job reads, unless it already names that file (or the
        file the job writes).

        GDAL's own messages often do not say which file they are about ('TIFFReadDirectory: …', 'Error in
        fread() …'), nor do a timeout or a crashed worker; the caller makes the path workspace-relative.
        """
        kwargs = self.kwargs()
        path = next((v for k in INPUT_FIELDS if isinstance(v := kwargs.get(k), str) and v), None)
        if path is None:
            return message
        # The file names in a GDAL name: NETCDF:"/w/f.nc":var, HDF5:"/w/f.h5"://x, /vsizip//w/a.zip/m.shp
        names = {path}
        output = kwargs.get(self.OUTPUT) if self.OUTPUT else None
        for file in [*(re.findall(r'"([^"]+)"', path) or [path]), *([output] if isinstance(output, str) else [])]:
            parts = [p for p in file.split("/") if p]
            # A member of an archive is named by its archive: "m.tif" alone could be in any zip.
            names.update([p for p in parts if p.lower().endswith(ARCHIVE_SUFFIXES)] or parts[-1:])
        return message if any(n and n in message for n in names) else f"{path}: {message}"


#: Job fields that are for the worker, not the engine function (Job.kwargs)
NOT_ENGINE_ARGUMENTS = frozenset({"upload", "replace", "provenance"})
#: Job fields holding the dataset a job reads (the first one set is the one failures name).
INPUT_FIELDS = ("path", "src", "input", "raster")
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".gz", ".7z", ".rar")
#: Job fields naming datasets or directories the job reads (the output field is each job's OUTPUT).
PATH_FIELDS = (
    *INPUT_FIELDS,
    "inputs",
    "zones",
    "like",
    "mask",
    "overlay",
    "join",
    "points",
    "append_to",
    "vrt_dir",
    "directory",
    "roots",
)


class WriteJob[R](Job[R]):
    """A job that writes one output file (its `dst`)."""

    OUTPUT: ClassVar[str | None] = "dst"


# ----- inspection -----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RasterInfoJob(Job[RasterInfo]):
    FUNC = "gdal_mcp.engine.raster.info:raster_info"
    path: str
    band: int | None = None
    stats: bool = False


@dataclass(frozen=True, kw_only=True)
class VectorInfoJob(Job[VectorInfo]):
    FUNC = "gdal_mcp.engine.vector.info:vector_info"
    path: str
    layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class ListDatasetsJob(Job[DatasetList]):
    FUNC = "gdal_mcp.engine.catalog:list_datasets"
    directory: str
    pattern: str | None = None
    recursive: bool = True
    limit: int = 200


@dataclass(frozen=True, kw_only=True)
class LineageJob(Job[LineageResult]):
    """dataset_lineage: the recorded steps that made a workspace file, found among the records in `roots`."""

    FUNC = "gdal_mcp.engine.lineage:lineage"
    path: str
    roots: list[str]
    max_steps: int = 50
    key: str = dataclasses.field(default="", repr=False)  # the records' signing key: only signed records are believed


@dataclass(frozen=True, kw_only=True)
class ListRemoteJob(Job[DatasetList]):
    """list_datasets on an object-storage prefix (a /vsis3/ path the sandbox allowed)."""

    FUNC = "gdal_mcp.engine.catalog:list_remote"
    prefix: str
    pattern: str | None = None
    recursive: bool = True
    limit: int = 200

    def paths(self) -> list[str]:
        return [self.prefix]


@dataclass(frozen=True, kw_only=True)
class RemoteNamesJob(Job[list[str]]):
    """The object names below an allowed /vsis3/ prefix that a glob matches (input_pattern in a bucket workspace)."""

    FUNC = "gdal_mcp.engine.catalog:remote_names"
    prefix: str
    pattern: str
    limit: int = 1000

    def paths(self) -> list[str]:
        return [self.prefix]


@dataclass(frozen=True, kw_only=True)
class WorkerStatusJob(Job[dict[str, Any]]):
    """pid, limits and library versions of the worker that runs it (diagnostics, tests)."""

    FUNC = "gdal_mcp.engine.diagnostics:worker_status"


@dataclass(frozen=True, kw_only=True)
class ProbeAccessJob(Job[dict[str, Any]]):
    """The confinement self-test: what a worker can reach when it bypasses every check (engine.diagnostics)."""

    FUNC = "gdal_mcp.engine.diagnostics:probe_access"
    read: list[str]
    connect: list[tuple[str, int]]
    write: list[str] | None = None


# ----- coordinates and CRS (no files) ---------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CrsInfoJob(Job[CrsDescription]):
    FUNC = "gdal_mcp.engine.coordinates:describe"
    crs: str


@dataclass(frozen=True, kw_only=True)
class CrsSearchJob(Job[CrsSearchResult]):
    FUNC = "gdal_mcp.engine.coordinates:search"
    query: str | None = None
    bbox: BBox | None = None
    kind: Literal["projected", "geographic", "any"] = "any"
    limit: int = 20


@dataclass(frozen=True, kw_only=True)
class TransformJob(Job[TransformResult]):
    FUNC = "gdal_mcp.engine.coordinates:transform"
    points: list[tuple[float, ...]]
    src_crs: str
    dst_crs: str
    always_xy: bool = True


@dataclass(frozen=True, kw_only=True)
class SameCrsJob(Job[bool]):
    FUNC = "gdal_mcp.engine.coordinates:same_crs"
    a: str
    b: str


@dataclass(frozen=True, kw_only=True)
class Wgs84BoundsJob(Job["tuple[float, float, float, float] | None"]):
    FUNC = "gdal_mcp.engine.coordinates:wgs84_bounds"
    crs: str
    bounds: tuple[float, float, float, float]


# ----- raster ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ConvertRasterJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.convert:convert"
    src: str
    dst: str = ""
    format: str | None = None
    options: Options | None = None
    bands: list[int] | None = None
    projwin: BBox | None = None
    projwin_crs: str | None = None
    output_type: str | None = None
    nodata: float | None = None
    scale: bool | list[float] | None = None
    resolution: float | list[float] | None = None
    size: list[int] | None = None
    resampling: str = "nearest"
    overview_resampling: str | None = None
    threads: int = 1
    max_pixels: int = 2**34


@dataclass(frozen=True, kw_only=True)
class ReprojectRasterJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.warp:reproject"
    src: str
    dst: str = ""
    dst_crs: str | None = None
    src_crs: str | None = None
    resampling: str = "nearest"
    resolution: float | list[float] | None = None
    size: list[int] | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    nodata: float | None = None
    src_nodata: float | None = None
    output_type: str | None = None
    like: str | None = None
    gcp_transformer: Literal["polynomial", "polynomial_1", "polynomial_2", "polynomial_3", "tps", "rpc"] | None = None
    target_aligned_pixels: bool = False
    format: str | None = None
    options: Options | None = None
    threads: int = 1
    max_pixels: int = 2**34


@dataclass(frozen=True, kw_only=True)
class MosaicJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.mosaic:mosaic"
    inputs: list[str]
    dst: str = ""
    vrt_dir: str | None = None
    resolution: str | list[float] = "average"
    separate: bool = False
    dst_crs: str | None = None
    resampling: str = "nearest"
    nodata: float | None = None
    src_nodata: float | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    format: str | None = None
    options: Options | None = None
    threads: int = 1
    max_pixels: int = 2**34  # gdal_mcp.engine.grid.DEFAULT_MAX_PIXELS; the tool passes --max-pixels


@dataclass(frozen=True, kw_only=True)
class ClipRasterJob(WriteJob[tuple[RasterClipResult, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.clip:clip"
    src: str
    dst: str = ""
    bbox: BBox | None = None
    bbox_crs: str | None = None
    geometry: dict[str, Any] | None = None
    geometry_crs: str | None = None
    mask: str | None = None
    mask_layer: str | None = None
    mask_where: str | None = None
    crop: bool = True
    all_touched: bool = False
    nodata: float | None = None
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class ExternalOverviewsJob(WriteJob[tuple[OverviewsResult, Warnings]]):
    """gdaladdo -ro: `dst` is the temporary `<name>.ovr`; the input is only read."""

    FUNC = "gdal_mcp.engine.raster.overviews:overviews_external"
    RECORDED = False  # a side file of its raster (an .ovr's own record would be left behind by workspace_delete)
    src: str
    dst: str = ""
    levels: Literal["auto"] | list[int] = "auto"
    resampling: str = "nearest"


@dataclass(frozen=True, kw_only=True)
class OverviewsJob(WriteJob[tuple[OverviewsResult, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.overviews:overviews_on_copy"
    src: str
    dst: str = ""
    action: Literal["add", "delete"]
    levels: Literal["auto"] | list[int] = "auto"
    resampling: str = "nearest"


@dataclass(frozen=True, kw_only=True)
class EditRasterJob(Job[tuple[RasterSummary, Warnings]]):
    """gdal_edit.py: in place when `dst` is None (GeoTIFF), else on a copy written to `dst`."""

    FUNC = "gdal_mcp.engine.raster.edit:edit"
    OUTPUT = "dst"

    src: str
    dst: str | None = None
    crs: str | None = None
    nodata: float | None = None
    unset_nodata: bool = False
    scale: float | list[float] | None = None
    offset: float | list[float] | None = None
    bounds: BBox | None = None
    metadata: dict[str, str | None] | None = None
    band_descriptions: list[str | None] | None = None
    units: str | list[str | None] | None = None

    def modifies(self) -> list[str]:
        return [self.src] if self.dst is None else []


@dataclass(frozen=True, kw_only=True)
class ReclassifyJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.reclassify:reclassify"
    src: str
    dst: str = ""
    classes: list[dict[str, Any]] | None = None
    mapping: dict[str, Any] | None = None
    default: str | float = "nodata"
    band: int = 1
    output_type: str | None = None
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class RasterStatsJob(Job[RasterStatsResult]):
    FUNC = "gdal_mcp.engine.raster.stats:raster_stats"
    path: str
    bands: list[int] | None = None
    percentiles: list[float] | None = None
    histogram_bins: int | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    thresholds: list[float] | None = None
    weights: str = "none"


@dataclass(frozen=True, kw_only=True)
class CategoriesJob(Job[CategoriesResult]):
    """Class areas: per value, pixel count, area and fraction (raster_stats categorical=true)."""

    FUNC = "gdal_mcp.engine.raster.categories:categories"
    path: str
    bands: list[int] | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None


@dataclass(frozen=True, kw_only=True)
class SampleJob(Job[SampleResult]):
    FUNC = "gdal_mcp.engine.raster.sample:sample"
    path: str
    points: list[tuple[float, float]]
    points_crs: str | None = None
    bands: list[int] | None = None


@dataclass(frozen=True, kw_only=True)
class SampleLayerJob(WriteJob[tuple[SampleResult, Warnings]]):
    """Extract values to points: a point layer copied to `dst` with one field per band."""

    FUNC = "gdal_mcp.engine.features.sample_points:sample_layer"
    src: str
    points: str
    dst: str = ""
    points_layer: str | None = None
    bands: list[int] | None = None
    format: str | None = None


@dataclass(frozen=True, kw_only=True)
class XyzJob(WriteJob[tuple[dict[str, Any], Warnings]]):
    FUNC = "gdal_mcp.engine.raster.xyz:to_xyz"
    src: str
    dst: str = ""
    bands: list[int] | None = None
    skip_nodata: bool = True
    bbox: BBox | None = None
    bbox_crs: str | None = None


# ----- analysis -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TerrainJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.terrain:terrain"
    src: str
    dst: str = ""
    product: Literal["hillshade", "slope", "aspect", "roughness", "tri", "tpi", "color-relief"]
    band: int = 1
    z_factor: float = 1.0
    azimuth: float = 315.0
    altitude: float = 45.0
    slope_units: Literal["degrees", "percent"] = "degrees"
    scale: float | None = None
    algorithm: Literal["Horn", "ZevenbergenThorne"] = "Horn"
    hillshade_mode: Literal["standard", "combined", "multidirectional", "igor"] = "standard"
    zero_for_flat: bool = False
    trigonometric: bool = False
    colors: str | list[Any] | None = None
    color_mode: Literal["interpolate", "nearest", "exact"] = "interpolate"
    alpha: bool = False
    compute_edges: bool = False
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class CalcJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.calc:calc"
    inputs: dict[str, str] | list[str]
    expression: str | list[str]
    dst: str = ""
    band: int | None = None
    output_type: str | None = None
    nodata: float | None = None
    format: str | None = None
    creation_options: Options | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None


@dataclass(frozen=True, kw_only=True)
class PolygonizeJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.features.polygonize:polygonize"
    src: str
    dst: str = ""
    band: int = 1
    mask: str | None = None
    connectivity: Literal[4, 8] = 4
    field: str = "value"
    nodata_excluded: bool = True
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class RasterizeJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.features.rasterize:rasterize"
    src: str
    dst: str = ""
    layer: str | None = None
    where: str | None = None
    burn_value: float | None = None
    attribute: str | None = None
    like: str | None = None
    resolution: float | list[float] | None = None
    size: list[int] | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    crs: str | None = None
    all_touched: bool = False
    invert: bool = False
    add: bool = False
    dtype: str | None = None
    init: float | None = None
    nodata: float | None = None
    max_pixels: int = 2**34  # gdal_mcp.engine.grid.DEFAULT_MAX_PIXELS; the tool passes --max-pixels
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class ZonalJob(Job[tuple[ZonalResult, Warnings]]):
    """Zonal statistics; writes the zones with their statistics only when `dst` is given."""

    FUNC = "gdal_mcp.engine.features.zonal:zonal_stats"
    OUTPUT = "dst"
    raster: str
    zones: str
    layer: str | None = None
    band: int = 1
    stats: list[str] | None = None
    all_touched: bool = False
    id_field: str | None = None
    categorical: bool = False
    thresholds: list[float] | None = None
    limit: int = 200
    dst: str | None = None
    format: str | None = None


@dataclass(frozen=True, kw_only=True)
class ContourJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.features.contour:contour"
    src: str
    dst: str = ""
    interval: float | None = None
    levels: list[float] | None = None
    base: float = 0.0
    band: int = 1
    polygons: bool = False
    attribute: str = "elev"
    nodata: float | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class FillNodataJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.fill:fill_nodata"
    src: str
    dst: str = ""
    max_distance: float = 100
    smoothing_iterations: int = 0
    band: int = 1
    format: str | None = None
    creation_options: Options | None = None


# ----- hydrology (engine/hydrology/) -------------------------------------------------------------------------
Conditioning = Literal["none", "fill", "breach"]
HydroInput = Literal["dem", "flow_direction"]


@dataclass(frozen=True, kw_only=True)
class DemConditionJob(WriteJob[tuple[HydroRasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.hydrology.condition:dem_condition"
    src: str
    dst: str = ""
    method: Literal["fill", "breach"] = "fill"
    band: int = 1
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class FlowDirectionJob(WriteJob[tuple[HydroRasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.hydrology.flow:flow_direction"
    src: str
    dst: str = ""
    band: int = 1
    condition: Conditioning = "fill"
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class FlowAccumulationJob(WriteJob[tuple[HydroRasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.hydrology.flow:flow_accumulation"
    src: str
    dst: str = ""
    band: int = 1
    input_type: HydroInput = "dem"
    condition: Conditioning = "fill"
    units: Literal["cells", "m2", "km2"] = "cells"
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class WatershedJob(WriteJob[tuple[WatershedOutput, Warnings]]):
    FUNC = "gdal_mcp.engine.hydrology.watershed:watershed"
    src: str
    dst: str = ""
    points: list[tuple[float, float]]
    points_crs: str | None = None
    snap_distance: float = 0.0
    band: int = 1
    input_type: HydroInput = "dem"
    condition: Conditioning = "fill"
    output_kind: Literal["polygons", "raster"] = "polygons"
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class StreamNetworkJob(WriteJob[tuple[StreamsOutput, Warnings]]):
    FUNC = "gdal_mcp.engine.hydrology.streams:stream_network"
    src: str
    dst: str = ""
    threshold_km2: float | None = None
    threshold_cells: int | None = None
    band: int = 1
    input_type: HydroInput = "dem"
    condition: Conditioning = "fill"
    max_size: int = 768
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class SieveJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.sieve:sieve"
    src: str
    dst: str = ""
    threshold: int
    connectedness: Literal[4, 8] = 4
    band: int = 1
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class ProximityJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.proximity:proximity"
    src: str
    dst: str = ""
    band: int = 1
    target_values: list[float] | None = None
    distance_units: Literal["geo", "pixel"] = "geo"
    max_distance: float | None = None
    nodata: float | None = None
    output_type: str = "Float32"
    format: str | None = None
    creation_options: Options | None = None


# ----- vector ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ConvertVectorJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.convert:convert"
    src: str
    dst: str = ""
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None
    where: str | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    fields: list[str] | None = None
    sql: str | None = None
    dst_crs: str | None = None
    src_crs: str | None = None
    explode_collections: bool = False
    promote_to_multi: bool = False
    layer_options: Options | None = None
    sql_dialect: str | None = None
    open_options: dict[str, str] | None = None
    mode: Literal["create", "append", "add_layer"] = "create"
    append_to: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReprojectVectorJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.convert:reproject"
    src: str
    dst: str = ""
    dst_crs: str
    src_crs: str | None = None
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class ClipVectorJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.clip:clip"
    src: str
    dst: str = ""
    layer: str | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    geometry: dict[str, Any] | None = None
    geometry_crs: str | None = None
    mask: str | None = None
    mask_layer: str | None = None
    mask_where: str | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class FeaturesJob(Job[FeaturePage]):
    FUNC = "gdal_mcp.engine.vector.features:features"
    path: str
    layer: str | None = None
    where: str | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    fields: list[str] | None = None
    limit: int = 50
    offset: int = 0
    geometry_mode: Literal["full", "simplified", "none"] = "full"
    dst_crs: str | None = None
    intersects: dict[str, Any] | None = None
    intersects_crs: str | None = None


@dataclass(frozen=True, kw_only=True)
class LayerNamesJob(Job[list[str]]):
    FUNC = "gdal_mcp.engine.vector.opening:layer_names"
    path: str


@dataclass(frozen=True, kw_only=True)
class QueryJob(Job[QueryResult]):
    FUNC = "gdal_mcp.engine.vector.query:query"
    src: str
    sql: str | None = None
    sql_dialect: str | None = None
    layer: str | None = None
    where: str | None = None
    fields: list[str] | None = None
    group_by: list[str] | None = None
    aggregate: dict[str, list[str]] | None = None
    order_by: list[str] | None = None
    limit: int = 100
    offset: int = 0
    geometry: Literal["none", "wkt", "geojson"] = "none"


@dataclass(frozen=True, kw_only=True)
class BufferJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.geometry:buffer"
    src: str
    dst: str = ""
    distance: float
    units: str = "m"
    layer: str | None = None
    segments: int = 8
    cap_style: str = "round"
    join_style: str = "round"
    format: str | None = None
    output_layer: str | None = None
    dissolve: bool = False
    distance_field: str | None = None


@dataclass(frozen=True, kw_only=True)
class SimplifyJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.geometry:simplify"
    src: str
    dst: str = ""
    tolerance: float
    units: str = "m"
    preserve_topology: bool = True
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None
    coverage: bool = False


@dataclass(frozen=True, kw_only=True)
class DissolveJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.geometry:dissolve"
    src: str
    dst: str = ""
    by: str | list[str] | None = None
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None
    aggregate: dict[str, list[str]] | None = None


@dataclass(frozen=True, kw_only=True)
class OverlayJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.overlay:overlay"
    src: str
    dst: str = ""
    overlay: str
    how: str = "intersection"
    layer: str | None = None
    overlay_layer: str | None = None
    keep_fields: str = "both"
    keep_geom_type: bool = True
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class JoinJob(WriteJob[tuple[JoinResult, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.join:join"
    src: str
    dst: str = ""
    join: str
    predicate: str = "intersects"
    on: str | list[str] | None = None
    max_distance: float | None = None
    units: str = "m"
    k: int = 1
    how: str = "left"
    aggregate: dict[str, Any] | None = None
    distance_field: str | None = None
    key_cast: str | None = None
    layer: str | None = None
    join_layer: str | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class ValidateJob(Job[tuple[ValidationReport, Warnings]]):
    """Validate geometries; writes a repaired copy only when `dst` is given."""

    FUNC = "gdal_mcp.engine.vector.validate:validate"
    OUTPUT = "dst"
    path: str
    dst: str | None = None
    layer: str | None = None
    max_examples: int = 10


@dataclass(frozen=True, kw_only=True)
class FromTableJob(WriteJob[tuple[FromTableResult, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.table:from_table"
    src: str
    dst: str = ""
    x: str | None = None
    y: str | None = None
    wkt: str | None = None
    crs: str = "EPSG:4326"
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class MeasureJob(Job[tuple[MeasureResult, Warnings]]):
    """Measures per feature; writes the layer with the measure fields only when `dst` is given."""

    FUNC = "gdal_mcp.engine.vector.measure:measure"
    OUTPUT = "dst"
    src: str
    dst: str | None = None
    measures: list[str] | None = None
    units: str = "m"
    layer: str | None = None
    id_field: str | None = None
    limit: int = 200
    offset: int = 0
    format: str | None = None
    output_layer: str | None = None
    where: str | None = None
    geodesic: bool = False


@dataclass(frozen=True, kw_only=True)
class GeometryOpJob(WriteJob[tuple[VectorSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.geometry_ops:geometry_op"
    src: str
    dst: str = ""
    operation: str
    grid_size: float | None = None
    layer: str | None = None
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class MergeJob(WriteJob[tuple[MergeResult, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.merge:merge"
    inputs: list[str]
    dst: str = ""
    source_names: list[str] | None = None
    layer: str | None = None
    source_field: str | None = "source"
    mode: str = "single"
    format: str | None = None
    output_layer: str | None = None


# ----- previews -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RasterPreviewJob(Job[PreviewResult]):
    FUNC = "gdal_mcp.engine.preview.raster:raster_preview"
    OUTPUT = "dst"
    path: str
    bands: list[int] | None = None
    stretch: Literal["percentile", "minmax", "none"] = "percentile"
    percentiles: tuple[float, float] = (2, 98)
    colormap: str | None = None
    max_size: int = 768
    bbox: BBox | None = None
    bbox_crs: str | None = None
    scale_bar: bool = True
    dst: str | None = None


@dataclass(frozen=True, kw_only=True)
class VectorPreviewJob(Job[PreviewResult]):
    FUNC = "gdal_mcp.engine.preview.vector:vector_preview"
    OUTPUT = "dst"
    path: str
    layer: str | None = None
    max_size: int = 768
    color_by: str | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    where: str | None = None
    scale_bar: bool = True
    dst: str | None = None


# ----- GDAL 3.12 algorithms: raster_pipeline -----
from gdal_mcp.models import RasterPipelineResult  # noqa: E402 - this helper's block of the shared file


def _step_likes(steps: list[dict[str, Any]]) -> list[str]:
    """The datasets a pipeline's clip steps take their bounds from (`like`), for Job.paths()."""
    return [s["like"] for s in steps if isinstance(s, dict) and isinstance(s.get("like"), str) and s["like"]]


@dataclass(frozen=True, kw_only=True)
class RasterPipelineJob(WriteJob[tuple[RasterPipelineResult, Warnings]]):
    """raster_pipeline: the steps run by GDAL in one pass from `src` into `dst`."""

    FUNC = "gdal_mcp.engine.raster.pipeline:run_pipeline"
    src: str
    dst: str
    steps: list[dict[str, Any]]
    format: str | None = None
    options: Options | None = None
    threads: int = 1
    max_pixels: int = 2**34  # gdal_mcp.engine.grid.DEFAULT_MAX_PIXELS; the tool passes --max-pixels

    def paths(self) -> list[str]:
        return [*super().paths(), *_step_likes(self.steps)]


@dataclass(frozen=True, kw_only=True)
class RasterPipelinePlanJob(Job[RasterPipelineResult]):
    """raster_pipeline plan_only: each step's grid, nothing run or written. `output_name` only picks the format."""

    FUNC = "gdal_mcp.engine.raster.pipeline:plan_pipeline"
    src: str
    steps: list[dict[str, Any]]
    output_name: str
    format: str | None = None
    options: Options | None = None
    threads: int = 1
    max_pixels: int = 2**34  # gdal_mcp.engine.grid.DEFAULT_MAX_PIXELS; the tool passes --max-pixels

    def paths(self) -> list[str]:
        return [*super().paths(), *_step_likes(self.steps)]


# ----- GDAL 3.12 algorithms: vector_pipeline -----
from gdal_mcp.models import VectorPipelinePlan, VectorPipelineRun  # noqa: E402 (this helper's own block)


@dataclass(frozen=True, kw_only=True)
class VectorPipelineJob(WriteJob[tuple[VectorPipelineRun, Warnings]]):
    FUNC = "gdal_mcp.engine.vector.pipeline:pipeline"
    src: str
    dst: str = ""
    steps: list[dict[str, Any]]
    layer: str | None = None
    open_options: dict[str, str] | None = None
    format: str | None = None
    output_layer: str | None = None
    layer_options: Options | None = None
    mask: list[str] | None = None  # the vector files clip steps read (in PATH_FIELDS: checked again where the job runs)


@dataclass(frozen=True, kw_only=True)
class VectorPipelinePlanJob(Job[VectorPipelinePlan]):
    FUNC = "gdal_mcp.engine.vector.pipeline:plan"
    src: str
    steps: list[dict[str, Any]]
    dst: str  # names the output (its extension gives the format); nothing is written
    layer: str | None = None
    open_options: dict[str, str] | None = None
    format: str | None = None
    output_layer: str | None = None
    layer_options: Options | None = None
    mask: list[str] | None = None


# ----- GDAL 3.12 algorithms: raster_viewshed, raster_compare -----
from gdal_mcp.models import RasterCompareResult, ViewshedResult  # noqa: E402 - this helper's block of the shared file


@dataclass(frozen=True, kw_only=True)
class ViewshedJob(WriteJob[tuple[ViewshedResult, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.viewshed:viewshed"
    src: str
    dst: str = ""
    observers: list[list[float]]
    observer_crs: str | None = None
    observer_height: float = 2.0
    target_height: float = 0.0
    max_distance: float | None = None
    curvature_coefficient: float | None = None
    visible_value: int | None = None
    invisible_value: int | None = None
    out_of_range_value: int | None = None
    band: int = 1
    format: str | None = None
    creation_options: Options | None = None


@dataclass(frozen=True, kw_only=True)
class CompareRasterJob(Job[tuple[RasterCompareResult, Warnings]]):
    """Compare two rasters; writes the difference raster only when `dst` is given."""

    FUNC = "gdal_mcp.engine.raster.compare:compare"
    OUTPUT = "dst"
    src: str
    reference: str
    dst: str | None = None
    tolerance: float = 0.0
    skip: list[str] | None = None
    format: str | None = None
    creation_options: Options | None = None

    def paths(self) -> list[str]:
        """The reference is read too (PATH_FIELDS does not name it)."""
        return [*super().paths(), self.reference]


# ----- GDAL 3.12 algorithms: raster_focal -----
from gdal_mcp.models import RasterFocalResult  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class FocalJob(WriteJob[tuple[RasterFocalResult, Warnings]]):
    FUNC = "gdal_mcp.engine.raster.focal:focal"
    src: str
    dst: str = ""
    statistic: Literal["mean", "min", "max", "sum", "std", "median", "mode", "range"] = "mean"
    shape: Literal["square", "circle"] = "square"
    size: int | None = None
    radius: float | None = None
    kernel: list[list[float]] | None = None
    bands: list[int] | None = None
    output_type: str = "Float32"
    nodata: float | None = None
    format: str | None = None
    creation_options: Options | None = None


# ----- GDAL 3.12 algorithms: raster_tiles -----
from gdal_mcp.models import TilesSummary  # noqa: E402 - this helper's block of the shared file


@dataclass(frozen=True, kw_only=True)
class WebTilesJob(WriteJob[tuple[TilesSummary, Warnings]]):
    """raster_tiles: `dst` is a tile directory, or an MBTiles file when it ends in .mbtiles."""

    FUNC = "gdal_mcp.engine.raster.web_tiles:raster_tiles"
    src: str
    dst: str = ""
    tile_format: Literal["PNG", "WEBP", "JPEG"] = "PNG"
    tiling_scheme: str = "WebMercatorQuad"
    convention: Literal["xyz", "tms"] = "xyz"
    min_zoom: int | None = None
    max_zoom: int | None = None
    resampling: str = "cubic"
    webviewer: str = "none"
    skip_blank: bool = False
    bbox: BBox | None = None
    bbox_crs: str | None = None
    max_tiles: int = 100_000  # gdal_mcp.engine.raster.web_tiles.MAX_TILES; the tool passes --max-tiles
    threads: int = 1


# ----- GDAL 3.12 algorithms: raster_footprint, dataset_index -----
from gdal_mcp.models import DatasetIndexResult, FootprintResult  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class FootprintJob(WriteJob[tuple[FootprintResult, Warnings]]):
    FUNC = "gdal_mcp.engine.features.footprint:footprint"
    src: str
    dst: str = ""
    bands: list[int] | None = None
    combine_bands: Literal["union", "intersection"] = "union"
    src_nodata: float | None = None
    dst_crs: str | None = None
    simplify: float | None = None
    min_ring_area: float | None = None
    max_points: int | None = 100
    convex_hull: bool = False
    split_multipolygons: bool = False
    format: str | None = None
    output_layer: str | None = None


@dataclass(frozen=True, kw_only=True)
class DatasetIndexJob(WriteJob[tuple[DatasetIndexResult, Warnings]]):
    FUNC = "gdal_mcp.engine.features.index:dataset_index"
    inputs: list[str]
    dst: str = ""
    names: list[str]
    dataset_type: Literal["raster", "vector"] | None = None
    dst_crs: str | None = None
    layers: list[str] | None = None
    metadata_fields: list[str] | None = None
    format: str | None = None
    output_layer: str | None = None


# ----- GDAL 3.12 algorithms: vector_interpolate -----
@dataclass(frozen=True, kw_only=True)
class InterpolateJob(WriteJob[tuple[RasterSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.features.interpolate:interpolate"
    src: str
    dst: str = ""
    method: str = "invdist"
    layer: str | None = None
    where: str | None = None
    z_field: str | None = None
    power: float | None = None
    smoothing: float | None = None
    radius: float | None = None
    min_points: int | None = None
    max_points: int | None = None
    resolution: float | list[float] | None = None
    size: list[int] | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    output_type: str = "Float32"
    nodata: float | None = None
    format: str | None = None
    creation_options: Options | None = None
    max_pixels: int = 2**34  # gdal_mcp.engine.grid.DEFAULT_MAX_PIXELS; the tool passes --max-pixels


def all_jobs() -> list[type[Job[Any]]]:
    """Every concrete job class (for the signature test and the worker's allow-list)."""
    found: list[type[Job[Any]]] = []
    pending: list[type[Any]] = [Job]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if "FUNC" in sub.__dict__ and sub.__module__ == __name__:  # not test doubles defined elsewhere
                found.append(sub)
    return sorted(found, key=lambda c: c.__name__)


# ----- outputs in object storage -----
@dataclass(frozen=True, kw_only=True)
class DeleteObjectsJob(Job[int]):
    """Delete the objects an upload killed midway had created (read from its journal by App.execute)."""

    FUNC = "gdal_mcp.engine.upload:delete_objects"
    objects: list[str]

    def paths(self) -> list[str]:
        return [*self.objects]


@dataclass(frozen=True, kw_only=True)
class ReadObjectJob(Job[tuple[int, bytes]]):
    """Bytes of an object of the bucket workspace (resources/read, downloads): (its size, `length` bytes from `offset`)."""

    FUNC = "gdal_mcp.engine.upload:read_object"
    path: str
    offset: int = 0
    length: int = 8 * 1024 * 1024

    def paths(self) -> list[str]:
        return [self.path]


@dataclass(frozen=True, kw_only=True)
class DescribeObjectsJob(Job[dict[str, Any]]):
    """The objects of the datasets whose main objects are `objects` (/vsis3/ paths), with size, date and ETag: what a
    person approves before one is replaced, moved or deleted, and what the workspace_* tools change
    (engine/objects.describe)."""

    FUNC = "gdal_mcp.engine.objects:describe"
    objects: list[str]

    def paths(self) -> list[str]:
        return [*self.objects]


@dataclass(frozen=True, kw_only=True)
class FetchObjectsJob(WriteJob[dict[str, Any]]):
    """A dataset's objects read into the job's output directory under new names (the main object's last, as `dst`'s),
    then uploaded by the worker like every output (Job.upload): workspace_copy and workspace_move of objects."""

    FUNC = "gdal_mcp.engine.objects:fetch"
    OUTPUT = "dst"
    RECORDED = False  # a copy keeps the copied dataset's own provenance record (one of its objects)
    sources: list[str]
    names: list[str]
    dst: str = ""

    def paths(self) -> list[str]:
        return [*self.sources, *([self.dst] if self.dst else []), *([self.upload] if self.upload else [])]


@dataclass(frozen=True, kw_only=True)
class DeleteVersionsJob(Job[list[str]]):
    """Delete objects, each only in the version given ((/vsis3/ path, ETag) pairs, the main object first):
    workspace_delete and the end of workspace_move (engine/objects.delete)."""

    FUNC = "gdal_mcp.engine.objects:delete"
    objects: list[tuple[str, str]]

    def paths(self) -> list[str]:
        return [p for p, _ in self.objects]


# ----- STAC: stac_search -----
from gdal_mcp.models import StacSearchResult  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class StacSearchJob(Job[StacSearchResult]):
    """stac_search: `catalog` is the real path of a workspace STAC JSON file, or an http(s) URL the sandbox allowed."""

    FUNC = "gdal_mcp.engine.stac:stac_search"
    catalog: str
    collections: list[str] | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    datetime: str | None = None
    query: dict[str, dict[str, Any]] | None = None
    sortby: list[str] | None = None
    limit: int = 10
    page_token: str | None = None
    assets: list[str] | None = None
    max_walk: int = 10_000  # gdal_mcp.engine.stac_static.MAX_WALK

    def paths(self) -> list[str]:
        """The catalog read (a Dask worker checks it again there; its field is not one of PATH_FIELDS)."""
        return [self.catalog]

    def naming_input(self, message: str) -> str:
        """Failures name the catalog searched unless they already do (a timeout, a crashed worker)."""
        name = self.catalog.split("?", 1)[0]
        short = name.rstrip("/").rsplit("/", 1)[-1]
        return message if short and short in message else f"{name}: {message}"


# ----- cubes: netCDF / HDF5 / Zarr variables with a time axis -----
from gdal_mcp.models import CubeAggregateSummary, CubeInfo, CubeSeriesResult, CubeSubsetSummary  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class CubeInfoJob(Job[CubeInfo]):
    FUNC = "gdal_mcp.engine.cube.info:cube_info"
    path: str
    variable: str | None = None


@dataclass(frozen=True, kw_only=True)
class CubeAggregateJob(WriteJob[tuple[CubeAggregateSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.cube.aggregate:aggregate"
    src: str
    dst: str
    variable: str | None = None
    statistic: Literal["mean", "sum", "min", "max", "std", "count", "median", "percentile"] = "mean"
    percentile: float | None = None
    period: str = "month"
    climatology: bool = False
    start: str | None = None
    end: str | None = None
    level: float | str | None = None
    reference: tuple[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class CubeSeriesJob(Job[CubeSeriesResult]):
    """cube_series; with `dst` (output=) every row also goes to that CSV."""

    FUNC = "gdal_mcp.engine.cube.series:series"
    OUTPUT = "dst"
    src: str
    variable: str | None = None
    points: list[tuple[float, float]] | None = None
    points_crs: str | None = None
    zones: str | None = None
    zones_layer: str | None = None
    zone_field: str | None = None
    start: str | None = None
    end: str | None = None
    level: float | str | None = None
    max_rows: int = 1000
    dst: str | None = None
    plot: bool = False


@dataclass(frozen=True, kw_only=True)
class CubeSubsetJob(WriteJob[tuple[CubeSubsetSummary, Warnings]]):
    FUNC = "gdal_mcp.engine.cube.subset:subset"
    src: str
    dst: str = ""
    variable: str | None = None
    start: str | None = None
    end: str | None = None
    level: float | str | None = None
    bbox: BBox | None = None
    bbox_crs: str | None = None
    per_step: bool = False
