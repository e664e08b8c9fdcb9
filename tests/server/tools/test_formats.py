"""Every format the server documents (gdal_mcp/formats.py) opens through the tools with the driver allow-list in
force: a small file of each is written here with rasterio or pyogrio (or copied from tests/data), then described by
raster_info / vector_info through a real MCP client, and the driver named must be the one that wrote it. A format
outside the list is refused as unsupported, naming its driver."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from rasterio.transform import from_origin

from gdal_mcp.formats import ALLOWED_DRIVERS
from tests.cli_reference import gdal_cli
from tests.helpers import DATA
from tests.security.helpers import session

#: raster driver -> file name (written by rasterio here)
RASTERS = {
    "GTiff": "r.tif",
    "PNG": "r.png",
    "JPEG": "r.jpg",
    "GIF": "r.gif",
    "BMP": "r.bmp",
    "WEBP": "r.webp",
    "JP2OpenJPEG": "r.jp2",
    "netCDF": "r.nc",
    "GRIB": "r.grb2",
    "Zarr": "r.zarr",
    "AAIGrid": "r.asc",
    "XYZ": "r.xyz",
    "EHdr": "ehdr.bil",
    "ENVI": "envi.dat",
    "HFA": "r.img",
    "SAGA": "r.sdat",
    "GSAG": "r_ascii.grd",
    "GSBG": "r_binary.grd",
    "GS7BG": "r_7.grd",
    "MRF": "r.mrf",
    "NITF": "r.ntf",
    "PCIDSK": "r.pix",
    "RST": "r.rst",
    "GPKG": "r.gpkg",
    "KMLSUPEROVERLAY": "r.kmz",
    "BAG": "r.bag",
    "DTED": "r.dt0",
    "USGSDEM": "r.dem",
    "MBTiles": "r.mbtiles",
    "COG": "r_cog.tif",
}
#: written through CreateCopy from a 3-band GeoTIFF (the driver cannot create, or needs RGB)
BY_COPY = {"netCDF", "MBTiles", "WEBP", "COG"}
#: vector driver -> file name (written by pyogrio here)
VECTORS = {
    "ESRI Shapefile": "v.shp",
    "GPKG": "v.gpkg",
    "GeoJSON": "v.geojson",
    "GeoJSONSeq": "v.geojsonl",
    "FlatGeobuf": "v.fgb",
    "CSV": "v.csv",
    "XLSX": "v.xlsx",
    "ODS": "v.ods",
    "GML": "v.gml",
    "LIBKML": "v.kml",
    "GPX": "v.gpx",
    "SQLite": "v.sqlite",
    "OpenFileGDB": "v.gdb",
    "MapInfo File": "v.tab",
    "DXF": "v.dxf",
    "DGN": "v.dgn",
    "PMTiles": "v.pmtiles",
    "JSONFG": "v.jsonfg",
}
#: read-only formats, from text written here or from tests/data
TEXT = {
    "v_esri.json": (
        '{"geometryType": "esriGeometryPoint", "spatialReference": {"wkid": 4326}, "fields": [{"name": '
        '"id", "type": "esriFieldTypeInteger"}], "features": [{"attributes": {"id": 1}, "geometry": '
        '{"x": 1, "y": 2}}]}'
    ),
    "v_topo.topojson": (
        '{"type": "Topology", "objects": {"pts": {"type": "GeometryCollection", "geometries": [{"type":'
        ' "Point", "coordinates": [1, 2]}]}}, "arcs": []}'
    ),
    "v_vrt.vrt": (
        '<OGRVRTDataSource><OGRVRTLayer name="v"><SrcDataSource relativeToVRT="1">v.geojson</SrcDataSource>'
        "</OGRVRTLayer></OGRVRTDataSource>"
    ),
    "r_grass.asc": "north: 50\nsouth: 49.36\neast: 10.64\nwest: 10\nrows: 2\ncols: 2\n1 2\n3 4\n",
}
READ_ONLY = {
    "v_esri.json": ("vector", "ESRIJSON"),
    "v_topo.topojson": ("vector", "TopoJSON"),
    "v_vrt.vrt": ("vector", "OGR_VRT"),
    "r_grass.asc": ("raster", "GRASSASCIIGrid"),
    "two-subs.h5": ("raster", "HDF5"),
    "N10W110.hgt.zip": ("raster", "SRTMHGT"),
    "sample.osm.pbf": ("vector", "OSM"),
    "r_cog.tif": ("raster", "GTiff"),
}


def write_rasters(ws: Path) -> None:
    pixels = np.arange(64 * 64, dtype=np.uint8).reshape(1, 64, 64) % 200
    base = {
        "width": 64,
        "height": 64,
        "count": 1,
        "dtype": "uint8",
        "crs": "EPSG:4326",
        "transform": from_origin(10, 50, 0.01, 0.01),
    }
    rgb = {**base, "driver": "GTiff", "count": 3}
    with rasterio.open(ws / "rgb_src.tif", "w", **rgb) as d:
        d.write(np.repeat(pixels, 3, 0))
    with rasterio.open(
        ws / "rgb_3857.tif", "w", **{**rgb, "crs": "EPSG:3857", "transform": from_origin(0, 1e6, 1000, 1000)}
    ) as d:
        d.write(np.repeat(pixels, 3, 0))
    for driver, name in RASTERS.items():
        if driver in BY_COPY:
            src = ws / ("rgb_3857.tif" if driver == "MBTiles" else "rgb_src.tif")
            rasterio.shutil.copy(src, ws / name, driver=driver)
            continue
        profile, data = {**base, "driver": driver}, pixels
        if driver == "DTED":
            profile.update(width=121, height=121, dtype="int16", transform=from_origin(10, 51, 1 / 120, 1 / 120))
            data = np.zeros((1, 121, 121), "int16")
        elif driver == "USGSDEM":
            # GDAL 3.12 (rasterio 1.5) no longer writes USGSDEM: Debian's GDAL 3.6 gdal_translate does (a reference)
            profile.update(driver="GTiff", dtype="int16")
            with rasterio.open(ws / "dem_src.tif", "w", **profile) as d:
                d.write(pixels.astype("int16"))
            gdal_cli("gdal_translate", "-of", "USGSDEM", str(ws / "dem_src.tif"), str(ws / name))
            continue
        elif driver == "BAG":
            profile.update(dtype="float32", crs="EPSG:32631", transform=from_origin(500000, 5e6, 10, 10))
            data = pixels.astype("float32")
        elif driver == "NITF":
            profile["ICORDS"] = "G"
        with rasterio.open(ws / name, "w", **profile) as d:
            d.write(data)


def write_vectors(ws: Path) -> None:
    import geopandas as gpd
    import pandas as pd
    import pyogrio
    from shapely.geometry import Point

    gdf = gpd.GeoDataFrame({"name": ["a", "b"], "v": [1, 2]}, geometry=[Point(1, 2), Point(3, 4)], crs="EPSG:4326")
    for driver, name in VECTORS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if driver in ("XLSX", "ODS"):
                pyogrio.write_dataframe(pd.DataFrame({"name": ["a"], "x": [1.0], "y": [2.0]}), ws / name, driver=driver)
            elif driver == "CSV":
                pyogrio.write_dataframe(gdf, ws / name, driver=driver, layer_options={"GEOMETRY": "AS_WKT"})
            elif driver == "GPX":
                pyogrio.write_dataframe(gdf[["name", "geometry"]], ws / name, driver=driver, layer="waypoints")
            elif driver in ("DXF", "DGN"):
                pyogrio.write_dataframe(gdf[["geometry"]], ws / name, driver=driver)
            else:
                pyogrio.write_dataframe(gdf, ws / name, driver=driver)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("formats")
    write_rasters(ws)
    write_vectors(ws)
    for name, text in TEXT.items():
        (ws / name).write_text(text)
    shutil.copy(DATA / "raster" / "two-subs.h5", ws)
    shutil.copy(DATA / "raster" / "N10W110.hgt.zip", ws)
    shutil.copy(DATA / "vector" / "sample.osm.pbf", ws)
    shutil.copy(DATA / "raster" / "RGB.byte.tif", ws / "good.tif")
    return ws


def test_the_allowed_drivers_are_the_documented_and_tested_ones() -> None:
    tested = set(RASTERS) | set(VECTORS) | {d for _, d in READ_ONLY.values()}
    # GDAL's own in-memory and virtual formats, a container's subdatasets, the KML writer (read back by LIBKML),
    # and Parquet/Arrow, which the engine writes where the bundled GDAL has them (these wheels do not)
    internal = {"VRT", "MEM", "Memory", "HDF5Image", "KML", "Parquet", "Arrow"}
    assert tested <= ALLOWED_DRIVERS
    assert ALLOWED_DRIVERS - tested <= internal, ALLOWED_DRIVERS - tested


async def test_every_documented_format_opens_through_the_tools(ws: Path) -> None:
    cases = [("raster", name, "GTiff" if driver == "COG" else driver) for driver, name in RASTERS.items()]
    cases += [("vector", name, driver) for driver, name in VECTORS.items()]
    cases += [(kind, name, driver) for name, (kind, driver) in READ_ONLY.items() if name != "r_cog.tif"]
    failures = []
    async with session(ws) as s:
        for kind, name, driver in cases:
            path = f"/vsizip/{name}/N10W110.hgt" if name.endswith(".hgt.zip") else name
            r = await s.call_tool(f"{kind}_info", {"path": path})
            got = None if r.is_error else r.structured_content.get("driver")
            if r.is_error and kind == "raster" and r.structured_content["error"]["code"] == "invalid-argument":
                got = "container"  # HDF5/netCDF/GPKG containers answer with their subdatasets
            if got not in (driver, "container") and not (driver == "LIBKML" and got == "KML"):
                failures.append((name, driver, got if got else r.structured_content))
    assert not failures, failures
