"""vector_from_table, vector_measure, vector_geometry and vector_merge through an MCP client."""

from __future__ import annotations

from pathlib import Path

import geopandas
import pytest
import shapely
from fastmcp import Client
from pyproj import Geod

from tests.helpers import call


async def test_from_table_reports_unparsed_rows(client: Client, ws: Path) -> None:
    (ws / "out").mkdir(exist_ok=True)
    (ws / "out" / "pts.csv").write_text("name,lon,lat\na,1.5,2\nb,,3\nc,4,x\n")
    err, res = await call(client, "vector_from_table", input="out/pts.csv", output="out/pts.gpkg")
    assert not err, res
    assert (res["output"], res["rows"], res["unparsed_rows"], res["unparsed_row_numbers"]) == ("out/pts.gpkg", 3, 2, [2, 3])
    assert res["summary"]["feature_count"] == 3 and res["summary"]["crs"] == "EPSG:4326"
    back = geopandas.read_file(ws / "out" / "pts.gpkg")
    assert back.geometry.iloc[0].equals(shapely.Point(1.5, 2)) and back.geometry.iloc[1:].isna().all()


async def test_measure_table_and_output(client: Client, ws: Path) -> None:
    err, res = await call(
        client, "vector_measure", input="vector/naturalearth_lowres.shp", measures=["area"], units="km", limit=2, id_field="name"
    )
    assert not err, res
    geom = geopandas.read_file(ws / "vector" / "naturalearth_lowres.shp").geometry.iloc[1]
    area = abs(Geod(ellps="WGS84").geometry_area_perimeter(shapely.orient_polygons(geom))[0]) / 1e6
    assert res["method"] == "geodesic" and res["rows"][1]["area_km2"] == pytest.approx(area, rel=1e-9)
    assert res["truncated"] and res["remaining"] == 175
    err, res = await call(client, "vector_measure", input="vector/polygons.shp", output="out/measured.gpkg")
    assert not err and res["summary"]["feature_count"] == 2 and "area_m2" in res["summary"]["fields"], res


async def test_geometry_and_merge(client: Client, ws: Path) -> None:
    err, res = await call(
        client, "vector_geometry", input="vector/naturalearth_lowres.shp", output="out/hull.gpkg", operation="convex_hull"
    )
    assert not err and res["summary"]["geometry_type"] == "Polygon", res
    err, res = await call(client, "vector_merge", inputs=["vector/polygons.shp", "vector/points.shp"], output="out/merged.gpkg")
    assert not err, res
    out = geopandas.read_file(ws / "out" / "merged.gpkg")
    assert out["source"].tolist() == ["vector/polygons.shp"] * 2 + ["vector/points.shp"] * 3
    err, res = await call(client, "vector_merge", input_pattern="vector/*.shp", output="out/layers.gpkg", mode="layers")
    assert not err and res["inputs"] == len(list((ws / "vector").glob("*.shp"))), res
    err, res = await call(client, "vector_merge", inputs=["../etc/passwd"], output="out/x.gpkg")
    assert err and res["error"]["code"] == "out-of-root"
