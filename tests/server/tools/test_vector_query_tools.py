"""vector_query, vector_measure's where / geodesic, and what issue 25 made right by default, through the MCP client:
SQL naming a GeoPackage layer called 'nc.gpkg', messages without Python reprs, CSV round trips that keep numbers,
text-vs-number filters, output layers named after the output file. References: geopandas, pyogrio, pyproj.Geod."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import geopandas as gpd
import pyogrio
import pytest
import shapely
from fastmcp import Client
from pyproj import Geod

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import Sandbox
from tests.helpers import call


def read(path: Path, **kw: object) -> gpd.GeoDataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpd.read_file(path, **kw)


NE = "vector/naturalearth_lowres.shp"


@pytest.fixture(scope="module")
def nc(ws: Path) -> Path:
    """A GeoPackage whose one layer is called 'nc.gpkg' (as the issue's file was)."""
    path = ws / "q" / "nc_counties.gpkg"
    path.parent.mkdir(exist_ok=True)
    if not path.exists():
        read(ws / NE).to_file(path, layer="nc.gpkg")
    return path


async def test_features_per_continent_match_geopandas_and_page(client: Client, ws: Path) -> None:
    expected = read(ws / NE).groupby("continent").size()
    err, res = await call(client, "vector_query", input=NE, group_by="continent")
    assert not err, res
    assert {r["continent"]: r["count"] for r in res["rows"]} == expected.to_dict()
    assert (res["total"], res["truncated"], res["remaining"], res["columns"]) == (
        8,
        False,
        0,
        {"continent": "text", "count": "integer"},
    )
    pages = []
    for offset in (0, 3, 6):
        err, page = await call(client, "vector_query", input=NE, group_by="continent", limit=3, offset=offset)
        assert not err and page["total"] == 8 and page["offset"] == offset
        pages.append(page)
    assert [r for p in pages for r in p["rows"]] == res["rows"]
    assert [p["remaining"] for p in pages] == [5, 2, 0] and [p["truncated"] for p in pages] == [True, True, False]
    err, sql = await call(
        client,
        "vector_query",
        input=NE,
        sql="SELECT continent, COUNT(*) AS n FROM naturalearth_lowres GROUP BY continent",
        sql_dialect="SQLITE",
    )
    assert not err and {r["continent"]: r["n"] for r in sql["rows"]} == expected.to_dict()


async def test_query_refuses_what_sql_refuses(client: Client, ws: Path) -> None:
    outside = ws.parent / "outside_query"
    outside.mkdir(exist_ok=True)
    for f in (ws / "vector").glob("points.*"):
        shutil.copy(f, outside / f.name)
    for sql, code in (
        ("ATTACH DATABASE 'x.db' AS x", "invalid-argument"),
        (f'SELECT * FROM "{outside / "points.shp"}"."points"', "out-of-root"),
        ('SELECT * FROM "vector/points.shp"."points"', "invalid-argument"),
        ("SELECT * FROM 'vector/points.shp'", "invalid-argument"),
        ("SELECT load_extension('mod_spatialite')", "invalid-argument"),
    ):
        err, res = await call(client, "vector_query", input=NE, sql=sql, sql_dialect="SQLITE")
        assert err and res["error"]["code"] == code, (sql, res)


async def test_gpkg_layer_named_like_a_file_works_in_sql(client: Client, ws: Path, nc: Path) -> None:
    rel = str(nc.relative_to(ws))
    err, res = await call(client, "vector_query", input=rel, sql="SELECT name FROM \"nc.gpkg\" WHERE continent = 'Oceania'")
    assert not err, res
    expected = read(nc, where="continent = 'Oceania'")["name"].tolist()
    assert [r["name"] for r in res["rows"]] == expected
    err, res = await call(
        client, "vector_convert", input=rel, output="q/oceania.gpkg", sql="SELECT * FROM \"nc.gpkg\" WHERE continent = 'Oceania'"
    )
    assert not err, res
    assert read(ws / "q" / "oceania.gpkg")["name"].tolist() == expected
    # the output layer is named after the output file, not the source's 'nc.gpkg' nor the SQL result
    assert [str(n) for n, _ in pyogrio.list_layers(ws / "q" / "oceania.gpkg")] == ["oceania"] == [res["summary"]["layer"]]
    err, res = await call(client, "vector_query", input=rel, sql='SELECT * FROM "nc.gpkg"."nc.gpkg"')
    assert err and res["error"]["code"] == "invalid-argument"  # a qualified name is another data source


async def test_output_layers_follow_the_output_file(client: Client, ws: Path, nc: Path) -> None:
    rel = str(nc.relative_to(ws))
    for tool, extra in (
        ("vector_convert", {}),
        ("vector_buffer", {"distance": 1000}),
        ("vector_dissolve", {"by": "continent"}),
        ("vector_geometry", {"operation": "centroid"}),
    ):
        out = f"q/named_{tool}.gpkg"
        err, res = await call(client, tool, input=rel, output=out, **extra)
        assert not err, (tool, res)
        assert [str(n) for n, _ in pyogrio.list_layers(ws / out)] == [f"named_{tool}"], tool


async def test_error_messages_hold_no_python_repr(client: Client) -> None:
    """pyogrio names the layer as bytes ('b'naturalearth_lowres'') in a refused filter: the message says it plainly."""
    for tool, args in (
        ("vector_features", {"input": NE, "where": "nosuch > 1"}),
        ("vector_query", {"input": NE, "where": "nosuch > 1"}),
        ("vector_convert", {"input": NE, "output": "q/bad.gpkg", "where": "nosuch > 1"}),
    ):
        err, res = await call(client, tool, **args)
        assert err, res
        message = res["error"]["message"]
        assert "b'" not in message and 'b"' not in message and " object at 0x" not in message, message
        assert "naturalearth_lowres" in message or "nosuch" in message, message


async def test_text_field_compared_with_a_number_is_named(client: Client) -> None:
    for tool, args in (
        ("vector_query", {"input": NE, "where": "continent > 5"}),
        ("vector_features", {"input": NE, "where": "name = 3"}),
        ("vector_convert", {"input": NE, "output": "q/t.gpkg", "where": "iso_a3 < 100"}),
    ):
        err, res = await call(client, tool, **args)
        assert err and res["error"]["code"] == "invalid-argument", res
        field = args["where"].split()[0]
        assert f"'{field}'" in res["error"]["message"] and "text" in res["error"]["message"]


async def test_csv_round_trip_keeps_numbers(client: Client, ws: Path) -> None:
    err, res = await call(client, "vector_convert", input=NE, output="q/ne.csv")
    assert not err, res
    ne, back = read(ws / NE), read(ws / "q" / "ne.csv")
    assert back["pop_est"].dtype.kind == "i" and back["gdp_md_est"].dtype.kind == "f", back.dtypes.to_dict()
    assert back["pop_est"].tolist() == ne["pop_est"].tolist()
    assert back["gdp_md_est"].tolist() == pytest.approx(ne["gdp_md_est"].tolist())
    # and read back by the server: numbers compare as numbers
    err, res = await call(client, "vector_query", input="q/ne.csv", where="pop_est > 100000000", order_by="pop_est DESC")
    assert not err, res
    assert [r["name"] for r in res["rows"]] == ne[ne.pop_est > 1e8].sort_values("pop_est", ascending=False)["name"].tolist()


async def test_measure_where_and_geodesic_on_a_projected_layer(client: Client, ws: Path) -> None:
    world = read(ws / NE)
    projected = ws / "q" / "world_3857.gpkg"
    if not projected.exists():
        world.to_crs("EPSG:3857").to_file(projected)
    where = "continent = 'Europe'"
    err, res = await call(
        client,
        "vector_measure",
        input="q/world_3857.gpkg",
        measures=["area", "perimeter"],
        where=where,
        geodesic=True,
        units="km",
        id_field="name",
    )
    assert not err, res
    europe = read(projected, where=where)
    assert res["method"] == "geodesic" and res["row_count"] == len(europe) == len(res["rows"])
    geod = Geod(ellps="WGS84")
    for row, geom in zip(res["rows"], europe.to_crs("EPSG:4326").geometry, strict=True):
        parts = list(getattr(geom, "geoms", [geom]))
        area = sum(abs(geod.geometry_area_perimeter(shapely.orient_polygons(p))[0]) for p in parts)
        perim = sum(geod.line_length(*r.xy) for p in parts for r in (p.exterior, *p.interiors))
        assert row["area_km2"] == pytest.approx(area / 1e6, rel=1e-9), row["name"]
        assert row["perimeter_km"] == pytest.approx(perim / 1e3, rel=1e-9), row["name"]


def test_sandbox_lets_sql_name_the_inputs_own_file_like_layers(tmp_path: Path) -> None:
    sb = Sandbox([tmp_path])
    layers = ["nc.gpkg", "roads.shp"]
    assert sb.sql_file_like_tables('SELECT * FROM "nc.gpkg" JOIN "roads.shp" ON 1 = 1') == ["nc.gpkg", "roads.shp"]
    sb.check_sql('SELECT * FROM "nc.gpkg" a JOIN "roads.shp" b ON a.id = b.id', layers=layers)
    for sql, known, code, words in (
        ('SELECT * FROM "nc.gpkg"', [], "invalid-argument", "another data source"),  # the layers not asked for
        ('SELECT * FROM "NC.GPKG"', layers, "invalid-argument", "spell it exactly"),
        ('SELECT * FROM "nc.gpkg"."nc.gpkg"', layers, "invalid-argument", "another data source"),
        ('SELECT * FROM "other.gpkg"', layers, "invalid-argument", "another data source"),
        ("SELECT * FROM '../../x.gpkg'", layers, "out-of-root", "outside the workspace"),
    ):
        with pytest.raises(GdalMcpError) as e:
            sb.check_sql(sql, layers=known)
        assert e.value.code == code and words in e.value.message, (sql, e.value.message)
