"""The formats this server opens and writes: GDAL's drivers it allows, and the side files each format writes.

GDAL-free (the server and the workers import it). The workers deregister every other driver of both bundled GDALs
(gdal_mcp.engine.drivers): a file in another format is refused as `unsupported`, naming its driver. Fewer drivers,
fewer ways for a file to make GDAL follow a reference (ISIS/PDS labels, ERS headers, WMS/TMS descriptions, GDAL
pipelines, tile indexes, GPSBabel, ADBC …), before the kernel's confinement even comes into play.
"""

from __future__ import annotations

import mimetypes

#: raster drivers (GDAL short names): what the tools read and write, and GDAL's in-memory and virtual formats
RASTER_DRIVERS = frozenset(
    {
        "GTiff",
        "COG",
        "VRT",
        "MEM",
        "PNG",
        "JPEG",
        "GIF",
        "BMP",
        "WEBP",
        "JP2OpenJPEG",
        "netCDF",
        "HDF5",
        "HDF5Image",
        "GRIB",
        "Zarr",
        "AAIGrid",
        "GRASSASCIIGrid",
        "XYZ",
        "EHdr",
        "ENVI",
        "HFA",
        "SAGA",
        "SRTMHGT",
        "USGSDEM",
        "DTED",
        "GSAG",
        "GSBG",
        "GS7BG",
        "MRF",
        "NITF",
        "PCIDSK",
        "RST",
        "BAG",
        "MBTiles",
        "KMLSUPEROVERLAY",
        "GPKG",
    }
)
#: vector drivers
VECTOR_DRIVERS = frozenset(
    {
        "ESRI Shapefile",
        "GPKG",
        "GeoJSON",
        "GeoJSONSeq",
        "ESRIJSON",
        "TopoJSON",
        "FlatGeobuf",
        "CSV",
        "XLSX",
        "ODS",
        "GML",
        "KML",
        "LIBKML",
        "GPX",
        "SQLite",
        "OpenFileGDB",
        "MapInfo File",
        "DXF",
        "DGN",
        "OSM",
        "Parquet",
        "Arrow",
        "PMTiles",
        "OGR_VRT",
        "MEM",
        "Memory",
        "JSONFG",
    }
)
ALLOWED_DRIVERS = RASTER_DRIVERS | VECTOR_DRIVERS

#: files a dataset of this extension consists of besides itself: same stem, these extensions (a shapefile's .dbf,
#: a GML's .xsd …)
SIDECARS: dict[str, frozenset[str]] = {
    ".shp": frozenset({"shx", "dbf", "prj", "cpg", "qix", "sbn", "sbx", "shp.xml"}),
    ".tab": frozenset({"dat", "map", "id", "ind"}),
    ".csv": frozenset({"csvt", "prj"}),
    ".gml": frozenset({"xsd", "gfs"}),
}

#: side files GDAL may read beside a dataset of any format: <stem>.<ext> (world files, headers, MRF data and
#: index files, a shapefile's parts) and <name><suffix> (PAM, overviews, masks). A link among them that leads out
#: of the workspace makes the dataset out-of-root (gdal_mcp/sandbox/): GDAL would follow it without any path being given.
SIDE_EXTENSIONS = frozenset(
    {ext for exts in SIDECARS.values() for ext in exts}
    | {
        "prj",
        "tfw",
        "tifw",
        "wld",
        "pgw",
        "pngw",
        "jgw",
        "jpgw",
        "gfw",
        "j2w",
        "bpw",
        "hdr",
        "aux",
        "rrd",
        "idx",
        "til",
        "pzp",
        "ppg",
        "pjg",
        "ptf",
        "lrc",
        "qix",
        "xml",
        "imd",
        "rpb",
        "rpc",
        "vat.dbf",
        "ovr",
        "clr",
    }
)
NAME_SUFFIXES = (
    ".aux.xml",
    ".ovr",
    ".msk",
    ".aux",
    ".xml",
    ".ovr.aux.xml",
    ".vat.dbf",
    ".properties",
    ".gfs",
    ".provenance.json",  # the dataset's provenance record (engine/provenance.py): copied, moved, deleted with it
)

#: the media type of a workspace file by its extension (resources/read, downloads, resource links)
MIME = {
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".geojson": "application/geo+json",
    ".json": "application/json",
    ".csv": "text/csv",
    ".gpkg": "application/geopackage+sqlite3",
    ".vrt": "application/xml",
    ".xml": "application/xml",
    ".kml": "application/vnd.google-earth.kml+xml",
    ".nc": "application/x-netcdf",
}


def mime_type(name: str) -> str:
    """The media type of a file named `name`: ours for the geospatial formats, else Python's guess."""
    lower = name.lower()
    for ext, mime in MIME.items():
        if lower.endswith(ext):
            return mime
    return mimetypes.guess_type(name)[0] or "application/octet-stream"
