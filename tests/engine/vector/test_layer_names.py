"""Every vector writer names the layer it writes after the output file (roads.gpkg: roads) unless output_layer says
otherwise, never after the source's layer (a GeoPackage layer called 'nc.gpkg', an SQL result): the file's own layer
list (pyogrio.list_layers, GDAL's answer) is the reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyogrio
import pytest
import rasterio
import shapely
from rasterio.transform import from_origin

from gdal_mcp.engine.features.contour import contour
from gdal_mcp.engine.vector.clip import clip
from gdal_mcp.engine.vector.convert import convert
from gdal_mcp.engine.vector.geometry import buffer, dissolve, simplify
from gdal_mcp.engine.vector.geometry_ops import geometry_op
from gdal_mcp.engine.vector.join import join
from gdal_mcp.engine.vector.measure import measure
from gdal_mcp.engine.vector.merge import merge
from gdal_mcp.engine.vector.overlay import overlay
from gdal_mcp.engine.vector.table import from_table
from tests.helpers import DATA

V = DATA / "vector"


@pytest.fixture
def src(tmp_path: Path) -> str:
    """Polygons in a GeoPackage whose layer is named like a file."""
    gdf = gpd.read_file(V / "polygons.shp")
    path = tmp_path / "in.gpkg"
    gdf.to_file(path, layer="nc.gpkg")
    return str(path)


def writers(tmp_path: Path, src: str) -> dict[str, Callable[[str], object]]:
    (tmp_path / "t.csv").write_text("id,lon,lat\n1,1.5,2.5\n")
    dem = tmp_path / "dem.tif"
    with rasterio.open(
        dem,
        "w",
        driver="GTiff",
        width=20,
        height=20,
        count=1,
        dtype="float32",
        crs="EPSG:32632",
        transform=from_origin(0, 200, 10, 10),
    ) as ds:
        ds.write(np.add.outer(np.arange(20), np.arange(20)).astype("float32"), 1)
    return {
        "convert": lambda dst: convert(src, dst),
        "convert_sql": lambda dst: convert(src, dst, sql='SELECT * FROM "nc.gpkg"'),
        "clip": lambda dst: clip(src, dst, bbox=(-1e9, -1e9, 1e9, 1e9)),
        "buffer": lambda dst: buffer(src, dst, distance=10),
        "simplify": lambda dst: simplify(src, dst, tolerance=10),
        "dissolve": lambda dst: dissolve(src, dst),
        "geometry_op": lambda dst: geometry_op(src, dst, operation="centroid"),
        "overlay": lambda dst: overlay(src, dst, overlay=str(V / "polygons.shp")),
        "join": lambda dst: join(src, dst, join=str(V / "polygons.shp")),
        "measure": lambda dst: measure(src, dst=dst, measures=["area"]),
        "merge": lambda dst: merge([src, str(V / "polygons.shp")], dst),
        "from_table": lambda dst: from_table(str(tmp_path / "t.csv"), dst),
        "contour": lambda dst: contour(str(dem), dst, interval=5),
    }


@pytest.mark.parametrize(
    "writer",
    [
        "convert",
        "convert_sql",
        "clip",
        "buffer",
        "simplify",
        "dissolve",
        "geometry_op",
        "overlay",
        "join",
        "measure",
        "merge",
        "from_table",
        "contour",
    ],
)
def test_layer_is_named_after_the_output_file(tmp_path: Path, src: str, writer: str) -> None:
    write = writers(tmp_path, src)[writer]
    write(str(tmp_path / "result.gpkg"))
    assert [str(n) for n, _ in pyogrio.list_layers(tmp_path / "result.gpkg")] == ["result"]


def test_output_layer_still_wins(tmp_path: Path, src: str) -> None:
    s, _ = convert(src, str(tmp_path / "a.gpkg"), output_layer="parcels")
    assert s.layer == "parcels" and [str(n) for n, _ in pyogrio.list_layers(tmp_path / "a.gpkg")] == ["parcels"]


def test_geojson_source_layer_name_is_not_carried_over(tmp_path: Path) -> None:
    """A GeoJSON read from stdin or a URL is GDAL's layer 'OGRGeoJSON'; its 'name' member can be anything."""
    (tmp_path / "odd.geojson").write_text(
        '{"type": "FeatureCollection", "name": "OGRGeoJSON", "features": [{"type": "Feature", "properties": {"a": 1}, '
        '"geometry": {"type": "Point", "coordinates": [1, 2]}}]}'
    )
    assert [str(n) for n, _ in pyogrio.list_layers(tmp_path / "odd.geojson")] == ["OGRGeoJSON"]
    s, _ = convert(str(tmp_path / "odd.geojson"), str(tmp_path / "towns.gpkg"))
    assert s.layer == "towns" and [str(n) for n, _ in pyogrio.list_layers(tmp_path / "towns.gpkg")] == ["towns"]
    assert shapely.Point(1, 2).equals(gpd.read_file(tmp_path / "towns.gpkg").geometry[0])
