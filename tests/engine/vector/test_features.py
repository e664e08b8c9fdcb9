"""features: bounded GeoJSON pages (limit/offset/remaining), simplified or no geometry, dst_crs, budget, errors.

Expected values are read independently from the source with pyogrio and shapely, or come from pyproj.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyogrio
import pytest
import shapely
from pyproj import Transformer

from gdal_mcp.engine.vector.features import BUDGET, MAX_VERTICES, features
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

V = DATA / "vector"
NE = str(V / "naturalearth_lowres.shp")


def source(path: str = NE, layer: str | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(fids, geometries, field -> values) of the whole layer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta, fids, wkb, values = pyogrio.raw.read(path, layer=layer, return_fids=True)
    return fids, shapely.from_wkb(wkb), dict(zip(meta["fields"], values, strict=True))


def shape(feature: dict) -> shapely.Geometry:
    return shapely.from_geojson(json.dumps(feature["geometry"]))


def test_first_page_is_bounded_and_exact() -> None:
    fids, geoms, values = source()
    page = features(NE)
    assert (len(page.features), page.truncated, page.remaining, page.offset) == (50, True, 127, 0)
    assert (page.layer, page.crs, page.type) == ("naturalearth_lowres", "EPSG:4326", "FeatureCollection")
    assert [f["id"] for f in page.features] == list(fids[:50])
    first = page.features[0]
    assert first["properties"] == {
        "pop_est": 920938,
        "continent": "Oceania",
        "name": "Fiji",
        "iso_a3": "FJI",
        "gdp_md_est": 8374.0,
    }
    assert all(shapely.equals_exact(shape(f), g) for f, g in zip(page.features, geoms[:50], strict=True))
    json.dumps(page.model_dump())  # plain JSON


def test_offset_pages_to_the_end() -> None:
    page = features(NE, limit=10, offset=170)
    assert [f["id"] for f in page.features] == list(range(170, 177))
    assert (page.truncated, page.remaining) == (False, 0)
    page = features(NE, limit=10, offset=500)
    assert (page.features, page.truncated, page.remaining) == ([], False, 0)


def test_where_bbox_and_fields_count_the_matching_features() -> None:
    fids, geoms, values = source()
    africa = values["continent"] == "Africa"
    page = features(NE, where="continent = 'Africa'", fields=["name"], limit=10, offset=40)
    assert [f["properties"] for f in page.features] == [{"name": n} for n in values["name"][africa][40:50]]
    assert [f["id"] for f in page.features] == list(fids[africa][40:50])
    assert (page.truncated, page.remaining) == (True, 1)
    inside = shapely.intersects(geoms, shapely.box(0, 0, 10, 10))
    page = features(NE, bbox=(0, 0, 10, 10), limit=3, geometry_mode="none")
    assert (len(page.features), page.remaining) == (3, inside.sum() - 3)
    assert [f["id"] for f in page.features] == list(fids[inside][:3])
    t = Transformer.from_crs(4326, 3857, always_xy=True)
    box3857 = (*t.transform(0, 0), *t.transform(10, 10))
    page = features(NE, bbox=box3857, bbox_crs="EPSG:3857", limit=1000, geometry_mode="none")
    assert [f["id"] for f in page.features] == list(fids[inside])


# A triangle over the Mediterranean (lon/lat), crossing Europe, Africa and the Middle East.
TRIANGLE = {"type": "Polygon", "coordinates": [[[-10, 30], [40, 25], [15, 55], [-10, 30]]]}


def test_intersects_keeps_what_shapely_says_intersects() -> None:
    fids, geoms, values = source()
    triangle = shapely.geometry.shape(TRIANGLE)
    expected = list(fids[shapely.intersects(geoms, triangle)])
    assert 10 < len(expected) < 177
    page = features(NE, intersects=TRIANGLE, geometry_mode="none", limit=1000)
    assert [f["id"] for f in page.features] == expected and (page.truncated, page.remaining) == (False, 0)
    # a Feature / FeatureCollection works as well, and pages add up to the same set, in layer order
    collection = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": TRIANGLE}]}
    first = features(NE, intersects=collection, geometry_mode="none", limit=7)
    second = features(NE, intersects=collection, geometry_mode="none", limit=7, offset=7)
    assert [f["id"] for f in first.features + second.features] == expected[:14]
    assert first.truncated and first.remaining == len(expected) - 7 and second.remaining == len(expected) - 14
    # combined with where and bbox, each filter applies
    africa = values["continent"] == "Africa"
    inside_box = shapely.intersects(geoms, shapely.box(0, 0, 50, 50))
    page = features(NE, intersects=TRIANGLE, where="continent = 'Africa'", bbox=(0, 0, 50, 50), fields=["name"], limit=1000)
    mask = shapely.intersects(geoms, triangle) & africa & inside_box
    assert [f["properties"]["name"] for f in page.features] == list(values["name"][mask])
    assert all(shapely.equals_exact(shape(f), geoms[f["id"]]) for f in page.features)


def test_intersects_in_another_crs() -> None:
    fids, geoms, values = source()
    lon, lat = 2.35, 48.85  # Paris
    x, y = Transformer.from_crs(4326, 3857, always_xy=True).transform(lon, lat)
    page = features(NE, intersects={"type": "Point", "coordinates": [x, y]}, intersects_crs="EPSG:3857")
    assert [f["id"] for f in page.features] == list(fids[shapely.intersects(geoms, shapely.Point(lon, lat))])
    assert [f["properties"]["name"] for f in page.features] == ["France"]
    nowhere = features(NE, intersects={"type": "Point", "coordinates": [-30, -50]})  # South Atlantic
    assert (nowhere.features, nowhere.remaining) == ([], 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"intersects": {"type": "Polygon"}},
        {"intersects": {"coordinates": [1, 2]}},
        {"intersects_crs": "EPSG:3857"},
        {"intersects": TRIANGLE, "intersects_crs": "UTM zone 32N"},
    ],
)
def test_bad_intersects(kwargs) -> None:
    with pytest.raises(GdalMcpError) as e:
        features(NE, **kwargs)
    assert e.value.code == "invalid-argument" and "intersects" in e.value.message


def test_simplified_geometries_have_at_most_100_vertices_taken_from_the_source() -> None:
    _, geoms, _ = source()
    page = features(NE, geometry_mode="simplified", limit=20)
    simplified = [f for f in page.features if "simplify_tolerance" in f]
    assert simplified and any("simplified" in w and "tolerance" in w and "degree" in w for w in page.warnings)
    for f in page.features:
        g = shape(f)
        assert shapely.get_num_coordinates(g) <= MAX_VERTICES and not g.is_empty
        original = geoms[f["id"]]
        if "simplify_tolerance" not in f:
            assert shapely.equals_exact(g, original)
            continue
        # Douglas-Peucker: every vertex kept lies within the tolerance of the original outline (GEOS may add
        # vertices where it repairs a polygon it made self-intersect, so they are not all original vertices).
        assert shapely.get_num_coordinates(original) > MAX_VERTICES
        vertices = shapely.points(shapely.get_coordinates(g))
        assert (shapely.distance(vertices, original.boundary) <= f["simplify_tolerance"] * (1 + 1e-9)).all()
    canada = next(f for f in page.features if f["properties"]["name"] == "Canada")  # 794 vertices in 30 parts
    assert shapely.get_num_coordinates(geoms[canada["id"]]) == 794 and canada["simplify_tolerance"] > 0


def test_no_geometry() -> None:
    page = features(NE, geometry_mode="none", limit=1000)
    assert len(page.features) == 177 and all(f["geometry"] is None for f in page.features)
    assert (page.truncated, page.remaining, page.warnings) == (False, 0, [])
    assert page.features[-1]["properties"]["name"] == source()[2]["name"][-1]


def test_dst_crs_coordinates_match_pyproj() -> None:
    _, geoms, _ = source()
    page = features(NE, dst_crs="EPSG:3857", limit=5)
    assert page.crs == "EPSG:3857"
    t = Transformer.from_crs(4326, 3857, always_xy=True)
    for f in page.features:
        c = shapely.get_coordinates(geoms[f["id"]])
        x, y = t.transform(c[:, 0], c[:, 1])
        np.testing.assert_allclose(shapely.get_coordinates(shape(f)), np.column_stack([x, y]), rtol=1e-12)
    with pytest.raises(GdalMcpError) as e:
        features(NE, dst_crs="nonsense")
    assert e.value.code == "invalid-argument"


def test_a_page_over_the_budget_is_simplified_not_megabytes() -> None:
    page = features(NE, limit=1000)
    assert len(page.features) == 177
    size = sum(len(json.dumps(f["geometry"])) for f in page.features)
    assert size <= BUDGET * 1.05
    assert any("to keep the page under" in w for w in page.warnings)
    assert all(f["geometry"] is not None or "geometry_omitted" in f for f in page.features)


def test_other_sources_ids_and_values() -> None:
    fids, _, _ = source(str(V / "sample.osm.pbf"), "points")
    page = features(str(V / "sample.osm.pbf"), layer="points", limit=3, offset=2)
    assert [f["id"] for f in page.features] == list(fids[2:5]) and page.remaining == 3  # OSM ids are the FIDs
    page = features(str(V / "test_gpx.gpx"), layer="track_points", limit=1)
    assert page.features[0]["properties"]["time"] == "2014-06-11T12:21:40Z" and page.remaining == 18
    page = features(str(V / "line_zm.gpkg"))
    assert len(page.features[0]["geometry"]["coordinates"][0]) == 3  # Z kept (GeoJSON has no M)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": 1001},
        {"offset": -1},
        {"geometry_mode": "bbox"},
        {"where": "no_such_field = 1"},
        {"bbox": (10, 0, 0, 10)},
    ],
)
def test_bad_arguments(kwargs) -> None:
    with pytest.raises(GdalMcpError) as e:
        features(NE, **kwargs)
    assert e.value.code == "invalid-argument"


def test_layer_must_be_named_when_there_are_several() -> None:
    with pytest.raises(GdalMcpError) as e:
        features(str(V / "test_gpx.gpx"))
    assert e.value.code == "invalid-argument" and "track_points" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        features(NE, fields=["nope"])
    assert e.value.code == "not-found"
