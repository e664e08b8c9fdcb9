"""Vector tools through an MCP client: convert/reproject, clip, features, buffer/simplify/dissolve, validate."""

from __future__ import annotations

from pathlib import Path

import pyogrio
import pytest
import shapely
from fastmcp import Client
from pyproj import Geod, Transformer

from tests.helpers import call


async def test_convert_with_filter_and_reprojection(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/af.fgb",
        where="continent = 'Africa'",
        dst_crs="EPSG:3857",
    )
    assert not err, res
    s = res["summary"]
    assert (s["feature_count"], s["crs"], s["driver"]) == (51, "EPSG:3857", "FlatGeobuf")
    # FlatGeobuf's spatial index reorders features: match them by name.
    _, _, geoms, fields = pyogrio.raw.read(ws / "out" / "af.fgb", columns=["name"])
    out = {n: shapely.from_wkb(g) for n, g in zip(fields[0], geoms, strict=True)}
    _, _, src, sfields = pyogrio.raw.read(
        ws / "vector" / "naturalearth_lowres.shp", where="continent = 'Africa'", columns=["name"]
    )
    to_merc = Transformer.from_crs(4326, 3857, always_xy=True)
    for name, g in zip(sfields[0], src, strict=True):
        x, y = shapely.get_coordinates(shapely.from_wkb(g)).T
        ex, ey = to_merc.transform(x, y)
        gx, gy = shapely.get_coordinates(out[name]).T
        assert gx == pytest.approx(ex, rel=1e-9) and gy == pytest.approx(ey, rel=1e-9)


async def test_crs_given_by_name(client: Client, ws: Path) -> None:
    # "WGS 84 / UTM zone 32N" is EPSG:32632: the same output as with the code, coordinates as pyproj puts them
    src = "vector/trio.geojson"
    err, code_res = await call(client, "vector_reproject", input=src, output="out/trio_code.gpkg", dst_crs="EPSG:32632")
    assert not err, code_res
    err, name_res = await call(
        client, "vector_reproject", input=src, output="out/trio_name.gpkg", dst_crs="WGS 84 / UTM zone 32N"
    )
    assert not err and name_res["summary"]["crs"] == code_res["summary"]["crs"] == "EPSG:32632", name_res
    _, _, a, _ = pyogrio.raw.read(ws / "out" / "trio_code.gpkg")
    _, _, b, _ = pyogrio.raw.read(ws / "out" / "trio_name.gpkg")
    _, _, s, _ = pyogrio.raw.read(ws / src)
    to_utm = Transformer.from_crs(4326, 32632, always_xy=True)
    assert len(a) == len(b) == len(s) > 0
    for x, y, g in zip(a, b, s, strict=True):
        assert shapely.from_wkb(x).equals_exact(shapely.from_wkb(y), 0)
        ex, ey = to_utm.transform(*shapely.get_coordinates(shapely.from_wkb(g)).T)
        gx, gy = shapely.get_coordinates(shapely.from_wkb(y)).T
        assert gx == pytest.approx(ex, rel=1e-9) and gy == pytest.approx(ey, rel=1e-9)
    err, res = await call(
        client, "vector_reproject", input="vector/naturalearth_lowres.shp", output="out/amb.gpkg", dst_crs="UTM zone 32N"
    )
    assert err and res["error"]["code"] == "invalid-argument" and "EPSG:32632 WGS 84 / UTM zone 32N" in res["error"]["message"]


async def test_multi_layer_sources_and_sql(client: Client, ws: Path) -> None:
    err, res = await call(client, "vector_convert", input="vector/test_gpx.gpx", output="out/gpx.gpkg")
    assert err and res["error"]["code"] == "invalid-argument" and "track_points" in res["error"]["message"]
    err, res = await call(client, "vector_convert", input="vector/test_gpx.gpx", layer="track_points", output="out/tp.gpkg")
    assert not err and res["summary"]["feature_count"] == 19
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/sql.gpkg",
        sql="DROP TABLE naturalearth_lowres",
    )
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(
        client,
        "vector_convert",
        input="vector/naturalearth_lowres.shp",
        output="out/sql.gpkg",
        sql="SELECT name, pop_est FROM naturalearth_lowres WHERE pop_est > 100000000",
    )
    _, _, _, fields = pyogrio.raw.read(ws / "vector" / "naturalearth_lowres.shp", columns=["pop_est"], read_geometry=False)
    assert not err and res["summary"]["feature_count"] == int((fields[0] > 100_000_000).sum())
    assert res["summary"]["fields"] == ["name", "pop_est"]


async def test_buffer_in_metres_on_a_geographic_layer(client: Client, ws: Path) -> None:
    # 0.1 defect: units defaulted to the layer's (degrees), so distance=1000 wrote 1000-degree buffers.
    err, res = await call(client, "vector_buffer", input="vector/trio.geojson", output="out/trio_buf.gpkg", distance=1000)
    assert not err, res
    _, _, geoms, fields = pyogrio.raw.read(ws / "out" / "trio_buf.gpkg")
    _, _, src, _ = pyogrio.raw.read(ws / "vector" / "trio.geojson")
    point = next(shapely.from_wkb(g) for g in src if shapely.from_wkb(g).geom_type == "Point")
    buffered = next(
        shapely.from_wkb(g) for g in geoms if shapely.from_wkb(g).contains(point) and shapely.from_wkb(g).area < 0.001
    )
    minx, _, maxx, _ = buffered.bounds
    width = Geod(ellps="WGS84").inv(minx, point.y, maxx, point.y)[2]
    assert width == pytest.approx(2000, rel=0.01)
    err, res = await call(
        client, "vector_buffer", input="vector/trio.geojson", output="out/deg.gpkg", distance=0.01, units="layer"
    )
    assert not err and any("degree" in w for w in res["warnings"])
    err, res = await call(client, "vector_simplify", input="vector/naturalearth_lowres.shp", output="out/s.gpkg", tolerance=5000)
    assert not err and res["summary"]["feature_count"] == 177
    assert not any("degree" in w for w in res["warnings"]), "the default tolerance unit is metres"


async def test_clip_dissolve_simplify_validate(client: Client) -> None:
    err, res = await call(
        client, "vector_clip", input="vector/naturalearth_lowres.shp", output="out/clip.gpkg", bbox=[-20, -40, 55, 40]
    )
    assert not err and res["summary"]["feature_count"] == 75
    assert res["summary"]["extent"]["right"] <= 55 and res["summary"]["extent"]["top"] <= 40
    err, res = await call(
        client, "vector_dissolve", input="vector/naturalearth_lowres.shp", output="out/cont.gpkg", by="continent"
    )
    assert not err and res["summary"]["feature_count"] == 8 and res["summary"]["fields"] == ["continent"]
    err, res = await call(
        client, "vector_simplify", input="vector/naturalearth_lowres.shp", output="out/simp.gpkg", tolerance=10, units="km"
    )
    assert not err and res["summary"]["feature_count"] == 177
    err, res = await call(client, "vector_validate", input="vector/naturalearth_lowres.shp")
    assert not err and res["invalid_count"] == 0 and res["feature_count"] == 177


async def test_features_page(client: Client) -> None:
    err, page = await call(
        client, "vector_features", input="vector/naturalearth_lowres.shp", limit=5, offset=170, geometry_mode="none"
    )
    assert not err and len(page["features"]) == 5 and page["remaining"] == 2 and page["truncated"]
    assert all(f["geometry"] is None for f in page["features"])
    err, res = await call(client, "vector_features", input="vector/naturalearth_lowres.shp", limit=0)
    assert err and res["error"]["code"] == "invalid-argument"


async def test_features_intersecting_a_geojson_shape(client: Client, ws: Path) -> None:
    area = {"type": "Polygon", "coordinates": [[[5, 45], [15, 45], [15, 55], [5, 55], [5, 45]]]}
    err, page = await call(
        client,
        "vector_features",
        input="vector/naturalearth_lowres.shp",
        intersects=area,
        geometry_mode="none",
        fields=["name"],
        limit=1000,
    )
    assert not err, page
    _, fids, wkb, fields = pyogrio.raw.read(ws / "vector" / "naturalearth_lowres.shp", columns=["name"], return_fids=True)
    hit = shapely.intersects(shapely.from_wkb(wkb), shapely.geometry.shape(area))
    assert [f["id"] for f in page["features"]] == list(fids[hit])
    assert [f["properties"]["name"] for f in page["features"]] == list(fields[0][hit])
