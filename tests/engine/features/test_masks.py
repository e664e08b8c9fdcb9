"""Clip regions shared by raster and vector clip: GeoJSON, vector masks, reprojection with densified edges."""

from __future__ import annotations

import pytest
import shapely
import shapely.geometry
from pyproj import CRS, Transformer
from rasterio.crs import CRS as RioCRS

from gdal_mcp.engine.features.masks import (
    check_bbox,
    check_choice,
    check_owners,
    geojson_geometries,
    mask_polygons,
    polygons,
    read_mask,
    reproject,
    same_crs,
)
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

V = DATA / "vector"
WORLD = str(V / "naturalearth_lowres.shp")
ALBERS = (V / "polygons.prj").read_text()
SQUARE = {"type": "Polygon", "coordinates": [[[0, 0], [2, 0], [2, 2], [0, 2], [0, 0]]]}


def test_geojson_geometry_feature_and_collection() -> None:
    feature = {"type": "Feature", "properties": {"a": 1}, "geometry": SQUARE}
    collection = {"type": "FeatureCollection", "features": [feature, {"type": "Feature", "geometry": None}, feature]}
    assert [g.wkt for g in geojson_geometries(SQUARE)] == ["POLYGON ((0 0, 2 0, 2 2, 0 2, 0 0))"]
    assert len(geojson_geometries(feature)) == 1 and len(geojson_geometries(collection)) == 2
    assert geojson_geometries({"type": "Feature", "geometry": None}) == []
    for bad in ({"type": "Polygon"}, [1, 2], {"coordinates": []}):
        with pytest.raises(GdalMcpError) as e:
            geojson_geometries(bad)
        assert e.value.code == "invalid-argument" and "GeoJSON" in e.value.message


def test_choice_owners_and_bbox_checks() -> None:
    assert check_choice((0, 0, 1, 1), None, None) == "bbox" and check_choice(None, None, "m.shp") == "mask"
    with pytest.raises(GdalMcpError, match="got none"):
        check_choice(None, None, None)
    with pytest.raises(GdalMcpError, match="got bbox and geometry"):
        check_choice((0, 0, 1, 1), SQUARE, None)
    with pytest.raises(GdalMcpError, match="mask_where only applies with mask"):
        check_owners("bbox", bbox_crs=None, mask_where="x = 1")
    assert check_bbox([1, "2", 3, 4.5]) == (1.0, 2.0, 3.0, 4.5)
    for bad in ((0, 0, 1), (0, 0, 1, float("nan")), (2, 0, 1, 1), "abcd"):
        with pytest.raises(GdalMcpError) as e:
            check_bbox(bad)
        assert e.value.code == "invalid-argument"


def test_polygons_repairs_and_refuses_lines() -> None:
    bowtie = shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2)])
    parts = polygons([bowtie, shapely.MultiPolygon([shapely.box(5, 5, 6, 6)]), shapely.Point(1, 1)])
    assert all(p.geom_type == "Polygon" and p.is_valid for p in parts)
    assert sum(p.area for p in parts) == pytest.approx(3.0)  # two triangles of 1 + the unit square
    with pytest.raises(GdalMcpError) as e:
        polygons([shapely.LineString([(0, 0), (1, 1)])])
    assert "needs polygons but got LineString" in e.value.message


def test_reproject_densifies_edges() -> None:
    box = shapely.box(-10, 40, 10, 50)
    (out,) = reproject([box], "EPSG:4326", "EPSG:3035", target="layer")
    # A lon/lat box edge is a parallel: it curves in LAEA Europe, so the projected polygon has many vertices.
    assert shapely.get_num_coordinates(out) > 200
    t = Transformer.from_crs("EPSG:4326", "EPSG:3035", always_xy=True)
    x, y = t.transform(0.0, 40.0)  # the middle of the southern edge lies on the boundary
    assert out.exterior.distance(shapely.Point(x, y)) < 1.0
    assert reproject([box], RioCRS.from_epsg(4326), "EPSG:4326") == [box]
    assert reproject([box], None, "EPSG:3035") == [box]
    with pytest.raises(GdalMcpError) as e:
        reproject([shapely.box(60, -10, 120, 10)], "EPSG:4326", "+proj=ortho +lat_0=0 +lon_0=0", target="layer")
    assert "cannot be projected to the layer's CRS" in e.value.message


def test_same_crs_across_types() -> None:
    assert same_crs(RioCRS.from_epsg(4326), "EPSG:4326") and same_crs(CRS(ALBERS), RioCRS.from_wkt(ALBERS))
    assert not same_crs("EPSG:4326", "EPSG:3857") and same_crs(None, None) and not same_crs(None, "EPSG:4326")


def test_read_mask_where_and_layer_errors() -> None:
    geoms, crs = read_mask(WORLD, None, "name = 'France'")
    assert len(geoms) == 1 and crs.to_epsg() == 4326
    with pytest.raises(GdalMcpError) as e:
        read_mask(WORLD, None, "name = 'Atlantis'")
    assert e.value.code == "invalid-argument" and "no features with a geometry matching" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        read_mask(str(V / "test_gpx.gpx"), None, None)
    assert "pass mask_layer= one of" in e.value.message


def test_mask_polygons_in_a_custom_albers_target() -> None:
    target = RioCRS.from_wkt(ALBERS)
    lonlat = shapely.box(-122.0, 43.0, -121.0, 44.0)
    polys, given = mask_polygons(target_crs=target, target="layer", geometry=shapely.geometry.mapping(lonlat))
    assert given.to_epsg() == 4326 and len(polys) == 1
    t = Transformer.from_crs("EPSG:4326", CRS(ALBERS), always_xy=True)
    expected = shapely.transform(shapely.segmentize(lonlat, 0.001), lambda x, y: t.transform(x, y), interleaved=False)
    assert polys[0].symmetric_difference(expected).area < 1e-5 * expected.area
    # A bbox in lon/lat becomes the same curved region; without bbox_crs it is in the target's own units.
    (from_bbox,), _ = mask_polygons(target_crs=target, bbox=(-122.0, 43.0, -121.0, 44.0), bbox_crs="EPSG:4326")
    assert from_bbox.symmetric_difference(expected).area < 1e-5 * expected.area
    (native,), crs = mask_polygons(target_crs=target, bbox=(0, 0, 10, 10))
    assert native.equals(shapely.box(0, 0, 10, 10)) and crs is None
    # A mask file in its own CRS (EPSG:4326) with a where clause.
    (france, *rest), _ = mask_polygons(target_crs=RioCRS.from_epsg(3035), mask=WORLD, mask_where="name = 'France'")
    assert 3.0e11 < sum(p.area for p in [france, *rest]) < 6.5e11  # France incl. Corsica and French Guiana


def test_mask_polygons_without_a_target_crs() -> None:
    polys, crs = mask_polygons(target_crs=None, geometry=SQUARE)
    assert crs is None and polys[0].equals(shapely.box(0, 0, 2, 2))
    with pytest.raises(GdalMcpError) as e:
        mask_polygons(target_crs=None, geometry=SQUARE, geometry_crs="EPSG:4326", target="layer")
    assert "geometry_crs was given but the layer has no CRS" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        mask_polygons(target_crs=None, bbox=(0, 0, 1, 1), bbox_crs="EPSG:4326", target="layer")
    assert "bbox_crs was given but the layer has no CRS" in e.value.message
