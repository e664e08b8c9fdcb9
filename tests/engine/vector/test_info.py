"""vector_info engine against the verified facts of tests/data/MANIFEST.md."""

from __future__ import annotations

import pytest

from gdal_mcp.engine.vector.info import vector_info
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

V = DATA / "vector"


def test_naturalearth() -> None:
    info = vector_info(str(V / "naturalearth_lowres.shp"))
    (layer,) = info.layers
    assert (layer.name, layer.feature_count, layer.crs.epsg) == ("naturalearth_lowres", 177, 4326)
    assert [f.name for f in layer.fields] == ["pop_est", "continent", "name", "iso_a3", "gdp_md_est"]
    assert (layer.extent.left, layer.extent.bottom, layer.extent.top) == (-180, -90, pytest.approx(83.645, abs=1e-3))
    assert info.sample is None


def test_sample_features_are_bounded_geojson() -> None:
    info = vector_info(str(V / "naturalearth_lowres.shp"), layer="naturalearth_lowres")
    feats = info.sample["features"]
    assert len(feats) == 5 and feats[0]["properties"]["name"] == "Fiji"
    assert feats[0]["geometry"]["type"] == "MultiPolygon"
    big = [f for f in feats if f["geometry"] is None]
    assert all("vertices" in f["geometry_omitted"] for f in big)


def test_gpx_lists_five_layers_and_names_them_when_one_is_wrong() -> None:
    info = vector_info(str(V / "test_gpx.gpx"))
    counts = {layer.name: layer.feature_count for layer in info.layers}
    assert counts == {"waypoints": 0, "routes": 0, "tracks": 1, "route_points": 0, "track_points": 19}
    with pytest.raises(GdalMcpError) as e:
        vector_info(str(V / "test_gpx.gpx"), layer="trackpoints")
    assert e.value.code == "not-found" and "track_points" in e.value.message


def test_osm_pbf_counts_are_scanned() -> None:
    info = vector_info(str(V / "sample.osm.pbf"))
    counts = {layer.name: layer.feature_count for layer in info.layers}
    assert counts["points"] == 8
    assert all(c is not None and c >= 0 for c in counts.values())


def test_mixed_geometries_and_z() -> None:
    trio = vector_info(str(V / "trio.geojson"), layer="trio")
    assert {f["geometry"]["type"] for f in trio.sample["features"]} == {"Point", "LineString", "Polygon"}
    zm = vector_info(str(V / "line_zm.gpkg"), layer="line_zm")
    assert zm.layers[0].geometry_type.startswith("LineString Z")
    assert len(zm.sample["features"][0]["geometry"]["coordinates"][0]) == 3


def test_custom_albers_has_no_epsg() -> None:
    info = vector_info(str(V / "polygons.shp"))
    assert info.layers[0].crs.epsg is None and "+proj=aea" in info.layers[0].crs.proj4
    assert info.layers[0].feature_count == 2


def test_a_raster_is_not_a_vector() -> None:
    with pytest.raises(GdalMcpError) as e:
        vector_info(str(DATA / "raster" / "RGB.byte.tif"))
    assert e.value.code == "unsupported" and "raster_info" in e.value.message
