"""Result models shared by the engine (which fills them) and the tools (which return them).

Plain pydantic: no MCP imports, picklable across the worker pipe. Paths inside are real paths in the
worker; the server makes them workspace-relative before they reach a client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    """The base of every result model here: built on first use, not on import (defer_build). A tool returns one or
    two of them, and building all ~70 at import was ~0.1 s of every cold start."""

    model_config = ConfigDict(defer_build=True)


class RemoteReads(Model):
    """What a job read from remote locations, as GDAL counted it (its network statistics)."""

    requests: int = Field(description="HTTP requests (HEAD and ranged GETs)")
    bytes: int = Field(description="Bytes downloaded")
    files: int = Field(description="Remote files read from")


class ReadsRemote(Model):
    """A tool result that says what its job downloaded when it read remote data."""

    remote: RemoteReads | None = Field(
        None, description="Requests and bytes the job fetched from remote locations (null when it read none)"
    )


Number = float | int
NoData = float | Literal["nan", "inf", "-inf"] | None


class Bounds(Model):
    left: float
    bottom: float
    right: float
    top: float


class CRSInfo(Model):
    epsg: int | None = Field(None, description="EPSG code when the CRS matches one")
    name: str | None = None
    wkt: str
    proj4: str | None = None
    is_geographic: bool = False
    units: str | None = Field(None, description="Linear or angular unit of the axes")


class BandStatistics(Model):
    min: float | None
    max: float | None
    mean: float | None
    std: float | None = Field(description="Population standard deviation of valid pixels")
    sum: float | None = None
    valid_count: int
    nodata_count: int
    valid_percent: float


BAND_DIMENSIONS_DOC = (
    'Where this band sits on the variable\'s other dimensions (netCDF/HDF5/Zarr), e.g. {"time": '
    '"2020-07-01T00:00:00", "level": 850.0}: times as ISO 8601 in the file\'s calendar, other values in the '
    "dimension's units (see dimensions); empty for an ordinary raster"
)


class DimensionInfo(Model):
    """A non-spatial dimension of a netCDF/HDF5/Zarr variable, each of whose values is a band."""

    name: str
    units: str | None = Field(None, description="Units as the file states them (e.g. 'hPa', 'days since 2000-01-01')")
    calendar: str | None = Field(None, description="CF calendar the times were decoded in (standard, noleap, 360_day …)")
    values: Literal["iso_datetime", "coordinate", "index"] = Field(
        description="What the bands' values of this dimension are: iso_datetime (CF time decoded to ISO 8601), "
        "coordinate (the coordinate value, in units) or index (0-based position: the file gives no coordinate)"
    )


class SubdatasetInfo(Model):
    path: str = Field(description="Pass it as path to raster_info or any raster tool to open this subdataset")
    description: str | None = Field(None, description="GDAL's description: shape, variable name and data type")


class BandInfo(Model):
    index: int = Field(description="1-based band number")
    dtype: str
    nodata: NoData = None
    scale: float = 1.0
    offset: float = 0.0
    unit: str | None = None
    description: str | None = None
    color_interp: str
    block_size: tuple[int, int] = Field(description="[width, height] of a block")
    overviews: list[int] = Field(default_factory=list, description="Overview decimation factors")
    mask_flags: list[str] = Field(default_factory=list)
    dimensions: dict[str, str | int | float] = Field(default_factory=dict, description=BAND_DIMENSIONS_DOC)
    statistics: BandStatistics | None = Field(None, description="Exact statistics (only with stats=true)")


class GcpInfo(Model):
    count: int = Field(description="Number of ground control points")
    crs: str | None = Field(None, description="CRS of the GCPs' map coordinates (EPSG:n when it matches one)")


class RasterInfo(ReadsRemote):
    path: str
    driver: str
    kind: Literal["raster", "container"] = Field(
        "raster",
        description="container: a file of subdatasets (netCDF/HDF5 variables) with no bands of its own; size, "
        "transform, bounds and resolution are then null: open one of subdatasets",
    )
    width: int | None = Field(description="Pixels; null for a container")
    height: int | None = Field(description="Pixels; null for a container")
    count: int = Field(description="Number of bands")
    crs: CRSInfo | None = None
    transform: list[float] | None = Field(description="GDAL geotransform (x0, dx, rx, y0, ry, dy); null for a container")
    bounds: Bounds | None = Field(description="Bounds in the raster's CRS; null for a container")
    bounds_wgs84: Bounds | None = Field(None, description="Bounds in EPSG:4326 (lon/lat) when computable")
    resolution: tuple[float, float] | None = Field(description="Pixel size (x, y); null for a container")
    dimensions: list[DimensionInfo] = Field(
        default_factory=list, description="Non-spatial dimensions (time, level …) the bands stand for; see bands[].dimensions"
    )
    gcps: GcpInfo | None = Field(
        None,
        description=("Ground control points, when the raster is georeferenced by them (raster_reproject warps through them)"),
    )
    rpc: bool = Field(False, description="Whether the raster has RPCs (rational polynomial coefficients)")
    bands: list[BandInfo]
    bands_truncated: bool = False
    subdatasets: list[SubdatasetInfo] = Field(default_factory=list, description="Variables of a netCDF/HDF5/Zarr file")
    subdatasets_remaining: int = 0
    compression: str | None = None
    interleave: str | None = None
    tiled: bool = False
    is_cog: bool = False
    cog_issues: list[str] = Field(default_factory=list, description="Why the file is not a valid COG")
    cog_note: str | None = Field(None, description="Why a valid COG needs no tiles or overviews (small images)")
    file_size: int | None = Field(None, description="Bytes on disk of the main file")
    metadata: dict[str, str] = Field(default_factory=dict, description="Dataset metadata (bounded)")
    warnings: list[str] = Field(default_factory=list)


class FieldInfo(Model):
    name: str
    type: str


class LayerInfo(Model):
    name: str
    geometry_type: str | None
    feature_count: int | None = Field(description="Exact count; null when the driver cannot count")
    crs: CRSInfo | None = None
    extent: Bounds | None = None
    fields: list[FieldInfo] = Field(default_factory=list)


class VectorInfo(ReadsRemote):
    path: str
    driver: str | None
    layer_count: int
    layers: list[LayerInfo]
    layers_truncated: bool = False
    sample: dict[str, Any] | None = Field(None, description="With `layer`: a GeoJSON FeatureCollection of the first few features")
    warnings: list[str] = Field(default_factory=list)


class DatasetEntry(Model):
    path: str
    kind: Literal["raster", "vector", "other"]
    size: int = Field(description="Bytes")
    driver: str | None = None
    detail: str | None = Field(None, description="Size and bands, layers, or why it is 'other'")
    crs: str | None = Field(None, description="EPSG:n or the CRS name (rasters; vectors: the first layer's)")
    resolution: list[float] | None = Field(None, description="Raster pixel size (x, y) in the units of its CRS")


class DatasetList(Model):
    path: str
    entries: list[DatasetEntry]
    truncated: bool
    remaining: int = Field(description="Matching entries not returned (raise limit or narrow pattern)")


Resampling = Literal[
    "nearest",
    "bilinear",
    "cubic",
    "cubic_spline",
    "lanczos",
    "average",
    "mode",
    "gauss",
    "max",
    "min",
    "med",
    "q1",
    "q3",
    "sum",
    "rms",
]
BBox = tuple[float, float, float, float]


class RasterSummary(Model):
    """A short description of a raster a tool wrote."""

    driver: str
    width: int
    height: int
    count: int
    dtype: str
    crs: str | None = Field(None, description="EPSG:n when there is a code, else the CRS name")
    bounds: Bounds
    resolution: tuple[float, float]
    nodata: NoData = None
    compression: str | None = None
    creation_options: dict[str, str] = Field(
        default_factory=dict,
        description="GDAL creation options the file was written with: the caller's, plus the input's compression "
        "(COMPRESS, PREDICTOR …) kept when the caller named none; empty when the call created no file",
    )
    file_size: int = Field(description="Bytes on disk, sidecars included")


DOWNLOAD_URL_DOC = (
    "Over the HTTP transport: where to download the file (GET, same bearer token, range requests, no size cap); null over stdio"
)


class RasterWriteResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: RasterSummary
    warnings: list[str] = Field(default_factory=list)


class PixelWindow(Model):
    """A block of whole pixels of a raster's grid."""

    col_off: int = Field(description="First column (0-based) of the source raster")
    row_off: int = Field(description="First row (0-based) of the source raster")
    width: int = Field(description="Columns")
    height: int = Field(description="Rows")


class RasterClipResult(ReadsRemote):
    """raster_clip: the raster written and the source pixels it kept."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: RasterSummary
    window: PixelWindow = Field(
        description="The clip window in the source raster's grid: with crop=true the output is exactly these source "
        "pixels (output pixel (0, 0) is source pixel (col_off, row_off)); with crop=false the output keeps the full "
        "grid and pixels outside this window are nodata"
    )
    warnings: list[str] = Field(default_factory=list)


class Histogram(Model):
    edges: list[float] = Field(description="bins + 1 bin edges")
    counts: list[int]


class ThresholdSide(Model):
    count: int = Field(description="Valid pixels on this side of the threshold")
    share: float | None = Field(description="count / valid pixels (0-1); null when there is no valid pixel")
    area_m2: float | None = Field(description="Their ground area in m² (null when the raster has no CRS)")
    area_ha: float | None = Field(description="Their ground area in hectares")
    area_share: float | None = Field(
        description="area / area of the valid pixels (0-1); differs from share on lon/lat rasters, whose pixel "
        "areas vary with latitude"
    )


class ThresholdStats(Model):
    threshold: float
    above: ThresholdSide = Field(description="Valid pixels with value > threshold (strictly greater)")
    at_or_below: ThresholdSide = Field(description="Valid pixels with value <= threshold")


class BandStatsDetail(BandStatistics):
    index: int
    dimensions: dict[str, str | int | float] = Field(default_factory=dict, description=BAND_DIMENSIONS_DOC)
    percentiles: dict[str, float | None] = Field(
        default_factory=dict,
        description="Exact, keyed by percent (numpy's linear definition; with weights=area numpy's weighted "
        "inverted_cdf: the smallest value whose cumulative area reaches q% of the valid area)",
    )
    histogram: Histogram | None = None
    area_m2: float | None = Field(
        None, description="With thresholds or weights=area: ground area of the valid pixels in m² (null without a CRS)"
    )
    thresholds: list[ThresholdStats] | None = Field(None, description="With thresholds: one entry per threshold, in order")


class ClassArea(Model):
    value: float | int = Field(description="The pixel value (class)")
    count: int = Field(description="Pixels of this value")
    area_m2: float | None = Field(description="Ground area in m² (null when the raster has no CRS)")
    area_ha: float | None = Field(description="Ground area in hectares")
    fraction: float = Field(description="Share of the valid pixels (0-1)")
    area_fraction: float | None = Field(
        None,
        description="Share of the valid area (0-1); differs from fraction on "
        "lon/lat rasters, whose pixel areas vary with latitude",
    )


class BandCategories(Model):
    index: int
    dtype: str
    valid_count: int
    nodata_count: int
    area_m2: float | None = Field(description="Area of the valid pixels in m²")
    area_ha: float | None = None
    classes: list[ClassArea] = Field(description="One entry per value, in value order")


AreaMethod = Literal["projected", "geodesic", "none"]
AREA_METHOD_DOC = (
    "How pixel areas were computed: projected (pixel size in the CRS's unit, as m²), geodesic (lon/lat "
    "raster: each row's pixel area on the CRS's ellipsoid), none (no CRS: no areas)"
)


class CategoriesResult(Model):
    """Class areas of a categorical raster (raster_stats categorical=true)."""

    path: str
    crs: str | None = None
    area_method: AreaMethod = Field(description=AREA_METHOD_DOC)
    pixel_area_m2: float | None = Field(None, description="Area of every pixel (projected rasters)")
    window: tuple[int, int, int, int] = Field(description="col_off, row_off, width, height read")
    bands: list[BandCategories]
    warnings: list[str] = Field(default_factory=list)


class RasterStatsResult(ReadsRemote):
    path: str
    window: tuple[int, int, int, int] | None = Field(None, description="col_off, row_off, width, height read")
    bands: list[BandStatsDetail] = Field(description="Statistics per band (empty with categorical=true)")
    categories: list[BandCategories] | None = Field(
        None, description=("With categorical=true: per band, the count, area and fraction of each value")
    )
    area_method: AreaMethod | None = Field(None, description=AREA_METHOD_DOC)
    pixel_area_m2: float | None = Field(
        None, description="With categorical, thresholds or weights=area on a projected raster: the area of every pixel in m²"
    )
    weights: Literal["none", "area"] = Field(
        "none",
        description="none: every valid pixel counts once; area: mean, std and percentiles weighted by each pixel's "
        "ground area (min, max, sum, counts and histogram stay per pixel)",
    )
    dimensions: list[DimensionInfo] = Field(
        default_factory=list, description="Non-spatial dimensions (time, level …) the bands stand for; see bands[].dimensions"
    )
    warnings: list[str] = Field(default_factory=list)


class PointSample(Model):
    x: float
    y: float
    row: int | None = None
    col: int | None = None
    inside: bool
    values: list[float | None] = Field(description="One per band; null for nodata/masked or outside")


class SampleResult(ReadsRemote):
    path: str
    crs: str | None
    bands: list[int]
    points: list[PointSample] = Field(description="One per point given (empty with points_input: see output)")
    output: str | None = Field(None, description="With points_input: the point layer written, with band_1 … fields")
    uri: str | None = Field(None, description="Resource URI of output")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary | None = Field(None, description="With points_input: the layer written")
    sampled: int | None = Field(None, description="With points_input: points that fell on the raster")
    warnings: list[str] = Field(default_factory=list)


class TableWriteResult(ReadsRemote):
    output: str
    uri: str
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    rows: int
    columns: list[str]
    file_size: int
    warnings: list[str] = Field(default_factory=list)


class OverviewsResult(ReadsRemote):
    path: str
    action: Literal["add", "delete", "list"]
    levels: list[int] = Field(description="Overview factors present after the action (band 1)")
    resampling: str | None = None
    warnings: list[str] = Field(default_factory=list)


class VectorSummary(Model):
    """A short description of a vector layer a tool wrote."""

    driver: str | None
    layer: str
    feature_count: int
    geometry_type: str | None
    crs: str | None = Field(None, description="EPSG:n when there is a code, else the CRS name")
    extent: Bounds | None = None
    fields: list[str] = Field(default_factory=list)
    file_size: int = Field(description="Bytes on disk, sidecars (.shx, .dbf, .prj …) included")


class VectorWriteResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary
    warnings: list[str] = Field(default_factory=list)


class FromTableResult(ReadsRemote):
    """vector_from_table: the layer written and how each row's geometry was read."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary
    rows: int = Field(description="Rows read from the table (every one is written)")
    x: str | None = Field(None, description="Column read as x (longitude, easting)")
    y: str | None = Field(None, description="Column read as y (latitude, northing)")
    wkt: str | None = Field(None, description="Column read as WKT geometry")
    crs: str = Field(description="CRS given to the geometries")
    unparsed_rows: int = Field(
        description="Rows whose coordinates/WKT were empty or could not be read: written with a null geometry, attributes kept"
    )
    unparsed_row_numbers: list[int] = Field(
        default_factory=list,
        description=("1-based data row numbers (the header row not counted) of the first unparsed rows (at most 100)"),
    )
    warnings: list[str] = Field(default_factory=list)


class MeasureResult(ReadsRemote):
    """vector_measure: measures per feature (bounded rows), or the layer written with measure fields."""

    method: Literal["geodesic", "planar"] = Field(
        description="geodesic on the ellipsoid (geographic layers, or geodesic=true) or planar in the layer's projected CRS"
    )
    fields: dict[str, str] = Field(description="Measure field -> what it holds and its unit")
    rows: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "One row per feature (layer order; 'index' is the 0-based position among the features measured), only when "
            "no output is written"
        ),
    )
    row_count: int = Field(description="Features measured (every feature of the layer, or those matching where)")
    offset: int = 0
    truncated: bool = Field(False, description="More rows than returned (page with offset, or write an output)")
    remaining: int = Field(0, description="Rows after this page")
    totals: dict[str, float] = Field(default_factory=dict, description="Sum of area, length and perimeter over all features")
    output: str | None = None
    uri: str | None = None
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary | None = Field(None, description="The vector file written with output")
    warnings: list[str] = Field(default_factory=list)


class NearestInfo(Model):
    """vector_join predicate='nearest': where the distances are and how they were measured."""

    distance_field: str = Field(description="Field holding each row's distance to its join feature")
    rank_field: str | None = Field(
        None,
        description="Field holding the neighbour's rank (1 = nearest; ties share a rank), written when k > 1",
    )
    units: str = Field(description="Units of the distances: m, km, ft, mi, or deg / layer (the layer's own unit)")
    method: Literal["geodesic", "planar"] = Field(
        description=(
            "geodesic: on the ellipsoid, between the features' nearest points (lon/lat layer, linear units); "
            "planar: in the layer's CRS (a projected layer, or units deg / layer)"
        )
    )
    k: int = Field(description="Neighbours asked for per input feature (ties at the k-th are all kept)")


class JoinResult(ReadsRemote):
    """vector_join: the layer written and, for nearest, how its distances were measured."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary
    nearest: NearestInfo | None = Field(None, description="predicate='nearest': the distance (and rank) fields, units, method")
    warnings: list[str] = Field(default_factory=list)


class MergeResult(ReadsRemote):
    """vector_merge: one merged layer (mode single) or one layer per input (mode layers)."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = ""
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    mode: Literal["single", "layers"]
    inputs: int = Field(description="Datasets merged")
    feature_count: int = Field(description="Features written in all")
    summary: VectorSummary | None = Field(None, description="The merged layer (mode single)")
    layers: list[VectorSummary] = Field(default_factory=list, description="Every layer written (mode layers)")
    warnings: list[str] = Field(default_factory=list)


class FeaturePage(ReadsRemote):
    """A bounded GeoJSON FeatureCollection for reading features."""

    type: Literal["FeatureCollection"] = "FeatureCollection"
    features: list[dict[str, Any]]
    crs: str | None = Field(None, description="CRS of the coordinates")
    layer: str
    offset: int
    truncated: bool = Field(description="More features match than were returned")
    remaining: int | None = Field(None, description="Matching features after this page (null if unknown)")
    warnings: list[str] = Field(default_factory=list)


class QueryResult(ReadsRemote):
    """vector_query: the rows of one layer or of an SQL SELECT, one page at a time, no file written."""

    layer: str | None = Field(None, description="The layer read (null with sql)")
    columns: dict[str, str] = Field(
        description="Each column of the rows, in order, and its type (integer, float, text, boolean, date, datetime …)"
    )
    rows: list[dict[str, Any]] = Field(
        description="One object per row: column -> value; with geometry, the shape under 'geometry' as WKT text or GeoJSON"
    )
    offset: int
    total: int | None = Field(None, description="Rows the query gives in all (null when not counted)")
    truncated: bool = Field(description="More rows follow this page (page with offset)")
    remaining: int | None = Field(None, description="Rows after this page (null when not counted)")
    crs: str | None = Field(None, description="CRS of the geometries returned (with geometry)")
    warnings: list[str] = Field(default_factory=list)


class ValidationReport(Model):
    path: str
    layer: str
    feature_count: int
    invalid_count: int
    empty_count: int = 0
    reasons: dict[str, int] = Field(default_factory=dict, description="Reason (GEOS) -> number of features")
    examples: list[dict[str, Any]] = Field(default_factory=list, description="First invalid features: fid and reason")
    fixed_output: str | None = None
    fixed_uri: str | None = None
    warnings: list[str] = Field(default_factory=list)


class ZonalResult(ReadsRemote):
    rows: list[dict[str, Any]] = Field(
        description="One row per zone, in layer order: id (the id_field value, else "
        "the 0-based feature index) and each statistic (null when the "
        "zone has no valid pixel); with categorical=true also "
        "classes: {value: {count, area_m2, area_ha, fraction}}; with thresholds, per threshold t the fields "
        "above_<t>_<measure> (value > t) and at_or_below_<t>_<measure> (value <= t), measure count, share (of the "
        "zone's valid pixels), area_m2, area_ha, area_share (of their area); t written with _ for the decimal "
        "point and m for a minus sign: above_0_3_share, at_or_below_m5_count"
    )
    row_count: int = Field(description="Zones processed (every feature of the layer)")
    truncated: bool = Field(description="More zones than rows returned (raise limit, or pass dst for all)")
    remaining: int = Field(description="Zones not returned in rows")
    stats: list[str]
    band: int
    summary: VectorSummary | None = Field(None, description="The vector file written with dst")
    warnings: list[str] = Field(default_factory=list)


PreviewMode = Literal["rgb", "gray", "colormap", "palette", "vector"]


class ScaleBar(Model):
    """The scale of a preview at the image centre, and the bar drawn for it."""

    label: str = Field(description="The bar's length as drawn under it, e.g. '500 m', '2 km'")
    length_m: float = Field(description="The bar's length in metres: 1, 2 or 5 x 10^n")
    length_px: int = Field(description="The bar's length in image pixels (length_m / metres_per_pixel, rounded)")
    metres_per_pixel: float = Field(description="Ground length of one image pixel along its rows, at the image centre")
    method: Literal["map units", "geodesic"] = Field(
        description="map units: the projected CRS's own unit in metres; geodesic: metres on the ellipsoid (lon/lat "
        "data, or a projection whose scale at the centre is off by more than 1%)"
    )
    box: tuple[int, int, int, int] | None = Field(
        None,
        description="[x, y, width, height] of the panel drawn (bar and label), from the image's top-left; null when not drawn",
    )


class PreviewResult(ReadsRemote):
    """A PNG quicklook and what a model needs to read it (the legend says it in one paragraph)."""

    png: bytes = Field(exclude=True, repr=False, description="The PNG image: 8-bit RGBA")
    width: int = Field(description="Image width in pixels")
    height: int = Field(description="Image height in pixels")
    mode: PreviewMode = Field(
        description="rgb: three bands as red/green/blue; gray or colormap: one band through a "
        "colormap; palette: one band through its own colour table; vector: a layer"
    )
    bands_used: list[int] = Field(default_factory=list, description="1-based bands drawn (empty for vectors)")
    value_range: list[tuple[float, float] | None] = Field(
        default_factory=list,
        description="Per band drawn: the data values mapped to the low and high end of the "
        "stretch, not the data's range (null when a band has no valid pixel); for vectors colour-by-number",
    )
    data_range: list[tuple[float, float] | None] = Field(
        default_factory=list,
        description="Raster, per band drawn: min and max of the valid pixels the preview read (from overviews or "
        "a decimated read, so close to but not always the exact range: raster_stats gives that)",
    )
    colormap: str | None = Field(None, description="Colormap of a single band or numeric color_by")
    categories: dict[str, str] | None = Field(None, description="color_by category -> #rrggbb")
    crs: str | None = Field(None, description="EPSG:n or the CRS name; null when the data has none")
    extent: tuple[float, float, float, float] = Field(
        description="[minx, miny, maxx, maxy] the image covers, in the data's CRS (pixel coordinates if not georeferenced)"
    )
    window: tuple[int, int, int, int] | None = Field(None, description="Raster: [col, row, width, height] read")
    source_pixels_per_pixel: float | None = Field(
        None, description="Raster: source pixels per image pixel (< 1 when a small raster is enlarged)"
    )
    features: int | None = Field(None, description="Vector: features drawn")
    scale_bar: ScaleBar | None = Field(None, description="The scale at the image centre; null when the data has no CRS")
    legend: str = Field(description="How to read the image: bands, stretch, colours, CRS, extent, nodata, scale")
    dst: str | None = Field(None, description="Where the PNG was also written")
    warnings: list[str] = Field(default_factory=list)


class AreaOfUse(Model):
    name: str | None = None
    west: float
    south: float
    east: float
    north: float


class AxisInfo(Model):
    name: str
    abbreviation: str | None = None
    direction: str
    unit: str


class CrsDescription(Model):
    name: str
    epsg: int | None = Field(None, description="EPSG code when the CRS matches one")
    authority: str | None = Field(None, description="AUTHORITY:CODE (EPSG, ESRI, IAU …) when one matches")
    kind: str = Field(description="projected, geographic, compound, geocentric, vertical, engineering …")
    datum: str | None = None
    ellipsoid: str | None = None
    semi_major_m: float | None = None
    inverse_flattening: float | None = None
    projection: str | None = Field(None, description="Projection method of a projected CRS")
    units: list[str] = Field(default_factory=list, description="Units of the axes")
    axes: list[AxisInfo] = Field(default_factory=list)
    axis_order: str = Field(description="The CRS's own axis order, e.g. Lat/Lon for EPSG:4326, E/N for UTM")
    utm_zone: str | None = Field(None, description="UTM zone, e.g. 29N, when the CRS is a UTM projection")
    area_of_use: AreaOfUse | None = Field(None, description="Where the CRS is meant to be used (lon/lat degrees)")
    proj4: str | None = Field(None, description="PROJ string (a hint: it can lose datum details)")
    wkt: str


class CrsMatch(Model):
    crs: str = Field(description="EPSG:n, to pass as a CRS argument")
    name: str
    kind: str
    area_of_use: AreaOfUse | None = None
    bbox_share: float | None = Field(
        default=None,
        description="Share of the search bbox inside this CRS's area of use: 1 when the area contains it; null without a bbox",
    )


class CrsSearchResult(Model):
    query: str | None
    bbox: list[float] | None
    kind: str
    matches: list[CrsMatch] = Field(description="Best first")
    total: int = Field(description="How many CRSs matched in all")
    truncated: bool
    warnings: list[str] = Field(default_factory=list)


class TransformResult(Model):
    src_crs: str
    dst_crs: str
    always_xy: bool
    src_axis_order: str = Field(description="Axis order the input points were read in")
    dst_axis_order: str = Field(description="Axis order of the output points")
    points: list[list[float | None]] = Field(
        description="Transformed points, in input order; null where the transformation failed"
    )
    operation: str = Field(description="The coordinate operation PROJ used")
    failed: int = 0
    warnings: list[str] = Field(default_factory=list)


class WorkspaceResult(Model):
    """What workspace_copy, workspace_move or workspace_delete did to a dataset and its side files."""

    action: Literal["copy", "move", "delete"]
    input: str = Field(description="The dataset the call named (workspace-relative)")
    output: str | None = Field(None, description="Where the dataset is now (copy, move): workspace-relative")
    uri: str | None = Field(None, description="Resource URI of the output (copy, move)")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    files: list[str] = Field(
        description="Every file copied, moved (their new names) or deleted: the dataset and its side files (workspace-relative)"
    )
    kept: list[str] = Field(
        default_factory=list,
        description=(
            "Side files of the same name stem left alone, because another dataset of that stem may use them "
            "(dem.prj beside both dem.tif and dem.shp)"
        ),
    )


# ----- GDAL 3.12 algorithms: raster_pipeline -----
class PipelineStepGrid(Model):
    """The raster one step of raster_pipeline hands on (the input as read, then each step's result)."""

    index: int | None = Field(description="Position of the step in steps (0-based); null for the input as read")
    step: str = Field(description="read (the input), then the step's name")
    crs: str | None = Field(None, description="EPSG:n when there is a code, else the CRS name")
    width: int
    height: int
    resolution: tuple[float, float] = Field(description="Pixel size (x, y) in the units of crs")
    bounds: Bounds
    count: int = Field(description="Bands")
    dtype: str
    nodata: NoData = None


class RasterPipelineResult(ReadsRemote):
    """raster_pipeline: what each step makes, and the file written (none with plan_only)."""

    output: str = Field("", description="Workspace-relative path of the file written (with plan_only: that would be written)")
    uri: str | None = Field(None, description="Resource URI to read the file through MCP; null with plan_only")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    plan_only: bool = Field(False, description="true: only planned, nothing was run or written")
    plan: list[PipelineStepGrid] = Field(description="The input as read, then the raster each step hands on, in order")
    estimated_bytes: int = Field(
        description="Uncompressed size of the output's pixels (width x height x bands x bytes per value, plus a third for "
        "COG overviews): an upper bound for compressed outputs"
    )
    summary: RasterSummary | None = Field(None, description="The file written; null with plan_only")
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: vector_pipeline -----
class VectorPipelineField(Model):
    name: str
    type: str = Field(description="OGR field type: Integer, Integer64, Real, String, Date, DateTime …")
    subtype: str | None = Field(None, description="OGR subtype when there is one: Boolean, Int16, Float32, JSON …")


class VectorPipelineStage(Model):
    """vector_pipeline plan: the layer after the read (index null) or after steps[index]."""

    index: int | None = Field(description="Position in steps (0-based); null for the read of input")
    step: str
    gdal: str = Field(description="The GDAL pipeline step(s) this runs, e.g. 'reproject --dst-crs EPSG:32632'")
    layer: str
    crs: str | None = Field(None, description="EPSG:n when there is a code, else the CRS name")
    geometry_type: str | None
    fields: list[VectorPipelineField] = Field(default_factory=list)
    feature_count: int | None = Field(description="Features after this step (see feature_count_is)")
    feature_count_is: Literal["exact", "at_most", "at_least", "unknown"] = Field(
        description=(
            "exact: counted or known; at_most / at_least: a bound from the step before, where counting would read "
            "the whole input through the steps (larger inputs); unknown: not even a bound"
        )
    )


class VectorPipelinePlan(Model):
    """What vector_pipeline would do (engine result of plan_only)."""

    stages: list[VectorPipelineStage]
    format: str
    output_layer: str
    pipeline: str
    warnings: list[str] = Field(default_factory=list)


class VectorPipelineRun(Model):
    """What vector_pipeline did (engine result of a run)."""

    summary: VectorSummary
    format: str
    pipeline: str


class VectorPipelineResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written (or that would be, with plan_only)")
    uri: str | None = Field(None, description="Resource URI to read the file through MCP (null with plan_only)")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    plan_only: bool = False
    format: str = Field(description="OGR driver of the output")
    pipeline: str = Field(description="The `gdal vector pipeline` that ran (or would run), paths workspace-relative")
    summary: VectorSummary | None = Field(None, description="The layer written (null with plan_only)")
    plan: list[VectorPipelineStage] = Field(
        default_factory=list, description="plan_only: the layer after the read and after each step"
    )
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: raster_viewshed, raster_compare -----
class ViewshedObserver(Model):
    """One observer of raster_viewshed, placed on the DEM."""

    x: float = Field(description="x of the observer in the DEM's CRS")
    y: float = Field(description="y of the observer in the DEM's CRS")
    col: int = Field(description="Column (0-based) of the DEM pixel under the observer")
    row: int = Field(description="Row (0-based) of the DEM pixel under the observer")
    ground_elevation: float | None = Field(description="DEM value under the observer (null: nodata)")
    height: float = Field(description="Eye height above the ground used, in the DEM's height units")
    visible_pixels: int = Field(description="Pixels this observer sees")


class ViewshedResult(ReadsRemote):
    """raster_viewshed: the visibility raster written and what it shows."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: RasterSummary
    mode: Literal["single", "cumulative"] = Field(
        description="single: visible/invisible/out-of-range values; cumulative: each pixel counts the observers seeing it"
    )
    observers: list[ViewshedObserver]
    visible_pixels: int = Field(description="Output pixels seen by at least one observer")
    visible_area_m2: float | None = Field(None, description="Their area in m² (null when the DEM's CRS has no linear unit)")
    in_range_pixels: int | None = Field(
        None, description="One observer: output pixels within max_distance (all when none), visible or not; null for several"
    )
    visible_share: float | None = Field(
        None, description="One observer: visible_pixels / in_range_pixels (the share of the area within reach it sees)"
    )
    window: PixelWindow = Field(
        description="The output's pixels in the DEM's grid: the whole DEM, or, with max_distance, the DEM pixels within "
        "max_distance of an observer along x or y (GDAL clamps the output to that box)"
    )
    warnings: list[str] = Field(default_factory=list)


CompareKind = Literal[
    "crs",
    "geotransform",
    "size",
    "band_count",
    "data_type",
    "nodata",
    "description",
    "color_interpretation",
    "mask",
    "overview",
    "metadata",
    "subdataset",
    "other",
]


class CompareDifference(Model):
    """One difference GDAL's `gdal raster compare` reports (other than the pixels of the bands, in `bands`)."""

    kind: CompareKind
    band: int | None = Field(None, description="The band it is about (1-based), when it is about one")
    message: str = Field(description="GDAL's report line ('Reference …' is the reference, 'input' the input)")


class BandDifference(Model):
    """Where and by how much one band of two rasters on the same pixel grid differs."""

    band: int
    differing_pixels: int = Field(
        description="Pixels that differ: |input - reference| > tolerance, or valid in one raster and nodata in the other"
    )
    nodata_mismatches: int = Field(description="Of those, pixels valid in one raster and nodata (or NaN) in the other")
    max_abs_difference: float | None = Field(
        None, description="Largest |input - reference| over pixels valid in both (null: none differ)"
    )
    mean_abs_difference: float | None = Field(
        None, description="Mean |input - reference| over the differing pixels valid in both (null: none)"
    )
    window: PixelWindow | None = Field(None, description="Pixel box holding every differing pixel (null: none)")
    bounds: Bounds | None = Field(None, description="That box in the input's CRS (through the input's geotransform)")


class RasterCompareResult(ReadsRemote):
    """raster_compare: whether two rasters are the same, and where and by how much they differ."""

    input: str
    reference: str
    identical: bool = Field(description="No difference of any kind (pixels within tolerance)")
    pixels_identical: bool | None = Field(
        description=(
            "Every band's pixels within tolerance; null when they were NOT compared (different size or band count: "
            "align one onto the other's grid with raster_reproject like=… first)"
        )
    )
    tolerance: float
    differences: list[CompareDifference] = Field(
        default_factory=list, description="Differences of CRS, grid, size, bands, types, nodata, metadata … as GDAL reports"
    )
    bands: list[BandDifference] = Field(
        default_factory=list, description="Per band, when both have the same size and band count; else empty"
    )
    output: str | None = Field(None, description="The difference raster written (input - reference), when asked")
    uri: str | None = None
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: raster_focal -----
class FocalWindow(Model):
    """The window raster_focal applied around each pixel."""

    size: int = Field(description="Width and height of the window in pixels (odd; the pixel is at its centre)")
    cells: int = Field(description="Pixels in the window (non-zero weights), the centre included")
    pixel_size_m: tuple[float, float] | None = Field(
        None,
        description="Ground size [x, y] of a pixel in metres a radius was converted with (lon/lat: at the middle latitude)",
    )


class RasterFocalResult(ReadsRemote):
    """raster_focal: the raster written, the statistic and the window."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: RasterSummary
    statistic: str
    window: FocalWindow
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: raster_tiles -----
class TileZoom(Model):
    """One zoom level raster_tiles wrote."""

    zoom: int
    tiles: int = Field(description="Tiles written at this zoom")
    min_x: int = Field(description="First tile column")
    max_x: int = Field(description="Last tile column")
    min_y: int = Field(description="First tile row, counted as the output's convention says (xyz: from the top; tms: bottom)")
    max_y: int = Field(description="Last tile row, same counting")


class TilesSummary(Model):
    """What raster_tiles wrote: a directory of tiles or one MBTiles file."""

    container: Literal["directory", "mbtiles"]
    tiling_scheme: str
    convention: Literal["xyz", "tms"] = Field(description="How rows are counted: xyz from the top, tms from the bottom")
    tile_format: Literal["PNG", "WEBP", "JPEG"]
    tile_size: int = Field(description="Tile width and height in pixels")
    min_zoom: int
    max_zoom: int
    tiles: int = Field(description="Tiles written in all")
    planned_tiles: int = Field(
        description="Tiles the zoom range covers on the tiled extent (the count checked against the server's limit); "
        "fully transparent tiles that were skipped make `tiles` smaller"
    )
    zooms: list[TileZoom]
    bounds_wgs84: tuple[float, float, float, float] | None = Field(
        None, description="The tiled extent as [west, south, east, north] in degrees (for a map's initial view)"
    )
    path_template: str | None = Field(
        None, description="Where a tile is inside the directory, e.g. '{z}/{x}/{y}.png' (null for MBTiles)"
    )
    viewers: list[str] = Field(default_factory=list, description="Viewer pages written in the directory (leaflet.html …)")
    file_size: int = Field(description="Bytes on disk, all tiles and pages")


class TilesWriteResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the tile directory or MBTiles file written")
    uri: str | None = Field(
        None, description="Resource URI of the MBTiles file (null for a directory: read its tiles by their paths)"
    )
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    viewer: str | None = Field(
        None,
        description=(
            "Workspace-relative path of the first viewer page written (open it from the workspace folder in a browser; "
            "the page loads Leaflet/OpenLayers from the internet and the tiles beside it)"
        ),
    )
    viewer_uri: str | None = Field(None, description="Resource URI of the first viewer page written, if any")
    summary: TilesSummary
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: raster_footprint, dataset_index -----
class FootprintResult(ReadsRemote):
    """raster_footprint: the outline of the valid pixels written, with its area."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary = Field(description="The layer written; its extent is the footprint's bounds in the output CRS")
    area: float = Field(description="Planar area of the footprint in area_units squared (the output CRS's units)")
    area_units: str | None = Field(None, description="Unit of the output CRS (metre, degree …); area is in its square")
    area_m2: float | None = Field(
        None,
        description="Area on the CRS's ellipsoid in m² (geodesic, from the footprint's vertices); null without a CRS, or "
        "when vertices lie outside the projection's domain",
    )
    warnings: list[str] = Field(default_factory=list)


class DatasetIndexResult(ReadsRemote):
    """dataset_index: the tile index written, one feature per indexed raster (or vector layer)."""

    output: str = Field("", description="Workspace-relative path of the file written")
    uri: str = Field("", description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary
    dataset_type: Literal["raster", "vector"] = Field(description="What was indexed")
    inputs: int = Field(description="Input datasets given")
    indexed: int = Field(description="Features written: one per raster, or one per layer of each vector dataset")
    reprojected_to: str | None = Field(
        None,
        description="The CRS the extents were reprojected to (inputs in several CRSs, or dst_crs given); src_srs then "
        "holds each input's own CRS. Null: every extent is in the inputs' common CRS",
    )
    not_indexed: list[str] = Field(
        default_factory=list, description="Inputs with no feature in the index (at most 100): no layer asked for, …"
    )
    warnings: list[str] = Field(default_factory=list)


# ----- GDAL 3.12 algorithms: vector_interpolate -----


# ----- STAC: stac_search -----
class StacBand(Model):
    """One band of a STAC asset, merged from the STAC 1.1 `bands` field and the eo:bands / raster:bands extensions."""

    name: str | None = Field(None, description="The band's name in the catalog (e.g. 'B04', 'red')")
    common_name: str | None = Field(
        None, description="eo common name: coastal, blue, green, red, rededge, nir, nir08, swir16, swir22, pan, lwir …"
    )
    description: str | None = None
    center_wavelength: float | None = Field(None, description="Centre wavelength in micrometres (eo extension)")
    data_type: str | None = Field(None, description="Pixel data type as the catalog states it (uint16, float32 …)")
    nodata: float | str | None = Field(None, description="Nodata value as the catalog states it ('nan' for NaN)")
    unit: str | None = None


class StacAsset(Model):
    """One asset (file) of a STAC item."""

    key: str = Field(description="The asset's key in the item (e.g. 'red', 'B04', 'visual', 'data')")
    href: str = Field(
        description="Where the asset lives, made absolute: a URL, or for a workspace catalog the workspace path of the file"
    )
    input: str | None = Field(
        None,
        description=(
            "Pass this as input= (or path= to raster_info) of any raster tool to read the asset: an https:// or s3:// URL "
            "(read remotely; the server must allow that location, else the tool says out-of-root or unsupported) or a "
            "workspace path. Null when this server cannot read it: a local file outside the catalog's folder, or a "
            "scheme GDAL does not read"
        ),
    )
    type: str | None = Field(
        None, description="Media type, e.g. 'image/tiff; application=geotiff; profile=cloud-optimized' for a COG"
    )
    roles: list[str] = Field(default_factory=list, description="Asset roles: data, thumbnail, overview, metadata, visual …")
    title: str | None = None
    bands: list[StacBand] = Field(
        default_factory=list, description="The asset's bands in order (band 1 first), when the catalog describes them"
    )
    band_count: int | None = Field(None, description="How many bands the catalog describes (bands lists at most 64)")
    uri: str | None = Field(
        None,
        description="stac://collection/item/asset: the same as input, for any tool's input= on this server (after this search)",
    )


class StacItem(Model):
    """One STAC item (a scene, tile or granule) found by stac_search."""

    id: str
    collection: str | None = Field(None, description="Collection id of the item")
    datetime: str | None = Field(None, description="Acquisition time (RFC 3339); null when the item has a range instead")
    start_datetime: str | None = None
    end_datetime: str | None = None
    bbox: list[float] | None = Field(None, description="Footprint bounds [west, south, east, north] in lon/lat (WGS 84)")
    geometry_type: str | None = Field(None, description="GeoJSON type of the footprint (Polygon, MultiPolygon …)")
    cloud_cover: float | None = Field(None, description="eo:cloud_cover: percent of the scene covered by cloud (0-100)")
    platform: str | None = Field(None, description="Satellite or platform, e.g. 'sentinel-2a', 'landsat-8'")
    constellation: str | None = None
    gsd: float | None = Field(None, description="Ground sample distance in metres")
    proj_code: str | None = Field(None, description="CRS of the assets' grid (proj:code or proj:epsg), e.g. 'EPSG:32633'")
    properties: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Other simple properties of the item (at most 30; names as in the catalog): what query= and sortby= can use"
        ),
    )
    href: str | None = Field(None, description="Where the item's own JSON is (URL or workspace path), when it has one")
    assets: list[StacAsset] = Field(default_factory=list)


class StacSearchResult(ReadsRemote):
    """stac_search: one page of the items matching a search of a STAC API or a static catalog."""

    catalog: str = Field(description="The catalog searched: its workspace path, or its URL without the query string")
    kind: Literal["api", "static"] = Field(
        description="api: a STAC API searched through its /search endpoint; static: a static catalog (catalog.json, "
        "collection.json or an item collection) walked and filtered here"
    )
    items: list[StacItem]
    returned: int = Field(description="Items on this page")
    matched: int | None = Field(
        None,
        description="Items matching the search in all: as the API counts them, or as counted in a static catalog's walk; "
        "null when not known",
    )
    next_page_token: str | None = Field(
        None,
        description="More items follow: repeat the same call with page_token set to this value (only limit may change). "
        "Null: this is the last page",
    )
    searched_bbox: list[float] | None = Field(
        None, description="The bbox searched, in lon/lat (WGS 84): bbox transformed from bbox_crs"
    )
    searched_datetime: str | None = Field(None, description="The datetime interval searched, as sent (RFC 3339, '..' open)")
    documents_read: int | None = Field(None, description="Static catalogs: catalog, collection and item files read")
    walk_truncated: bool = Field(
        False,
        description="Static catalogs: the walk stopped at its limit of documents read, so items beyond it were not seen "
        "(matched counts only those seen); search a narrower sub-catalog or collection.json",
    )
    warnings: list[str] = Field(default_factory=list)


class LineageStep(Model):
    """One dataset in a lineage: the step that made it (from its provenance record), or an original input."""

    sha256: str = Field(description="SHA-256 of the dataset's bytes: how steps are linked (an input's = a step's output)")
    path: str | None = Field(description="Where the record says it was written (or read, for an original input)")
    operation: str | None = Field(None, description="The tool that made it; null for an original input (no record found)")
    parameters: dict[str, Any] | None = Field(None, description="The tool's arguments as given (credentials masked)")
    inputs: list[str] = Field(default_factory=list, description="sha256 of each dataset the step read (entries of `steps`)")
    input_paths: list[str] = Field(default_factory=list, description="The path each of `inputs` was read from")
    unhashed_inputs: list[str] = Field(
        default_factory=list, description="Remote datasets the step read by windows, named but not hashed (the chain stops)"
    )
    crs_decisions: dict[str, Any] | None = Field(
        None,
        description="The record's CRS decision: source_crs, target_crs and the transformation (pipeline, accuracy_m, "
        "is_ballpark: true when PROJ had no datum shift for the pair and treated the datums as the same)",
    )
    record: str | None = Field(None, description="The provenance record this step was read from")
    finished_at: str | None = None
    approval: dict[str, Any] | None = Field(
        None,
        description="Who approved the call, through which channel, when; null when the confirmation policy asked nobody "
        "(a new file under --confirm destructive)",
    )
    current: bool | None = Field(
        None, description="Whether the file at `path` still has these bytes (false: changed or replaced since; null: gone)"
    )


class LineageResult(Model):
    """dataset_lineage: the chain of steps that made a dataset, back to its original inputs."""

    dataset: str = Field(description="The dataset asked about")
    sha256: str
    steps: list[LineageStep] = Field(
        description="Every dataset in its history, original inputs first and the dataset itself last (each step after "
        "the ones it read)"
    )
    origins: list[str] = Field(description="Paths of the original inputs (no record made them)")
    records_seen: int = Field(description="Provenance records read in the workspace to link the steps")
    record: dict[str, Any] | None = Field(
        None, exclude=True, description="The dataset's own record (for the approval console), when this server signed it"
    )
    truncated: bool = Field(False, description="The search stopped at its limit of records or steps; the chain may go further")
    graph_png: bytes = Field(b"", exclude=True, repr=False, description="The chain drawn as a graph (PNG)")
    warnings: list[str] = Field(default_factory=list)


class ReplayCall(Model):
    """One step of a replay: the tool called again, with the recorded arguments and the substitutions applied."""

    tool: str
    arguments: dict[str, Any]
    output: str | None = Field(description="What this step writes (the recorded output, renamed)")
    replaces: str | None = Field(description="The recorded output this step's output stands for")


class ReplayResult(Model):
    """replay: the recorded chain run again on other inputs (or only its plan)."""

    dataset: str = Field(description="The dataset whose chain was replayed")
    plan: list[ReplayCall] = Field(description="The calls, in order (each after the ones whose outputs it reads)")
    executed: bool = Field(description="false: plan_only, nothing was written")
    outputs: list[str] = Field(default_factory=list, description="Outputs written, in order (each with its own record)")
    failed_step: int | None = Field(None, description="0-based index in `plan` of the call that failed (later ones did not run)")
    error: dict[str, Any] | None = Field(None, description="That call's error (code, message)")
    warnings: list[str] = Field(default_factory=list)


# ----- cubes (netCDF, HDF5, Zarr variables with a time axis) ---------------------------------------------------------
class CubeDimension(Model):
    """One dimension of a cube variable."""

    name: str
    size: int
    kind: Literal["time", "level", "y", "x", "other"]
    units: str | None = None
    calendar: str | None = Field(None, description="CF calendar of a time dimension (standard, noleap, 360_day …)")
    values: list[str | float] = Field(
        default_factory=list, description="Its values: ISO 8601 dates for time (decoded in the calendar), levels in units"
    )
    values_truncated: bool = Field(False, description="Only the first and last values are listed (too many to list)")
    chunk: int | None = Field(None, description="Chunk length along this dimension in the file (null: not chunked / unknown)")


class CubeVariable(Model):
    name: str
    path: str = Field(description="GDAL path of the variable (a subdataset)")
    shape: list[int] = Field(default_factory=list)
    description: str | None = None


class CubeInfo(ReadsRemote):
    """cube_info: a variable's dimensions, time axis, chunking, CRS and nodata (or the variables of a file)."""

    path: str
    driver: str | None = None
    variables: list[CubeVariable] = Field(default_factory=list, description="The variables in the file")
    variable: str | None = Field(None, description="The variable described below (null: give variable= to pick one)")
    dimensions: list[CubeDimension] = Field(default_factory=list, description="Slowest-varying first (time, level, y, x)")
    time_start: str | None = None
    time_end: str | None = None
    time_steps: int | None = None
    time_step: str | None = Field(None, description="The typical spacing of the time steps (e.g. 1 day, 1 month)")
    levels: list[str | float] = Field(default_factory=list)
    dtype: str | None = None
    units: str | None = None
    long_name: str | None = None
    nodata: NoData = None
    scale: float | None = None
    offset: float | None = None
    crs: str | None = Field(None, description="EPSG:n or name; from the CF grid_mapping, or lon/lat axes (EPSG:4326)")
    crs_source: str | None = Field(None, description="Where the CRS came from: grid_mapping, lon/lat axes, or none")
    bounds: Bounds | None = None
    resolution: tuple[float, float] | None = None
    width: int | None = None
    height: int | None = None
    bands: int | None = Field(None, description="Bands GDAL's raster view gives (one per time step and level)")
    warnings: list[str] = Field(default_factory=list)


class CubePeriod(Model):
    band: int
    label: str = Field(description="The period (ISO 8601: 2005, 2005-01, 2004-12/2005-02 …) or slot (January, DJF)")
    first_step: str | None = Field(None, description="Time of the first step in it")
    last_step: str | None = Field(None, description="Time of the last step in it")
    steps: int = Field(description="Time steps it reduces")


class CubeAggregateSummary(Model):
    raster: RasterSummary
    variable: str | None = None
    statistic: str
    period: str
    climatology: bool = False
    anomaly_reference: str | None = Field(None, description="start/end of the reference period anomalies are against")
    level: str | float | None = None
    calendar: str | None = None
    periods: list[CubePeriod] = Field(description="One per band, in band order (also the band descriptions)")


class CubeAggregateResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: CubeAggregateSummary
    warnings: list[str] = Field(default_factory=list)


class CubeSeriesRow(Model):
    time: str = Field(description="ISO 8601 date-time of the step")
    values: list[float | None] = Field(description="One per point or zone, in order; null where nodata or outside")


class CubeSeriesTarget(Model):
    name: str = Field(description="point_1 … or the zone's name")
    x: float | None = None
    y: float | None = None
    row: int | None = None
    col: int | None = None
    inside: bool = True
    pixels: int | None = Field(None, description="Zones: pixels whose centre lies in the zone")
    area_m2: float | None = Field(None, description="Zones: ground area of those pixels (the weights)")


class CubeSeriesResult(ReadsRemote):
    path: str
    variable: str | None = None
    level: str | float | None = None
    units: str | None = None
    statistic: str = Field(description="value (points) or the zones' statistic (area-weighted mean …)")
    targets: list[CubeSeriesTarget] = Field(description="The points or zones, in column order of `rows[].values`")
    rows: list[CubeSeriesRow] = Field(description="One per time step (up to max_rows; all of them go to output)")
    total_rows: int
    truncated: bool = Field(False, description="More steps than max_rows: give output= (a .csv) for all of them")
    output: str | None = Field(None, description="The CSV written (time, one column per point or zone)")
    uri: str | None = None
    plot_png: bytes = Field(b"", exclude=True, repr=False)
    warnings: list[str] = Field(default_factory=list)


class CubeSubsetSummary(Model):
    variable: str | None = None
    steps: int = Field(description="Time steps written")
    first_step: str | None = None
    last_step: str | None = None
    level: str | float | None = None
    files: list[str] = Field(default_factory=list, description="per_step: the files written, one per step")
    raster: RasterSummary | None = Field(None, description="The cube or stack written (not per_step)")


class CubeSubsetResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file (or directory, per_step) written")
    uri: str = Field(description="Resource URI")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: CubeSubsetSummary
    warnings: list[str] = Field(default_factory=list)


# ----- hydrology ------------------------------------------------------------------------------------------------
class HydroRasterSummary(RasterSummary):
    """A raster a hydrology tool wrote, with how its flow routing was made."""

    product: str = Field(description="What the raster holds")
    outlets: int | None = Field(None, description="Cells on the grid edge or next to nodata with no lower neighbour (code 0)")
    pits: int | None = Field(None, description="Cells inside the grid that cannot drain (closed depressions; code 0)")
    flat_cells: int | None = Field(None, description="Cells routed across flats")
    pits_before: int | None = Field(
        None, description="Conditioning: cells of the input that could not drain (closed depressions' bottoms); pits is after"
    )
    cells_changed: int | None = Field(None, description="Conditioning: cells whose elevation changed")
    cells_raised: int | None = Field(None, description="Conditioning: cells raised (fill)")
    cells_lowered: int | None = Field(None, description="Conditioning: cells lowered (breach)")
    max_change: float | None = Field(None, description="Conditioning: largest elevation change, in elevation units")
    max_accumulation: float | None = Field(None, description="Accumulation: the largest value (at the main outlet)")
    compile_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds this worker spent on its first pyflwdir import and first accumulation (numba compiling or "
        "loading its cache); empty when it had done so before",
    )


class HydroRasterResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: HydroRasterSummary
    warnings: list[str] = Field(default_factory=list)


class Basin(Model):
    """The catchment of one pour point."""

    id: int = Field(description="1-based, in the order of the pour points")
    x: float = Field(description="The pour point as given (points_crs)")
    y: float
    snapped_x: float = Field(description="Centre of the cell the pour point was snapped to, in the DEM's CRS")
    snapped_y: float
    moved_m: float = Field(description="Ground distance from the given point to that cell's centre, metres")
    snapped_cells: int = Field(description="Upstream cells of the snapped cell (the catchment's size in cells)")
    area_m2: float | None = Field(description="Catchment area, m² (geodesic on lon/lat; null without a CRS)")
    area_km2: float | None


class WatershedOutput(Model):
    """What the watershed engine wrote and found."""

    written: VectorSummary | RasterSummary
    basins: list[Basin]
    compile_seconds: dict[str, float] = Field(default_factory=dict)


class WatershedResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary | RasterSummary
    basins: list[Basin] = Field(description="One per pour point, in order")
    compile_seconds: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class StreamsOutput(Model):
    """What the stream_network engine wrote, with its preview."""

    written: VectorSummary
    segments: int = Field(description="Stream segments (lines between confluences)")
    stream_cells: int = Field(description="Cells whose upstream area reaches the threshold")
    threshold_cells: float = Field(description="The threshold as upstream cells (the first cell counted)")
    threshold_km2: float | None = Field(description="The threshold as upstream area, km² (null without a CRS)")
    max_order: int = Field(description="Highest Strahler order")
    total_length_m: float | None = Field(description="Total length of the streams, metres (geodesic on lon/lat)")
    png_base64: str = Field("", repr=False, description="The preview (PNG, base64); the tool returns it as an image")
    preview_width: int = 0
    preview_height: int = 0
    compile_seconds: dict[str, float] = Field(default_factory=dict)


class StreamNetworkResult(ReadsRemote):
    output: str = Field(description="Workspace-relative path of the file written")
    uri: str = Field(description="Resource URI to read the file through MCP")
    download_url: str | None = Field(None, description=DOWNLOAD_URL_DOC)
    summary: VectorSummary
    segments: int
    stream_cells: int
    threshold_cells: float
    threshold_km2: float | None
    max_order: int
    total_length_m: float | None
    preview_width: int = Field(description="Size of the preview image returned with this result")
    preview_height: int
    compile_seconds: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
