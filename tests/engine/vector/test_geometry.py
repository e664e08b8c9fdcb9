"""Buffer, simplify and dissolve, with distances checked on the ground (pyproj.Geod) and areas in equal-area."""

from __future__ import annotations

import math

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import shapely
from pyproj import Geod, Transformer

import gdal_mcp.engine.vector.layer_map as layer_map
from gdal_mcp.engine.vector.geometry import GeomType, buffer, dissolve, keep_dimension, layer_type, simplify, to_multi
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

V = DATA / "vector"
WORLD = str(V / "naturalearth_lowres.shp")
POINTS = str(V / "points.shp")  # 3 points, custom Albers in metres
GEOD = Geod(ellps="WGS84")
EQUAL_AREA = "EPSG:6933"


def load(path, **kwargs):
    meta, _, wkb, fields = pyogrio.raw.read(str(path), **kwargs)
    return meta, dict(zip(meta["fields"], fields, strict=True)), shapely.from_wkb(wkb)


def write(path, geoms, geometry_type, fields=None, crs="EPSG:4326"):
    fields = fields or {"i": np.arange(len(geoms))}
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(geoms),
        list(fields.values()),
        fields=list(fields),
        geometry_type=geometry_type,
        crs=crs,
        driver="GPKG",
    )
    return str(path)


def regular_polygon_area(radius: float, sides: int) -> float:
    return sides / 2 * radius**2 * math.sin(2 * math.pi / sides)


def ground_distances(polygon, lon: float, lat: float) -> np.ndarray:
    """Geodesic distance from (lon, lat) to every vertex of the polygon's shell."""
    xy = shapely.get_coordinates(polygon.exterior)
    return GEOD.inv(np.full(len(xy), lon), np.full(len(xy), lat), xy[:, 0], xy[:, 1])[2]


def ground_width(polygon) -> float:
    """Largest geodesic distance between two vertices (the diameter of a buffered point)."""
    xy = shapely.get_coordinates(polygon.exterior)
    i, j = np.triu_indices(len(xy), 1)
    return float(GEOD.inv(xy[i, 0], xy[i, 1], xy[j, 0], xy[j, 1])[2].max())


def equal_area(geoms, crs="EPSG:4326") -> np.ndarray:
    t = Transformer.from_crs(crs, EQUAL_AREA, always_xy=True)
    return shapely.area(shapely.transform(geoms, lambda x, y: t.transform(x, y), interleaved=False))


# ---------------------------------------------------------------------------------------------- buffer


def test_metres_on_a_compact_lonlat_layer_use_the_utm_zone(tmp_path) -> None:
    lon, lat = np.array([-9.20, -9.14, -9.05, -8.95]), np.array([38.70, 38.72, 38.80, 38.60])  # around Lisbon
    src = write(tmp_path / "p.gpkg", shapely.points(lon, lat), "Point")
    summary, warnings = buffer(src, str(tmp_path / "b.gpkg"), distance=1000, units="m")
    assert summary.geometry_type == "Polygon" and summary.feature_count == 4 and summary.crs == "EPSG:4326"
    assert len(warnings) == 1 and "UTM zone 29N (EPSG:32629)" in warnings[0]
    _, fields, got = load(tmp_path / "b.gpkg")
    assert list(fields["i"]) == [0, 1, 2, 3]
    for poly, x, y in zip(got, lon, lat, strict=True):
        assert ground_width(poly) == pytest.approx(2000.0, rel=0.01)
        assert ground_distances(poly, x, y) == pytest.approx(1000.0, rel=0.01)
        assert shapely.get_num_coordinates(poly) == 33  # 8 segments per quarter circle, closed ring


def test_metres_on_a_worldwide_layer_use_a_projection_per_feature(tmp_path) -> None:
    # Lisbon, Tokyo, Sydney, Anchorage, Tromsø, and a point in Fiji 530 m west of the antimeridian.
    lon = np.array([-9.14, 139.69, 151.21, -149.90, 18.96, 179.995])
    lat = np.array([38.72, 35.69, -33.87, 61.22, 69.65, -16.5])
    src = write(tmp_path / "world.gpkg", shapely.points(lon, lat), "Point")
    summary, warnings = buffer(src, str(tmp_path / "b.gpkg"), distance=1, units="km", segments=16)
    assert "azimuthal equidistant projection centred on it" in warnings[0]
    assert any("1 feature(s) now cross the antimeridian" in w for w in warnings)
    _, _, got = load(tmp_path / "b.gpkg")
    for poly, x, y in zip(got, lon, lat, strict=True):
        # Geodesic circles: every vertex is 1000 m from the point on the ellipsoid.
        assert ground_distances(poly, x, y) == pytest.approx(1000.0, rel=1e-6)
        assert ground_width(poly) == pytest.approx(2000.0, rel=0.01)
    fiji = got[-1]
    assert fiji.is_valid and fiji.bounds[2] > 180.0  # continuous across the antimeridian


def test_degrees_warn(tmp_path) -> None:
    src = write(tmp_path / "p.gpkg", shapely.points([10.0], [50.0]), "Point")
    summary, warnings = buffer(src, str(tmp_path / "b.gpkg"), distance=0.01, units="layer")
    assert len(warnings) == 1 and "is geographic, so the distance 0.01 is in degrees" in warnings[0]
    (poly,) = load(tmp_path / "b.gpkg")[2]
    assert poly.area == pytest.approx(regular_polygon_area(0.01, 32))
    _, warnings = buffer(src, str(tmp_path / "d.gpkg"), distance=0.01, units="deg")
    assert len(warnings) == 1 and "in degrees, as asked" in warnings[0] and "units='m'" in warnings[0]
    assert load(tmp_path / "d.gpkg")[2][0].equals(poly)
    _, warnings = simplify(WORLD, str(tmp_path / "s.gpkg"), tolerance=0.1, units="deg")
    assert any("tolerance 0.1 was applied in degrees" in w for w in warnings)


def test_the_default_units_are_metres_on_the_ground(tmp_path) -> None:
    # 0.1 defect: units defaulted to the layer's, so distance=500 on EPSG:4326 wrote 500-degree buffers.
    lon, lat = np.array([10.0, 10.2]), np.array([50.0, 50.1])
    src = write(tmp_path / "p.gpkg", shapely.points(lon, lat), "Point")
    _, warnings = buffer(src, str(tmp_path / "b.gpkg"), distance=500)
    assert not any("degree" in w for w in warnings)
    for poly, x, y in zip(load(tmp_path / "b.gpkg")[2], lon, lat, strict=True):
        assert ground_distances(poly, x, y) == pytest.approx(500.0, rel=0.01)
    _, warnings = simplify(WORLD, str(tmp_path / "s.gpkg"), tolerance=20_000)
    assert not any("degree" in w for w in warnings)
    _, _, original = load(WORLD)
    _, _, simple = load(tmp_path / "s.gpkg")
    # a 20 km tolerance: the outlines change, but by far less than a 20 000-degree tolerance would (it empties them)
    assert not shapely.is_empty(simple).any()
    assert shapely.get_num_coordinates(simple).sum() < shapely.get_num_coordinates(original).sum()
    assert (shapely.hausdorff_distance(original, simple) < 1).all()  # degrees (20 km is 0.18° of latitude)


def test_projected_metres_give_pi_r_squared(tmp_path) -> None:
    summary, warnings = buffer(POINTS, str(tmp_path / "b.gpkg"), distance=10)
    assert warnings == [] and summary.feature_count == 3 and summary.geometry_type == "Polygon"
    got = load(tmp_path / "b.gpkg")[2]
    assert shapely.area(got) == pytest.approx(regular_polygon_area(10, 32), rel=1e-9)
    assert shapely.area(got) == pytest.approx(math.pi * 100, rel=0.01)
    _, _, pts = load(POINTS)
    assert np.allclose(shapely.get_coordinates(shapely.centroid(got)), shapely.get_coordinates(pts))


@pytest.mark.parametrize(("distance", "units"), [(10, "m"), (0.01, "km"), (10 / 0.3048, "ft"), (10 / 1609.344, "mi")])
def test_linear_units_convert_to_the_layers_metres(tmp_path, distance, units) -> None:
    _, warnings = buffer(POINTS, str(tmp_path / "b.gpkg"), distance=distance, units=units)
    assert warnings == []
    assert shapely.area(load(tmp_path / "b.gpkg")[2]) == pytest.approx(regular_polygon_area(10, 32), rel=1e-9)


def test_metres_on_a_layer_in_us_feet(tmp_path) -> None:
    # EPSG:2263, NAD83 / New York Long Island (ftUS): 10 m is 32.8083 US survey feet.
    src = write(tmp_path / "ny.gpkg", shapely.points([1_000_000.0], [200_000.0]), "Point", crs="EPSG:2263")
    buffer(src, str(tmp_path / "b.gpkg"), distance=10, units="m")
    radius = 10 / (1200 / 3937)
    assert load(tmp_path / "b.gpkg")[2][0].area == pytest.approx(regular_polygon_area(radius, 32), rel=1e-9)


def test_negative_distances_shrink_polygons_and_can_empty_them(tmp_path) -> None:
    polygons = str(V / "polygons.shp")
    _, _, src = load(polygons)
    _, warnings = buffer(polygons, str(tmp_path / "s.gpkg"), distance=-10)
    got = load(tmp_path / "s.gpkg")[2]
    assert warnings == [] and (shapely.area(got) < shapely.area(src)).all() and shapely.contains(src, got).all()
    summary, warnings = buffer(polygons, str(tmp_path / "e.gpkg"), distance=-1, units="km")
    assert summary.feature_count == 2 and any("2 feature(s) vanished" in w for w in warnings)
    assert shapely.is_missing(load(tmp_path / "e.gpkg")[2]).all()
    # FlatGeobuf's spatial index refuses null geometries: written again without it, counted once.
    summary, warnings = buffer(polygons, str(tmp_path / "e.fgb"), distance=-1, units="km")
    assert summary.feature_count == 2 and warnings == [
        "some features have no geometry, which a FlatGeobuf spatial index cannot hold: the file was written without "
        "a spatial index",
        "2 feature(s) vanished under the buffer (empty result) and were written with a null geometry",
    ]


def test_line_caps_and_joins(tmp_path) -> None:
    line = shapely.LineString([(0, 0), (100, 0), (100, 100)])
    src = write(tmp_path / "l.gpkg", np.array([line]), "LineString", crs="EPSG:32631")
    buffer(src, str(tmp_path / "f.gpkg"), distance=5, cap_style="flat", join_style="mitre")
    assert load(tmp_path / "f.gpkg")[2][0].area == pytest.approx(2000.0, rel=1e-9)  # an L of 105 x 10 + 95 x 10
    buffer(src, str(tmp_path / "r.gpkg"), distance=5)
    assert load(tmp_path / "r.gpkg")[2][0].area == pytest.approx(line.buffer(5, quad_segs=8).area, rel=1e-12)


@pytest.mark.parametrize(
    ("src", "kwargs", "text"),
    [
        (POINTS, {"distance": 1, "units": "deg"}, "units='deg' needs a geographic layer"),
        (POINTS, {"distance": 1, "units": "parsec"}, "units must be one of layer, m, km, ft, mi, deg"),
        (POINTS, {"distance": -1}, "a negative distance shrinks polygons"),
        (POINTS, {"distance": float("nan")}, "finite"),
        (POINTS, {"distance": 1, "segments": 0}, "segments"),
        (POINTS, {"distance": 1, "cap_style": "butt"}, "cap_style"),
        (WORLD, {"distance": 1, "layer": "nope"}, "layer 'nope' not found"),
    ],
)
def test_invalid_arguments(tmp_path, src, kwargs, text) -> None:
    with pytest.raises(GdalMcpError) as e:
        buffer(src, str(tmp_path / "x.gpkg"), **kwargs)
    assert e.value.code in ("invalid-argument", "not-found") and text in e.value.message
    assert not (tmp_path / "x.gpkg").exists()


def test_a_layer_without_crs_only_takes_layer_units(tmp_path) -> None:
    src = write(tmp_path / "n.gpkg", shapely.points([1.0], [2.0]), "Point", crs=None)
    with pytest.raises(GdalMcpError) as e:
        buffer(src, str(tmp_path / "x.gpkg"), distance=1)  # the default units are metres
    assert "has no CRS" in e.value.message and "units='layer'" in e.value.message
    summary, warnings = buffer(src, str(tmp_path / "ok.gpkg"), distance=1, units="layer")
    assert summary.crs is None and warnings == []


# ---------------------------------------------------------------------------------------------- simplify


def test_simplify_metres_on_a_geographic_layer(tmp_path) -> None:
    summary, warnings = simplify(WORLD, str(tmp_path / "s.gpkg"), tolerance=10, units="km")
    assert summary.feature_count == 177 and "azimuthal equidistant" in warnings[0]
    assert any("1 feature(s) have a part spanning more than 180°" in w for w in warnings)  # Antarctica
    _, src_fields, src = load(WORLD)
    _, fields, got = load(tmp_path / "s.gpkg")
    assert list(fields["name"]) == list(src_fields["name"])
    assert shapely.is_valid(got).all() and not shapely.is_empty(got).any()
    before, after = shapely.get_num_coordinates(src), shapely.get_num_coordinates(got)
    assert (after <= before).all() and after.sum() < 0.85 * before.sum()
    # Vertices are kept exactly (no round trip through the projection), Fiji stays split at ±180.
    original = {tuple(c) for c in shapely.get_coordinates(src)}
    assert all(tuple(c) in original for c in shapely.get_coordinates(got))
    fiji = got[list(fields["name"]).index("Fiji")]
    assert fiji.bounds[0] == -180.0 and fiji.bounds[2] == 180.0
    antarctica = list(fields["name"]).index("Antarctica")
    assert got[antarctica].equals(src[antarctica])


def test_simplify_stays_within_the_tolerance_in_metres(tmp_path) -> None:
    # A wiggly line near Lisbon, 1 m amplitude noise on a 200 m sine wave; in UTM 29N.
    t = np.linspace(0, 1, 2000)
    x, y = 487_000 + 5000 * t, 4_285_000 + 200 * np.sin(6 * np.pi * t) + np.random.default_rng(1).normal(0, 1, t.size)
    utm = shapely.LineString(np.column_stack([x, y]))
    to_ll = Transformer.from_crs("EPSG:32629", "EPSG:4326", always_xy=True)
    line = shapely.transform(utm, lambda a, b: to_ll.transform(a, b), interleaved=False)
    src = write(tmp_path / "l.gpkg", np.array([line]), "LineString")
    _, warnings = simplify(src, str(tmp_path / "s.gpkg"), tolerance=20, units="m")
    assert "UTM zone 29N" in warnings[0]
    (got,) = load(tmp_path / "s.gpkg")[2]
    back = shapely.transform(
        got, lambda a, b: Transformer.from_crs("EPSG:4326", "EPSG:32629", always_xy=True).transform(a, b), interleaved=False
    )
    assert shapely.get_num_coordinates(got) < 200
    assert shapely.hausdorff_distance(back, utm) <= 20.0 + 1e-3
    assert shapely.hausdorff_distance(back, utm) > 5.0
    _, warnings = simplify(src, str(tmp_path / "d.gpkg"), tolerance=0.0002, units="layer")
    assert "in degrees" in warnings[0]


def test_simplify_without_preserving_topology(tmp_path) -> None:
    summary, _ = simplify(str(V / "polygons.shp"), str(tmp_path / "s.gpkg"), tolerance=50, preserve_topology=False)
    got = load(tmp_path / "s.gpkg")[2]
    assert summary.feature_count == 2 and (shapely.get_num_coordinates(got) < 20).all()


# ---------------------------------------------------------------------------------------------- dissolve


def test_dissolve_by_continent(tmp_path) -> None:
    summary, warnings = dissolve(WORLD, str(tmp_path / "c.gpkg"), by="continent")
    _, src_fields, src = load(WORLD)
    _, fields, got = load(tmp_path / "c.gpkg")
    continents = sorted(set(src_fields["continent"]))
    assert list(fields) == ["continent"] and list(fields["continent"]) == continents
    assert summary.feature_count == len(continents) == 8 and summary.geometry_type == "MultiPolygon"
    assert shapely.is_valid(got).all()
    src_area, got_area = equal_area(src), equal_area(got)
    assert got_area.sum() == pytest.approx(src_area.sum(), rel=1e-6)
    for name, area in zip(fields["continent"], got_area, strict=True):
        assert area == pytest.approx(src_area[src_fields["continent"] == name].sum(), rel=1e-6)
    assert warnings == ["the output layer is MultiPolygon: some groups are multi-part"]


def test_dissolve_everything_into_one_feature_in_small_batches(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(layer_map, "READ_BATCH", 16)
    reports: list[tuple[float, str]] = []
    summary, _ = dissolve(WORLD, str(tmp_path / "all.gpkg"), progress=lambda f, m="": reports.append((f, m)))
    _, fields, (world,) = load(tmp_path / "all.gpkg")
    assert summary.feature_count == 1 and summary.fields == [] and fields == {}
    assert equal_area([world])[0] == pytest.approx(equal_area(load(WORLD)[2]).sum(), rel=1e-6) and world.is_valid
    assert sum(m.startswith("dissolved") for _, m in reports) == 12 and reports[-1] == (1.0, "wrote 1 features")
    # Batch by batch (12 of them) gives the same continents as all at once.
    dissolve(WORLD, str(tmp_path / "small.gpkg"), by="continent")
    monkeypatch.setattr(layer_map, "READ_BATCH", 100_000)
    dissolve(WORLD, str(tmp_path / "whole.gpkg"), by="continent")
    small, whole = load(tmp_path / "small.gpkg")[2], load(tmp_path / "whole.gpkg")[2]
    assert shapely.is_valid(small).all() and all(a.equals(b) for a, b in zip(small, whole, strict=True))


def test_dissolve_by_several_keys_with_nulls(tmp_path) -> None:
    squares = shapely.box(np.arange(6.0), 0, np.arange(6.0) + 1, 1)  # adjacent unit squares
    kind = np.array(["a", "a", "b", None, None, "a"], dtype=object)
    level = np.array([1, 1, 1, 2, 2, 2])
    src = write(tmp_path / "s.gpkg", squares, "Polygon", {"kind": kind, "level": level})
    summary, warnings = dissolve(src, str(tmp_path / "d.gpkg"), by=["kind", "level"])
    _, fields, got = load(tmp_path / "d.gpkg")
    assert [(k, int(v)) for k, v in zip(fields["kind"], fields["level"], strict=True)] == [
        ("a", 1),
        ("a", 2),
        ("b", 1),
        (None, 2),
    ]
    assert summary.geometry_type == "Polygon" and warnings == []  # every group is one piece
    assert [
        g.equals(e) for g, e in zip(got, [shapely.box(0, 0, 2, 1), squares[5], squares[2], shapely.box(3, 0, 5, 1)], strict=True)
    ] == [True] * 4
    with pytest.raises(GdalMcpError) as e:
        dissolve(src, str(tmp_path / "x.gpkg"), by="nope")
    assert e.value.code == "not-found"


# ---------------------------------------------------------------------------------------------- helpers


def test_layer_types_and_dimension_filter() -> None:
    assert layer_type("MultiPolygon Z") == GeomType(2, True, True) and layer_type("Unknown").name == "Unknown"
    assert layer_type("Measured 3D LineString").name == "LineString Z"
    cut = shapely.box(0, 0, 2, 2).intersection(shapely.MultiPolygon([shapely.box(1, 1, 3, 3), shapely.box(2, 0, 3, 1)]))
    mixed = np.array([cut, shapely.LineString([(0, 0), (1, 1)]), None, shapely.Polygon()], dtype=object)
    kept, lost = keep_dimension(mixed, 2)
    assert kept[0].equals(shapely.box(1, 1, 2, 2)) and kept[1] is None and kept[2] is None and kept[3] is None
    assert lost == 2
    multi = to_multi(np.array([shapely.Point(0, 0), shapely.box(0, 0, 1, 1), None], dtype=object))
    assert [g.geom_type if g is not None else None for g in multi] == ["MultiPoint", "MultiPolygon", None]


def test_web_mercator_distances_are_map_distances(tmp_path) -> None:
    # At 60°N Web Mercator is stretched twice: 1000 m on the map is 500 m on the ground, and the warning says so.
    merc = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    x, y = merc.transform(10.0, 60.0)
    src = write(tmp_path / "m.gpkg", shapely.points([x], [y]), "Point", crs="EPSG:3857")
    _, warnings = buffer(src, str(tmp_path / "b.gpkg"), distance=1000, units="m")
    assert len(warnings) == 1 and "EPSG:3857 is not true to scale near the data (scale factor 2" in warnings[0]
    assert "about 500 m on the ground" in warnings[0]
    _, warnings = buffer(POINTS, str(tmp_path / "p.gpkg"), distance=10, units="m")
    assert warnings == []  # the custom Albers is true to scale within 1 %


def test_z_survives_the_local_projection_and_m_is_dropped(tmp_path) -> None:
    line = shapely.from_wkt("LINESTRING ZM (-9.2 38.7 10 1, -9.19 38.7001 20 2, -9.18 38.7 30 3, -9.1 38.75 40 4)")
    path = tmp_path / "zm.gpkg"
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(np.array([line]), output_dimension=4, flavor="iso"),
        [np.array([1])],
        fields=["i"],
        geometry_type="Measured 3D LineString",
        crs="EPSG:4326",
        driver="GPKG",
    )
    simplify(str(path), str(tmp_path / "s.gpkg"), tolerance=50, units="m")
    (got,) = load(tmp_path / "s.gpkg")[2]
    assert shapely.get_coordinates(got, include_z=True).tolist() == [[-9.2, 38.7, 10.0], [-9.18, 38.7, 30.0], [-9.1, 38.75, 40.0]]
