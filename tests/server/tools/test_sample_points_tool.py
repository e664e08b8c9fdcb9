"""raster_sample with points_input (extract values to points) through an MCP client."""

from __future__ import annotations

from pathlib import Path

import pyogrio.raw
import rasterio
import shapely
from fastmcp import Client

from tests.helpers import call


async def test_extract_values_to_points(client: Client, ws: Path) -> None:
    err, res = await call(
        client, "raster_sample", input="raster/slope.tif", points_input="vector/points.shp", output="out/points_values.gpkg"
    )
    assert not err, res
    assert res["output"] == "out/points_values.gpkg" and res["uri"].endswith("out/points_values.gpkg")
    assert res["path"] == "raster/slope.tif" and res["sampled"] == 3 and res["points"] == []
    assert res["summary"]["fields"] == ["id", "band_1"] and res["summary"]["feature_count"] == 3
    meta, _, wkb, fields = pyogrio.raw.read(str(ws / "out" / "points_values.gpkg"))
    values = dict(zip(meta["fields"], fields, strict=True))["band_1"]
    with rasterio.open(ws / "raster" / "slope.tif") as ds:
        expect = [float(v[0]) for v in ds.sample([(g.x, g.y) for g in shapely.from_wkb(wkb)])]
    assert values.tolist() == expect
    err, res = await call(
        client, "raster_sample", input="raster/slope.tif", points_input="vector/points.shp", output="out/points_values.gpkg"
    )
    assert err and res["error"]["code"] == "already-exists"


async def test_points_input_argument_errors(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_sample", input="raster/slope.tif", points_input="vector/points.shp")
    assert err and res["error"]["code"] == "invalid-argument" and "output" in res["error"]["message"]
    err, res = await call(
        client, "raster_sample", input="raster/slope.tif", points=[[0, 0]], points_input="vector/points.shp", output="out/p2.gpkg"
    )
    assert err and res["error"]["code"] == "invalid-argument" and "not both" in res["error"]["message"]
    err, res = await call(client, "raster_sample", input="raster/slope.tif")
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_sample", input="raster/slope.tif", points=[[0, 0]], output="out/p3.gpkg")
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_sample", input="raster/slope.tif", points_input="../x.shp", output="out/p4.gpkg")
    assert err and res["error"]["code"] == "out-of-root"
    assert not (ws / "out" / "p2.gpkg").exists() and not (ws / "out" / "p4.gpkg").exists()
