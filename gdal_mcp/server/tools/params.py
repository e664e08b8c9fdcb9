"""The shared parameter vocabulary: one name, one meaning, one description in every tool.

Every tool builds its signature from these types, so `input`, `output`, `bbox` + `bbox_crs`,
`resampling`, `output_type` … read the same to a model whichever tool it looks at. Closed sets are
Literal types, so they reach the JSON schema as enums.

The bbox rule, everywhere: a `bbox` is in `bbox_crs`, which defaults to the CRS of the data read —
except where the bbox defines a new output grid (raster_reproject, vector_rasterize, like gdalwarp
-te), where it defaults to the output CRS.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from gdal_mcp.crs_text import crs_value
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import Resampling
from gdal_mcp.sandbox import Sandbox


# ----- CRS values -------------------------------------------------------------------------------
def _crs_checked(value: str | None) -> str | None:
    """Every CRS parameter is a value, never a file or URL (gdal_mcp.crs_text): refused before any work starts."""
    if value is not None:
        try:
            crs_value(value)
        except GdalMcpError as e:
            raise ValueError(e.message) from None
    return value


#: the validator every CRS parameter carries (Annotated[str, CrsCheck, Field(...)])
CrsCheck = AfterValidator(_crs_checked)


# ----- closed sets ------------------------------------------------------------------------------
OverviewResampling = Literal["nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "gauss", "rms"]
DataType = Literal["Byte", "Int8", "UInt16", "Int16", "UInt32", "Int32", "UInt64", "Int64", "Float32", "Float64"]
DistanceUnits = Literal["m", "km", "ft", "mi", "deg", "layer"]
MeasureUnitName = Literal["m", "km", "ha", "ft", "mi"]

# ----- datasets read ----------------------------------------------------------------------------
RASTER_EXAMPLES = 'dem.tif, tiles/a.tif, /vsizip/a.zip/f.tif, NETCDF:"f.nc":var, HDF5:"f.h5"://x'
VECTOR_EXAMPLES = "roads.gpkg, parcels.shp, cities.geojson, /vsizip/a.zip/x.shp, GPKG:f.gpkg:layer"

REMOTE_NOTE = "or a URL of a remote location the server allows (https://…, s3://bucket/key; see the instructions)"
RasterInput = Annotated[str, Field(description=f"Raster to read, relative to the workspace ({RASTER_EXAMPLES}), {REMOTE_NOTE}")]
VectorInput = Annotated[
    str, Field(description=f"Vector dataset to read, relative to the workspace ({VECTOR_EXAMPLES}), {REMOTE_NOTE}")
]
RasterInputs = Annotated[
    list[str], Field(min_length=1, max_length=10000, description=("Rasters to read, relative to the workspace, in order"))
]
WorkspaceFile = Annotated[
    str, Field(description="A file of the workspace, relative to it (e.g. 'out/ndvi.tif'): a file this server wrote")
]
InspectPath = Annotated[
    str,
    Field(
        description=(
            "Dataset path relative to the workspace (e.g. 'dem.tif'); also /vsizip/a.zip/b.tif, NETCDF:\"f.nc\":var, "
            f'HDF5:"f.h5"://x, GPKG:f.gpkg:layer; {REMOTE_NOTE}'
        )
    ),
]
InputPattern = Annotated[
    str | None,
    Field(
        description=(
            "A glob inside the workspace instead of listing inputs, e.g. 'tiles/*.tif' or 'scenes/**/B04.tif' (sorted by "
            "path; at most 10000 files)"
        )
    ),
]

# ----- outputs ----------------------------------------------------------------------------------
RASTER_FORMATS = 'GTiff (.tif), COG (format="COG"), PNG (.png), JPEG (.jpg), netCDF (.nc), GPKG (.gpkg)'
RasterOutput = Annotated[
    str,
    Field(
        description=(
            f"Raster file to write, relative to the workspace; the extension picks the format unless format= is given: "
            f"{RASTER_FORMATS}"
        )
    ),
]
MosaicOutput = Annotated[
    str,
    Field(
        description=(
            f"Raster file to write, relative to the workspace; the extension picks the format unless format= is given: "
            f"{RASTER_FORMATS}, or VRT (.vrt: a virtual mosaic referencing the inputs)"
        )
    ),
]
VECTOR_FORMATS = (
    "GPKG (.gpkg), ESRI Shapefile (.shp), GeoJSON (.geojson), FlatGeobuf (.fgb), GeoParquet "
    "(.parquet), CSV (.csv), KML (.kml), GML (.gml), GeoJSONSeq (.geojsonl)"
)
VectorOutput = Annotated[
    str,
    Field(
        description=(
            f"Vector file to write, relative to the workspace; the extension picks the format unless format= is given: "
            f"{VECTOR_FORMATS}"
        )
    ),
]
OptionalVectorOutput = Annotated[
    str | None, Field(description=(f"Also write the result as a vector file here (relative to the workspace): {VECTOR_FORMATS}"))
]
DatasetFile = Annotated[
    str,
    Field(
        description=(
            "A dataset file in the workspace (plain path, e.g. 'roads.shp', 'out/dem.tif'); its side files go with it "
            "(a shapefile's .dbf/.shx/.prj/.cpg, .aux.xml, .ovr, .msk, world files)"
        )
    ),
]
SameFormatOutput = Annotated[
    str,
    Field(
        description=(
            "The new workspace path, with the input's extension (.tif, .shp, .gpkg … as the input: no conversion), e.g. "
            "'archive/roads_2024.shp'; missing folders are created and side files take the matching names"
        )
    ),
]
CsvOutput = Annotated[str, Field(description="CSV file to write, relative to the workspace (.csv)")]
PngOutput = Annotated[str | None, Field(description="Also save the PNG at this workspace path (.png)")]
Overwrite = Annotated[
    bool, Field(description="Replace the output if it already exists (default false: refuse with already-exists)")
]
RasterFormat = Annotated[
    str | None,
    Field(
        description=("GDAL raster driver short name: GTiff, COG, PNG, JPEG, netCDF, GPKG …; default from the output extension")
    ),
]
MosaicFormat = Annotated[
    str | None,
    Field(
        description=(
            "GDAL raster driver short name: GTiff, COG, VRT, PNG, JPEG, netCDF, GPKG …; default from the output extension"
        )
    ),
]
VectorFormat = Annotated[
    str | None,
    Field(
        description=(
            "OGR driver short name: GPKG, ESRI Shapefile, GeoJSON, FlatGeobuf, Parquet, CSV, KML, GML …; default from the "
            "output extension"
        )
    ),
]


def _options_checked(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Creation options never name files or URLs (the sandbox's rule, Sandbox.check_creation_options)."""
    try:
        Sandbox.check_creation_options(value)
    except GdalMcpError as e:
        raise ValueError(e.message) from None
    return value


#: the validator every creation-option parameter carries
OptionsCheck = AfterValidator(_options_checked)
CreationOptions = Annotated[
    dict[str, str | int | float | bool] | None,
    OptionsCheck,
    Field(
        description=(
            'GDAL creation options (gdal_translate -co), e.g. {"COMPRESS": "DEFLATE", "TILED": "YES"}; without COMPRESS a '
            "GTiff/COG output keeps the input's codec and predictor (summary.creation_options lists those used)"
        )
    ),
]
OutputLayer = Annotated[
    str | None,
    Field(description=("Name of the layer written; default the output file's name without its extension (roads.gpkg: roads)")),
]

# ----- where ------------------------------------------------------------------------------------
BBox = Annotated[
    list[float] | None,
    Field(
        min_length=4, max_length=4, description=("Area [minx, miny, maxx, maxy] in bbox_crs (default: the CRS of the data read)")
    ),
]
BBoxCRS = Annotated[
    str | None,
    CrsCheck,
    Field(
        description=("CRS of bbox: EPSG:4326 for lon/lat, any code, name, PROJ string or WKT; default the CRS of the data read")
    ),
]
GridBBox = Annotated[
    list[float] | None,
    Field(
        min_length=4,
        max_length=4,
        description=("Output extent [minx, miny, maxx, maxy] in bbox_crs (default: the output CRS), like gdalwarp -te"),
    ),
]
GridBBoxCRS = Annotated[
    str | None,
    CrsCheck,
    Field(description=("CRS of bbox: EPSG:4326 for lon/lat, any code, name, PROJ string or WKT; default the output CRS")),
]
Geometry = Annotated[dict[str, Any] | None, Field(description=("A GeoJSON geometry, Feature or FeatureCollection (polygons)"))]
GeometryCRS = Annotated[str | None, CrsCheck, Field(description="CRS of geometry; default EPSG:4326, as GeoJSON says")]

# ----- CRS --------------------------------------------------------------------------------------
CRS_FORMS = 'EPSG:4326, 4326, OGC:CRS84, a name such as "WGS 84 / UTM zone 32N" or "ETRS89 / LAEA Europe", a PROJ string or WKT'
DstCRS = Annotated[str, CrsCheck, Field(description=f"Target CRS: {CRS_FORMS}")]
OptionalDstCRS = Annotated[str | None, CrsCheck, Field(description=f"Target CRS: {CRS_FORMS}")]
SrcCRS = Annotated[str | None, CrsCheck, Field(description=(f"Override the input's CRS, or give one it lacks: {CRS_FORMS}"))]

# ----- values -----------------------------------------------------------------------------------
ResamplingParam = Annotated[
    Resampling,
    Field(
        description=(
            "nearest for categorical data (classes, land cover); bilinear/cubic/lanczos for continuous data (elevation, "
            "reflectance); average/mode when shrinking a lot"
        )
    ),
]
OutputType = Annotated[
    DataType | None, Field(description=("Output data type; values are rounded and clamped as GDAL does; default the input's"))
]
Nodata = Annotated[float | None, Field(description="Nodata value to declare on the output")]
Layer = Annotated[str | None, Field(description=("Layer to read; required when the source has several (vector_info lists them)"))]
Where = Annotated[str | None, Field(description="Attribute filter (OGR SQL WHERE), e.g. \"continent = 'Africa'\"")]
Sql = Annotated[
    str | None,
    Field(
        description=(
            "A read-only SELECT on the source instead of layer/where/fields; it may read only the input's own "
            "layers (no other files, ATTACH or load_extension)"
        )
    ),
]
SqlDialect = Annotated[
    Literal["OGRSQL", "SQLITE"],
    Field(
        description=(
            "Dialect of sql: OGRSQL (default) or SQLITE, with SpatiaLite functions: ST_Area(geometry, 1) (geodesic "
            "m² on lon/lat layers), ST_Length(geometry, 1), ST_Centroid, ST_Buffer, ST_Union, MakePoint(x, y, srid), "
            "GROUP BY, joins between the input's layers. The geometry column is named as in the source (geometry "
            "for shapefiles, geom for GeoPackages). Not for distances on lon/lat layers: ST_Distance(a, b, 1) finds "
            "the nearest points in degrees and is off by several %; use vector_join predicate=nearest"
        )
    ),
]
Units = Annotated[
    DistanceUnits,
    Field(
        description=(
            "Units of the distance: m (default), km, ft, mi — ground distances, applied in a local projected CRS on lon/lat "
            "layers — or deg / layer (the layer's own units: degrees on EPSG:4326) when asked for explicitly"
        )
    ),
]
MeasureUnits = Annotated[
    MeasureUnitName,
    Field(
        description=(
            "Units of the measures: m (m² and m, default), km (km², km), ha (area in hectares, lengths in m), ft (ft², ft), "
            "mi (mi², mi); geodesic on lon/lat layers, planar in the CRS's unit converted on projected layers"
        )
    ),
]
Band = Annotated[int, Field(ge=1, description="Band to read (1-based)")]
Bands = Annotated[list[int] | None, Field(description="Bands to read (1-based); default all")]
Thresholds = Annotated[
    list[float] | None,
    Field(
        min_length=1,
        max_length=100,
        description=(
            "Values t to split the valid pixels at (nodata excluded): for each, the count, share of the valid pixels, "
            "area in m² and ha, and share of the valid area of the pixels with value > t (above, strictly greater) and "
            "with value <= t (at_or_below); areas geodesic per row on lon/lat rasters, pixel size on projected ones. "
            "E.g. [0.3] on NDVI: the share and area of the scene above 0.3"
        ),
    ),
]


def resolution_description(crs_of: str) -> str:
    """The description of a `resolution` parameter, naming the units it is in."""
    return (
        f"Output pixel size in the units of {crs_of}: metres for a projected CRS such as UTM, DEGREES for a "
        "geographic CRS such as EPSG:4326 (0.0001 deg is about 11 m); one number or [xres, yres]"
    )


Resolution = Annotated[
    float | list[float] | None, Field(description=resolution_description("dst_crs (or of the input when dst_crs is not given)"))
]
Size = Annotated[
    list[int] | None, Field(min_length=2, max_length=2, description=("Output [width, height] in pixels; not with resolution"))
]


def as_bbox(bbox: list[float] | None) -> tuple[float, float, float, float] | None:
    """A validated bbox list as the tuple the engine takes."""
    return (bbox[0], bbox[1], bbox[2], bbox[3]) if bbox else None
