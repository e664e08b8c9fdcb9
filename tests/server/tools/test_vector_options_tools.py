"""vector_convert sql_dialect / open_options / mode, vector_buffer, vector_simplify and vector_dissolve options
through the MCP client; the sandbox's SQL check."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import geopandas as gpd
import pyogrio
import pytest
from fastmcp import Client
from pyproj import Geod

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import Sandbox
from tests.helpers import call


def read(path: Path, **kw: object) -> gpd.GeoDataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpd.read_file(path, **kw)


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ('SELECT * FROM "/etc/x.shp"."x"', "out-of-root"),
        ("SELECT * FROM '../../outside.shp'", "out-of-root"),
        ("SELECT * FROM t a JOIN '/tmp/b.gpkg'.b ON a.id = b.id", "out-of-root"),
        ("SELECT ogr_datasource_load_layers('/tmp/a.shp')", "out-of-root"),
        ('SELECT * FROM "vector/points.shp".points', "invalid-argument"),
        ("ATTACH DATABASE 'x.db' AS x", "invalid-argument"),
        ("SELECT load_extension('mod_x')", "invalid-argument"),
        ("SELECT ImportSHP('a', 'b', 'UTF-8')", "invalid-argument"),
        ("SELECT BlobFromFile('/etc/passwd')", "invalid-argument"),
        ("SELECT * FROM t WHERE x IN (SELECT y FROM VirtualShape)", "invalid-argument"),
        ("SELECT ogr_geocode('Paris')", "invalid-argument"),
    ],
)
def test_sandbox_refuses_sql_reaching_other_sources(tmp_path: Path, sql: str, code: str) -> None:
    sb = Sandbox([tmp_path])
    with pytest.raises(GdalMcpError) as e:
        sb.check_sql(sql)
    assert e.value.code == code, e.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name, ST_Area(geometry, 1) AS a FROM countries WHERE name = 'a/b.shp'",
        "SELECT c.name, s.n FROM countries c JOIN (SELECT continent, count(*) AS n FROM countries GROUP BY continent) s "
        "ON c.continent = s.continent",
        "SELECT MakePoint(x, y, 4326) AS geometry, replace(name, 'a', 'b') FROM main.cities -- FROM 'x.shp'.x",
    ],
)
def test_sandbox_allows_plain_reads(tmp_path: Path, sql: str) -> None:
    Sandbox([tmp_path]).check_sql(sql)


def test_sandbox_checks_open_option_paths(tmp_path: Path) -> None:
    sb = Sandbox([tmp_path])
    assert sb.check_open_options({"X_POSSIBLE_NAMES": "lon", "HEADERS": True}) == {"X_POSSIBLE_NAMES": "lon", "HEADERS": "YES"}
    for oo, code in (
        ({"GFS_TEMPLATE": "/etc/passwd"}, "out-of-root"),
        ({"PRELUDE_STATEMENTS": "ATTACH 'x'"}, "invalid-argument"),
    ):
        with pytest.raises(GdalMcpError) as e:
            sb.check_open_options(oo)
        assert e.value.code == code


async def test_convert_sqlite_dialect_through_the_client(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/sqlarea.gpkg",
        sql="SELECT name, ST_Area(geometry, 1) AS area FROM naturalearth_lowres WHERE name = 'France'",
        sql_dialect="SQLITE",
    )
    assert not err, res
    ne = read(ws / "vector" / "naturalearth_lowres.shp", where="name = 'France'")
    expected = abs(Geod(ellps="WGS84").geometry_area_perimeter(ne.geometry.iloc[0])[0])
    assert read(ws / "out" / "sqlarea.gpkg")["area"].iloc[0] == pytest.approx(expected, rel=1e-6)
    outside = ws.parent / "outside_data"
    outside.mkdir(exist_ok=True)
    for f in (ws / "vector").glob("points.*"):
        shutil.copy(f, outside / f.name)
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/leak.gpkg",
        sql=f'SELECT * FROM "{outside / "points.shp"}"."points"',
        sql_dialect="SQLITE",
    )
    assert err and res["error"]["code"] == "out-of-root", res
    assert not (ws / "out" / "leak.gpkg").exists()
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/leak.gpkg",
        sql="SELECT load_extension('mod_spatialite')",
        sql_dialect="SQLITE",
    )
    assert err and res["error"]["code"] == "invalid-argument"


async def test_append_and_add_layer_through_the_client(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/book.gpkg",
        where="continent = 'Africa'",
        output_layer="countries",
        overwrite=True,
    )
    assert not err, res
    err, res = await call(
        client, "vector_convert", input="vector/points.shp", output="out/book.gpkg", mode="add_layer", output_layer="points"
    )
    assert not err, res
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/book.gpkg",
        where="continent = 'Europe'",
        mode="append",
        output_layer="countries",
    )
    assert not err, res
    europe = read(ws / "vector" / "naturalearth_lowres.shp", where="continent = 'Europe'")
    assert res["summary"]["feature_count"] == 51 + len(europe)
    assert [n for n, _ in pyogrio.list_layers(ws / "out" / "book.gpkg")] == ["countries", "points"]
    assert len(read(ws / "out" / "book.gpkg", layer="points")) == len(read(ws / "vector" / "points.shp"))
    # A failed append leaves the file byte-identical (the change is made on a copy).
    before = (ws / "out" / "book.gpkg").read_bytes()
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/book.gpkg",
        where="no_such_field = 1",
        mode="append",
        output_layer="countries",
    )
    assert err
    assert (ws / "out" / "book.gpkg").read_bytes() == before
    assert not [p for p in (ws / "out").iterdir() if p.name.startswith(".gdal-mcp-tmp-")]
    err, res = await call(client, "vector_convert", input="vector/points.shp", output="out/nothing.gpkg", mode="append")
    assert err and res["error"]["code"] == "not-found" and "mode=create" in res["error"]["message"]


async def test_buffer_simplify_dissolve_options_through_the_client(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "vector_buffer",
        input="vector/points.shp",
        output="out/pbuf.gpkg",
        distance=0,
        distance_field="id",
        units="m",
        dissolve=True,
        cap_style="square",
    )
    assert not err, res
    pts = read(ws / "vector" / "points.shp")
    ref = pts.buffer(pts["id"].astype(float), cap_style="square").union_all()
    assert res["summary"]["feature_count"] == 1
    assert read(ws / "out" / "pbuf.gpkg").geometry.iloc[0].area == pytest.approx(ref.area, rel=1e-9)
    err, res = await call(
        client, "vector_simplify", input="vector/naturalearth_lowres.shp", output="out/cov.gpkg", tolerance=20000, coverage=True
    )
    assert not err and res["summary"]["feature_count"] == 177, res
    err, res = await call(
        client,
        "vector_dissolve",
        input="vector/naturalearth_lowres.shp",
        output="out/popreg.gpkg",
        by="continent",
        aggregate={"pop_est": ["sum"]},
    )
    assert not err, res
    got = read(ws / "out" / "popreg.gpkg").set_index("continent")["pop_est_sum"].sort_index()
    ref_pop = read(ws / "vector" / "naturalearth_lowres.shp").groupby("continent")["pop_est"].sum().sort_index()
    assert got.tolist() == ref_pop.tolist()
