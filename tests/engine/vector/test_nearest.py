"""vector_join predicate="nearest" (engine/vector/nearest.py): on lon/lat layers the k nearest features and their
geodesic distances between nearest points, against references built on pyproj alone (an azimuthal equidistant
projection per point; Geod.inv between densified boundaries); on projected layers against shapely brute force."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import shapely
from pyproj import Geod

from gdal_mcp.engine.vector.join import join
from tests.geodesic_reference import AeqdReference

gpd = pytest.importorskip("geopandas")
COUNTRIES = Path(__file__).parents[2] / "data" / "vector" / "naturalearth_lowres.shp"
GEOD = Geod(ellps="WGS84")


def _nearest(tmp_path: Path, inp: object, other: object, name: str = "near", **kw: object) -> tuple[object, object]:
    inp.to_file(tmp_path / f"{name}_in.gpkg")  # type: ignore[attr-defined]
    other.to_file(tmp_path / f"{name}_join.gpkg")  # type: ignore[attr-defined]
    res, _ = join(
        str(tmp_path / f"{name}_in.gpkg"),
        str(tmp_path / f"{name}.gpkg"),
        join=str(tmp_path / f"{name}_join.gpkg"),
        predicate="nearest",
        **kw,  # type: ignore[arg-type]
    )
    return res, gpd.read_file(tmp_path / f"{name}.gpkg")


def test_k_nearest_countries_are_geodesic_to_the_nearest_point(tmp_path: Path) -> None:
    """Points against country polygons, k=3: the ranks equal a brute-force geodesic ranking and the distances the
    distance to the nearest point of each country (a pyproj azimuthal equidistant reference), within 1e-4 - where
    lon/lat shortest lines are up to twice too long (Scandinavia, the Arctic, both sides of 180°)."""
    ne = gpd.read_file(COUNTRIES)
    rng = np.random.default_rng(25)
    lon = np.r_[rng.uniform(-180, 180, 16), 25.0, -95.0, 179.6, -179.7, 170.0, 12.0]
    lat = np.r_[rng.uniform(-60, 80, 16), 71.0, 76.0, -17.5, 66.0, -45.0, 56.0]
    pts = gpd.GeoDataFrame({"pid": np.arange(len(lon))}, geometry=gpd.points_from_xy(lon, lat), crs=4326)
    res, out = _nearest(tmp_path, pts, ne[["name", "geometry"]], k=3, units="km")
    assert res.nearest.method == "geodesic" and res.nearest.units == "km" and res.nearest.rank_field == "rank"
    reference = AeqdReference(ne.geometry)
    for pid in range(len(pts)):  # atol: 1 m, the reference's own error (its chords' sagitta)
        ref = reference(lon[pid], lat[pid]) / 1000
        rows = out[out.pid == pid].sort_values("rank")
        order = np.argsort(ref, kind="stable")[:3]
        assert rows["rank"].tolist() == [1, 2, 3]
        assert rows["name"].tolist() == ne["name"].to_numpy()[order].tolist(), pid
        np.testing.assert_allclose(rows["distance"].to_numpy(), ref[order], rtol=1e-4, atol=1e-3)
    # the lon/lat shortest line would be far off here: the test can tell
    naive = []
    for pid in range(len(pts)):
        row = out[(out.pid == pid) & (out["rank"] == 1)].iloc[0]
        g = ne.geometry[ne.name == row["name"]].iloc[0]
        line = shapely.shortest_line(pts.geometry[pid], g)
        (x0, y0), (x1, y1) = line.coords
        naive.append(GEOD.inv(x0, y0, x1, y1)[2] / 1000 / max(row["distance"], 1e-9) if row["distance"] > 0 else 1.0)
    assert max(naive) > 1.02


def test_nearest_point_to_each_polygon_and_max_distance_in_km(tmp_path: Path) -> None:
    """Polygons (high-latitude countries) as the input, points as the join layer: the nearest city to each
    country, and max_distance in km keeps only those within reach."""
    ne = gpd.read_file(COUNTRIES)
    north = ne[ne.geometry.bounds.maxy > 55][["name", "geometry"]].reset_index(drop=True)
    rng = np.random.default_rng(4)
    lon, lat = rng.uniform(-180, 180, 150), rng.uniform(45, 85, 150)
    at_sea = ~shapely.intersects(shapely.points(lon, lat)[:, None], ne.geometry.to_numpy()[None, :]).any(axis=1)
    lon, lat = lon[at_sea][:50], lat[at_sea][:50]  # no ties at 0 km
    cities = gpd.GeoDataFrame({"cid": np.arange(len(lon))}, geometry=gpd.points_from_xy(lon, lat), crs=4326)
    res, out = _nearest(tmp_path, north, cities, units="km")
    reference = AeqdReference(north.geometry)
    d = np.array([reference(x, y) for x, y in zip(lon, lat, strict=True)]) / 1000  # cities x countries
    out = out.set_index("name").loc[north["name"]]
    assert res.nearest.rank_field is None and len(out) == len(north)
    assert out["cid"].tolist() == d.argmin(axis=0).tolist()
    np.testing.assert_allclose(out["distance"].to_numpy(), d.min(axis=0), rtol=1e-4, atol=1e-3)
    _, near = _nearest(tmp_path, north, cities, name="within", units="km", max_distance=150.0, how="inner")
    expected = north["name"][d.min(axis=0) <= 150.0]
    assert sorted(near["name"]) == sorted(expected) and 0 < len(near) < len(north)


def _closest_boundary_points(a: shapely.Geometry, b: shapely.Geometry) -> float:
    """Metres between two polygons' boundaries by brute force on Geod.inv: all pairs of points 0.05° apart, then
    twice again around the best pair, 50 and 2500 times finer."""

    def pts(g: shapely.Geometry, step: float, near: tuple[float, float] | None, span: float) -> np.ndarray:
        line = g.boundary
        if near is not None:
            line = line.intersection(shapely.box(near[0] - span, near[1] - span, near[0] + span, near[1] + span))
        return shapely.get_coordinates(shapely.segmentize(line, step))

    pa, pb = pts(a, 0.05, None, 0), pts(b, 0.05, None, 0)
    best = math.inf
    for step, span in ((0.001, 0.12), (0.00002, 0.003)):
        ia, ib = np.meshgrid(np.arange(len(pa)), np.arange(len(pb)), indexing="ij")
        d = GEOD.inv(pa[ia.ravel(), 0], pa[ia.ravel(), 1], pb[ib.ravel(), 0], pb[ib.ravel(), 1])[2]
        m = int(np.argmin(d))
        best = min(best, float(d[m]))
        ca, cb = pa[ia.ravel()[m]], pb[ib.ravel()[m]]
        pa, pb = pts(a, step, tuple(ca), span), pts(b, step, tuple(cb), span)
    ia, ib = np.meshgrid(np.arange(len(pa)), np.arange(len(pb)), indexing="ij")
    return min(best, float(GEOD.inv(pa[ia.ravel(), 0], pa[ia.ravel(), 1], pb[ib.ravel(), 0], pb[ib.ravel(), 1])[2].min()))


def test_nearest_between_polygons(tmp_path: Path) -> None:
    """Polygon to polygon at high latitude: the distance between the boundaries' nearest points (Geod brute force)."""
    rng = np.random.default_rng(8)

    def blob(x: float, y: float) -> shapely.Polygon:
        angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
        r = rng.uniform(0.6, 1.5, 7)
        return shapely.Polygon(np.c_[x + 2.5 * r * np.cos(angles), y + r * np.sin(angles)])

    a = gpd.GeoDataFrame({"a": [0, 1, 2]}, geometry=[blob(0, 70), blob(12, 64), blob(-20, 76)], crs=4326)
    b = gpd.GeoDataFrame({"b": [0, 1, 2, 3]}, geometry=[blob(9, 71), blob(-8, 66), blob(25, 62), blob(-30, 70)], crs=4326)
    _, out = _nearest(tmp_path, a, b, k=2)
    for i, ga in enumerate(a.geometry):
        ref = np.array([_closest_boundary_points(ga, gb) for gb in b.geometry])
        rows = out[out.a == i].sort_values("rank")
        order = np.argsort(ref)[:2]
        assert rows["b"].tolist() == order.tolist()
        np.testing.assert_allclose(rows["distance"].to_numpy(), ref[order], rtol=1e-5)


def test_k_nearest_on_a_projected_layer_and_ties(tmp_path: Path) -> None:
    """Planar k nearest (UTM, distances in km) against a shapely distance matrix; a duplicated join feature ties
    at rank 1 with its twin, and the next one is rank 3 (so k=2 leaves it out)."""
    rng = np.random.default_rng(2)
    pts = gpd.GeoDataFrame(
        {"pid": np.arange(150)}, geometry=gpd.points_from_xy(rng.uniform(0, 9e5, 150), rng.uniform(0, 9e5, 150)), crs=32633
    )
    lines = gpd.GeoDataFrame(
        {"lid": np.arange(40)},
        geometry=[shapely.LineString([rng.uniform(0, 9e5, 2), rng.uniform(0, 9e5, 2)]) for _ in range(40)],
        crs=32633,
    )
    res, out = _nearest(tmp_path, pts, lines, k=3, units="km", max_distance=120.0)
    assert res.nearest.method == "planar" and res.nearest.units == "km"
    d = shapely.distance(pts.geometry.to_numpy()[:, None], lines.geometry.to_numpy()[None, :]) / 1000
    for pid in range(150):
        rows = out[out.pid == pid]
        order = [j for j in np.argsort(d[pid])[:3] if d[pid, j] <= 120.0]
        if not order:
            assert len(rows) == 1 and np.isnan(rows["lid"].iloc[0])  # left join: kept, nothing joined
            continue
        rows = rows.sort_values("rank")
        assert rows["lid"].astype(int).tolist() == order
        np.testing.assert_allclose(rows["distance"].to_numpy(), d[pid, order], rtol=1e-12)
    twins = gpd.GeoDataFrame({"t": [0, 1, 2]}, geometry=gpd.points_from_xy([10.0, 10.0, 20.0], [0.0, 0.0, 0.0]), crs=32633)
    one = gpd.GeoDataFrame({"q": [0]}, geometry=gpd.points_from_xy([0.0], [0.0]), crs=32633)
    _, tied = _nearest(tmp_path, one, twins, name="tied", k=2)
    assert sorted(tied["t"]) == [0, 1] and tied["rank"].tolist() == [1, 1] and tied["distance"].tolist() == [10.0, 10.0]
    _, three = _nearest(tmp_path, one, twins, name="three", k=3)
    assert three.sort_values("t")["rank"].tolist() == [1, 1, 3]
