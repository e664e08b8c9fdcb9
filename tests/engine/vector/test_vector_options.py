"""Issue 10 extensions of the one-layer engines: SQLite-dialect SQL, open options and append/add_layer in convert;
cap/join styles, dissolve and per-feature distances in buffer; coverage simplification; dissolve aggregates.
References: pyproj.Geod, geopandas, shapely."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyogrio
import pytest
import shapely
from pyproj import Geod

from gdal_mcp.engine.vector.convert import convert
from gdal_mcp.engine.vector.geometry import buffer, dissolve, simplify
from gdal_mcp.errors import GdalMcpError

DATA = Path(__file__).parents[2] / "data" / "vector"
NE = str(DATA / "naturalearth_lowres.shp")


def read(path: Path | str, **kw: object) -> gpd.GeoDataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpd.read_file(path, **kw)


# ----- vector_convert: SQLite dialect -----------------------------------------------------------------------
def test_sqlite_dialect_geodesic_areas_equal_pyproj_geod(tmp_path: Path) -> None:
    out = tmp_path / "areas.gpkg"
    convert(NE, str(out), sql="SELECT name, ST_Area(geometry, 1) AS area_m2 FROM naturalearth_lowres", sql_dialect="SQLITE")
    got = read(out)
    ref = read(NE)
    geod = Geod(ellps="WGS84")
    expected = {n: abs(geod.geometry_area_perimeter(g)[0]) for n, g in zip(ref["name"], ref.geometry, strict=True)}
    assert len(got) == len(ref) == 177
    for name, area in zip(got["name"], got["area_m2"], strict=True):
        assert area == pytest.approx(expected[name], rel=1e-6), name


def test_sqlite_dialect_group_by_equals_geopandas(tmp_path: Path) -> None:
    out = tmp_path / "by_continent.gpkg"
    convert(
        NE,
        str(out),
        sql="SELECT continent, count(*) AS n, CAST(sum(pop_est) AS REAL) AS pop, "
        "ST_Union(geometry) AS geometry FROM naturalearth_lowres GROUP BY continent",
        sql_dialect="SQLITE",
    )
    got = read(out).set_index("continent").sort_index()
    ref = read(NE).dissolve("continent", aggfunc={"name": "count", "pop_est": "sum"}).sort_index()
    assert list(got.index) == list(ref.index)
    assert got["n"].tolist() == ref["name"].tolist()
    np.testing.assert_allclose(got["pop"], ref["pop_est"], rtol=0)
    np.testing.assert_allclose(shapely.area(got.geometry.values), shapely.area(ref.geometry.values), rtol=1e-6)


def test_sql_result_value_that_does_not_fit_its_column_is_refused(tmp_path: Path) -> None:
    # GDAL types the column from the first row (Africa: fits 32 bits); Asia's 4.39e9 would be clipped silently.
    with pytest.raises(GdalMcpError) as e:
        convert(
            NE,
            str(tmp_path / "x.gpkg"),
            sql="SELECT continent, sum(pop_est) AS pop FROM naturalearth_lowres GROUP BY continent",
            sql_dialect="SQLITE",
        )
    assert e.value.code == "invalid-argument" and "CAST" in e.value.message


@pytest.mark.parametrize(
    "sql",
    [
        'SELECT * FROM "/tmp/other.shp"."other"',
        "SELECT * FROM naturalearth_lowres a JOIN 'x.shp'.x b ON a.name = b.name",
        "SELECT ogr_datasource_load_layers('/tmp/a.shp')",
        "SELECT load_extension('mod_spatialite')",
        "ATTACH DATABASE 'x.db' AS x",
    ],
)
def test_engine_rechecks_sql_that_reaches_other_sources(tmp_path: Path, sql: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        convert(NE, str(tmp_path / "x.gpkg"), sql=sql, sql_dialect="SQLITE")
    assert e.value.code == "invalid-argument"


def test_open_options_reach_the_driver(tmp_path: Path) -> None:
    csv = tmp_path / "cities.csv"
    csv.write_text("name,lon,lat\nA,10.5,20.25\nB,-3,40\n")
    out = tmp_path / "cities.gpkg"
    summary, _ = convert(
        str(csv), str(out), open_options={"X_POSSIBLE_NAMES": "lon", "Y_POSSIBLE_NAMES": "lat"}, src_crs="EPSG:4326"
    )
    got = read(out)
    assert summary.geometry_type == "Point"
    assert shapely.get_coordinates(got.geometry.values).tolist() == [[10.5, 20.25], [-3.0, 40.0]]


# ----- vector_convert: append / add_layer ------------------------------------------------------------------
def _gpkg(tmp_path: Path) -> Path:
    ne = read(NE)
    path = tmp_path / "base.gpkg"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ne.iloc[:5].to_file(path, layer="countries")
        ne.iloc[:2][["name", "geometry"]].to_file(path, layer="other")
    return path


def test_append_adds_exactly_n_features_and_keeps_other_layers(tmp_path: Path) -> None:
    base = _gpkg(tmp_path)
    (tmp_path / "work").mkdir()
    dst = tmp_path / "work" / "base.gpkg"
    europe = read(NE, where="continent = 'Europe'")
    summary, notes = convert(
        NE, str(dst), where="continent = 'Europe'", mode="append", append_to=str(base), output_layer="countries"
    )
    assert summary.feature_count == 5 + len(europe)
    got = read(dst, layer="countries")
    assert got["name"].tolist() == read(base, layer="countries")["name"].tolist() + europe["name"].tolist()
    assert read(dst, layer="other")["name"].tolist() == read(base, layer="other")["name"].tolist()
    assert [n for n, _ in pyogrio.list_layers(dst)] == ["countries", "other"]
    assert any(f"appended {len(europe)} feature(s)" in n for n in notes)


def test_append_reprojects_to_the_layer_crs_and_reports_dropped_fields(tmp_path: Path) -> None:
    base = _gpkg(tmp_path)
    merc = tmp_path / "merc.gpkg"
    convert(NE, str(merc), where="name = 'France'", dst_crs="EPSG:3857")
    (tmp_path / "work").mkdir()
    dst = tmp_path / "work" / "base.gpkg"
    _, notes = convert(str(merc), str(dst), mode="append", append_to=str(base), output_layer="other")
    got = read(dst, layer="other")
    france = read(NE, where="name = 'France'").geometry.iloc[0]
    assert got["name"].iloc[-1] == "France"
    assert got.geometry.iloc[-1].area == pytest.approx(france.area, rel=1e-9)
    assert any("pop_est" in n and "not appended" in n for n in notes)


def test_add_layer_adds_a_layer_and_refuses_an_existing_name(tmp_path: Path) -> None:
    base = _gpkg(tmp_path)
    (tmp_path / "work").mkdir()
    dst = tmp_path / "work" / "base.gpkg"
    convert(str(DATA / "points.shp"), str(dst), mode="add_layer", append_to=str(base), output_layer="pts")
    assert [n for n, _ in pyogrio.list_layers(dst)] == ["countries", "other", "pts"]
    assert len(read(dst, layer="pts")) == len(read(DATA / "points.shp"))
    dst.unlink()
    with pytest.raises(GdalMcpError) as e:
        convert(str(DATA / "points.shp"), str(dst), mode="add_layer", append_to=str(base), output_layer="other")
    assert e.value.code == "already-exists"


# ----- vector_buffer ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("cap", "join"), [("flat", "mitre"), ("square", "bevel"), ("round", "round")])
def test_buffer_styles_equal_shapely(tmp_path: Path, cap: str, join: str) -> None:
    out = tmp_path / "b.gpkg"
    buffer(str(DATA / "lines.shp"), str(out), distance=30, units="layer", cap_style=cap, join_style=join)
    ref = shapely.buffer(read(DATA / "lines.shp").geometry.values, 30, quad_segs=8, cap_style=cap, join_style=join)
    got = read(out)
    np.testing.assert_allclose(got.area, shapely.area(ref), rtol=1e-9)


def test_buffer_distance_field_and_dissolve_equal_geopandas(tmp_path: Path) -> None:
    pts = read(DATA / "points.shp")
    out = tmp_path / "b.gpkg"
    buffer(str(DATA / "points.shp"), str(out), distance=0, distance_field="id", units="layer")
    np.testing.assert_allclose(read(out).area, pts.buffer(pts["id"].astype(float), quad_segs=8).area, rtol=1e-9)
    out2 = tmp_path / "u.gpkg"
    summary, notes = buffer(str(DATA / "points.shp"), str(out2), distance=0, distance_field="id", units="layer", dissolve=True)
    ref = pts.buffer(pts["id"].astype(float), quad_segs=8).union_all()
    got = read(out2)
    assert summary.feature_count == 1 and got.columns.tolist() == ["geometry"]
    assert got.geometry.iloc[0].symmetric_difference(ref).area < 1e-9 * ref.area


def test_buffer_dissolve_of_overlapping_buffers_is_their_union(tmp_path: Path) -> None:
    out = tmp_path / "u.gpkg"
    buffer(str(DATA / "lines.shp"), str(out), distance=200, units="layer", dissolve=True)
    ref = read(DATA / "lines.shp").buffer(200, quad_segs=8).union_all()
    got = read(out).geometry.iloc[0]
    assert got.area == pytest.approx(ref.area, rel=1e-9)


# ----- vector_simplify coverage ---------------------------------------------------------------------------------
def _shared_edges_match(geoms: np.ndarray, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Neighbour pairs that no longer share an edge, or overlap (a sliver)."""
    bad = []
    for i, j in pairs:
        shared = shapely.intersection(shapely.boundary(geoms[i]), shapely.boundary(geoms[j])).length
        if shared == 0 or geoms[i].intersection(geoms[j]).area > 1e-9:
            bad.append((i, j))
    return bad


def _holes(geoms: np.ndarray) -> int:
    """Interior rings of the union: a gap opened between neighbours is a hole in it."""
    return sum(len(p.interiors) for p in shapely.get_parts(shapely.union_all(geoms)))


def test_coverage_simplify_keeps_neighbours_edge_to_edge(tmp_path: Path) -> None:
    ne = read(NE)
    geoms = ne.geometry.values
    tree = shapely.STRtree(geoms)
    pairs = [
        (int(i), int(j))
        for i, j in tree.query(geoms, predicate="touches").T
        if i < j and shapely.intersection(shapely.boundary(geoms[i]), shapely.boundary(geoms[j])).length > 0
    ]
    assert len(pairs) > 200
    out = tmp_path / "cov.gpkg"
    simplify(NE, str(out), tolerance=50_000, coverage=True)
    got = read(out)
    assert got["name"].tolist() == ne["name"].tolist()
    g = got.geometry.values
    assert shapely.get_num_coordinates(g).sum() < 0.7 * shapely.get_num_coordinates(geoms).sum()
    assert shapely.is_valid(g).all() and shapely.coverage_is_valid(g)
    assert shapely.union_all(g).area == pytest.approx(g.area.sum(), rel=1e-9)
    assert _shared_edges_match(g, pairs) == []
    assert _holes(g) == _holes(geoms)  # no hole the input does not have
    # The reference point: plain simplification opens gaps and slivers between the same neighbours.
    plain = read(tmp_path / "plain.gpkg") if simplify(NE, str(tmp_path / "plain.gpkg"), tolerance=50_000) else None
    assert plain is not None
    assert len(_shared_edges_match(plain.geometry.values, pairs)) > 20
    assert _holes(plain.geometry.values) > _holes(geoms) + 50


def test_coverage_simplify_in_a_projected_layer_equals_shapely(tmp_path: Path) -> None:
    out = tmp_path / "cov.gpkg"
    simplify(str(DATA / "polygons.shp"), str(out), tolerance=20, units="layer", coverage=True)
    src = read(DATA / "polygons.shp")
    ref = shapely.coverage_simplify(src.geometry.values, 20)
    got = read(out).geometry.values
    assert all(a.equals_exact(b, 1e-9) for a, b in zip(shapely.get_parts(got), shapely.get_parts(ref), strict=True))


# ----- vector_dissolve aggregate ------------------------------------------------------------------------------------
def test_dissolve_aggregate_equals_geopandas(tmp_path: Path) -> None:
    out = tmp_path / "d.gpkg"
    summary, _ = dissolve(
        NE,
        str(out),
        by="continent",
        aggregate={"*": ["count"], "pop_est": ["sum", "mean", "max"], "gdp_md_est": ["median", "std"]},
    )
    assert summary.fields == [
        "continent",
        "count",
        "pop_est_sum",
        "pop_est_mean",
        "pop_est_max",
        "gdp_md_est_median",
        "gdp_md_est_std",
    ]
    got = read(out).set_index("continent").sort_index()
    ne = read(NE)
    ref = ne.dissolve(
        "continent", aggfunc={"name": "count", "pop_est": ["sum", "mean", "max"], "gdp_md_est": ["median", "std"]}
    ).sort_index()
    assert got["count"].tolist() == ref[("name", "count")].tolist()
    assert got["pop_est_sum"].tolist() == ref[("pop_est", "sum")].tolist()  # 64-bit: Asia's 4.39e9 intact
    np.testing.assert_allclose(got["pop_est_mean"], ref[("pop_est", "mean")], rtol=1e-12)
    assert got["pop_est_max"].tolist() == ref[("pop_est", "max")].tolist()
    np.testing.assert_allclose(got["gdp_md_est_median"], ref[("gdp_md_est", "median")], rtol=1e-12)
    np.testing.assert_allclose(got["gdp_md_est_std"].fillna(-1), ref[("gdp_md_est", "std")].fillna(-1), rtol=1e-9)
    np.testing.assert_allclose(shapely.area(got.geometry.values), shapely.area(ref.geometry.values), rtol=1e-9)


def test_dissolve_aggregate_rejects_an_unknown_field(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        dissolve(NE, str(tmp_path / "d.gpkg"), by="continent", aggregate={"population": ["sum"]})
    assert e.value.code == "not-found"


def test_failed_append_engine_leaves_the_source_untouched(tmp_path: Path) -> None:
    base = _gpkg(tmp_path)
    before = base.read_bytes()
    (tmp_path / "work").mkdir()
    with pytest.raises(GdalMcpError):
        convert(
            NE,
            str(tmp_path / "work" / "base.gpkg"),
            where="no_such_field = 1",
            mode="append",
            append_to=str(base),
            output_layer="countries",
        )
    assert base.read_bytes() == before
    shutil.rmtree(tmp_path / "work")
