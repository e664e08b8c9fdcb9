"""vector_query's engine (engine/vector/query.py) against geopandas on the same layer: counts and statistics per group,
ordered pages, filtered pages, SQL in both dialects, geometry as WKT / GeoJSON, and its refusals."""

from __future__ import annotations

import warnings

import geopandas as gpd
import numpy as np
import pytest
import shapely

from gdal_mcp.engine.vector.query import query
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

NE = str(DATA / "vector" / "naturalearth_lowres.shp")


@pytest.fixture(scope="module")
def ne() -> gpd.GeoDataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpd.read_file(NE)


def test_features_per_continent_match_geopandas_groupby(ne: gpd.GeoDataFrame) -> None:
    r = query(NE, group_by=["continent"])
    expected = ne.groupby("continent").size()
    assert r.columns == {"continent": "text", "count": "integer"}
    assert {row["continent"]: row["count"] for row in r.rows} == expected.to_dict()
    assert [row["continent"] for row in r.rows] == sorted(expected.index)  # ordered by the group values
    assert (r.total, r.truncated, r.remaining) == (len(expected), False, 0)


def test_statistics_per_group_match_geopandas(ne: gpd.GeoDataFrame) -> None:
    r = query(NE, group_by="continent".split(), aggregate={"pop_est": ["sum", "mean", "max"], "gdp_md_est": ["median"]})
    g = ne.groupby("continent")
    for row in r.rows:
        c = row["continent"]
        assert row["pop_est_sum"] == int(g["pop_est"].sum()[c])
        assert row["pop_est_mean"] == pytest.approx(float(g["pop_est"].mean()[c]), rel=1e-12)
        assert row["pop_est_max"] == int(g["pop_est"].max()[c])
        assert row["gdp_md_est_median"] == pytest.approx(float(g["gdp_md_est"].median()[c]), rel=1e-12)


def test_group_pages_ordered_by_an_aggregate(ne: gpd.GeoDataFrame) -> None:
    expected = ne.groupby("continent").size().sort_values(ascending=False, kind="stable")
    pages = [query(NE, group_by=["continent"], order_by=["count DESC"], limit=3, offset=o) for o in (0, 3, 6)]
    got = [(row["continent"], row["count"]) for p in pages for row in p.rows]
    assert [c for _, c in got] == expected.tolist()
    assert (pages[0].truncated, pages[0].remaining, pages[-1].truncated, pages[-1].remaining) == (True, 5, False, 0)


def test_whole_layer_aggregate_without_group_by(ne: gpd.GeoDataFrame) -> None:
    r = query(NE, aggregate={"*": ["count"], "pop_est": ["sum"]}, where="continent = 'Africa'")
    africa = ne[ne.continent == "Africa"]
    assert r.rows == [{"count": len(africa), "pop_est_sum": int(africa.pop_est.sum())}]
    empty = query(NE, aggregate={"*": ["count"], "pop_est": ["sum"]}, where="continent = 'Atlantis'")
    assert empty.rows == [{"count": 0, "pop_est_sum": None}]  # as SQL: COUNT 0, SUM NULL


def test_order_by_pages_match_geopandas_sort(ne: gpd.GeoDataFrame) -> None:
    expected = ne.sort_values("pop_est", ascending=False, kind="stable")[["name", "pop_est"]]
    r = query(NE, order_by=["pop_est DESC"], fields=["name", "pop_est"], limit=5, offset=3)
    assert list(r.columns) == ["name", "pop_est"]
    assert [(x["name"], x["pop_est"]) for x in r.rows] == list(expected.iloc[3:8].itertuples(index=False, name=None))
    assert (r.total, r.remaining) == (len(ne), len(ne) - 8)


def test_filtered_pages_cover_every_matching_row_once(ne: gpd.GeoDataFrame) -> None:
    expected = ne[ne.pop_est > 20_000_000]["name"].tolist()
    names, offset = [], 0
    while True:
        r = query(NE, where="pop_est > 20000000", fields=["name"], limit=7, offset=offset)
        assert r.total == len(expected)
        names += [x["name"] for x in r.rows]
        if not r.truncated:
            break
        offset += 7
    assert names == expected
    past = query(NE, where="pop_est > 20000000", limit=7, offset=500)
    assert (past.rows, past.total, past.truncated) == ([], len(expected), False)


def test_sqlite_sql_counts_per_continent_match_geopandas(ne: gpd.GeoDataFrame) -> None:
    sql = "SELECT continent, COUNT(*) AS n FROM naturalearth_lowres GROUP BY continent ORDER BY continent"
    r = query(NE, sql=sql, sql_dialect="SQLITE", limit=5)
    rest = query(NE, sql=sql, sql_dialect="SQLITE", limit=5, offset=5)
    assert {x["continent"]: x["n"] for x in r.rows + rest.rows} == ne.groupby("continent").size().to_dict()
    assert (r.total, r.truncated, r.remaining, rest.truncated) == (8, True, 3, False)
    assert r.layer is None


def test_ogr_sql_rows_and_aggregates_match_geopandas(ne: gpd.GeoDataFrame) -> None:
    r = query(NE, sql="SELECT name, pop_est FROM naturalearth_lowres WHERE continent = 'Europe' ORDER BY pop_est DESC")
    europe = ne[ne.continent == "Europe"].sort_values("pop_est", ascending=False, kind="stable")
    assert [(x["name"], x["pop_est"]) for x in r.rows] == list(europe[["name", "pop_est"]].itertuples(index=False, name=None))
    assert r.total == len(europe)
    one = query(NE, sql="SELECT COUNT(*) AS n, SUM(pop_est) AS s FROM naturalearth_lowres WHERE continent = 'Asia'")
    asia = ne[ne.continent == "Asia"]
    assert [(x["n"], x["s"]) for x in one.rows] == [(len(asia), int(asia.pop_est.sum()))]


@pytest.mark.parametrize("form", ["wkt", "geojson"])
def test_geometry_as_wkt_or_geojson_is_the_layers(ne: gpd.GeoDataFrame, form: str) -> None:
    r = query(NE, where="continent = 'Oceania'", fields=["name"], geometry=form)
    expected = ne[ne.continent == "Oceania"]
    assert r.crs == "EPSG:4326" and len(r.rows) == len(expected)
    for row, geom in zip(r.rows, expected.geometry, strict=True):
        got = shapely.from_wkt(row["geometry"]) if form == "wkt" else shapely.geometry.shape(row["geometry"])
        assert got.equals_exact(geom, 1e-9)
    assert "geometry" not in query(NE, limit=1).rows[0]  # off by default


def test_page_geometry_is_bounded(ne: gpd.GeoDataFrame) -> None:
    r = query(NE, fields=["name"], geometry="wkt", limit=177)
    sizes = [len(x["geometry"]) for x in r.rows if x.get("geometry")]
    assert sum(sizes) <= 200_000
    omitted = [x for x in r.rows if "geometry_omitted" in x]
    total = int(np.sum([len(shapely.to_wkt(g)) for g in ne.geometry]))
    assert (len(omitted) > 0) == (total > 200_000)
    assert not omitted or any("left out" in w for w in r.warnings)


@pytest.mark.parametrize(
    ("kwargs", "code", "words"),
    [
        ({"sql": "SELECT * FROM naturalearth_lowres", "where": "pop_est > 1"}, "invalid-argument", "inside it"),
        ({"group_by": ["continent"], "geometry": "wkt"}, "invalid-argument", "vector_dissolve"),
        ({"group_by": ["continent"], "fields": ["name"]}, "invalid-argument", "leave fields out"),
        ({"order_by": ["nope DESC"]}, "not-found", "nope"),
        ({"group_by": ["nope"]}, "not-found", "nope"),
        ({"aggregate": {"name": ["sum"]}}, "invalid-argument", "numeric"),
        ({"limit": 0}, "invalid-argument", "limit"),
        ({"order_by": ["name"], "offset": 200_000}, "invalid-argument", "where"),
        ({"sql_dialect": "SQLITE"}, "invalid-argument", "give sql"),
    ],
)
def test_refusals_say_what_to_do(kwargs: dict, code: str, words: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        query(NE, **kwargs)
    assert e.value.code == code and words in e.value.message, e.value.message
