"""Analysis tools through an MCP client: terrain, calculator, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client

from tests.conftest import call


async def test_hillshade_of_zipped_srtm(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_terrain", input="/vsizip/raster/N10W110.hgt.zip/N10W110.hgt",
                          output="out/hs.tif", product="hillshade")
    assert not err, res
    assert res["summary"]["dtype"] == "uint8" and res["summary"]["nodata"] == 0
    assert any("111120" in w for w in res["warnings"]), "geographic DEM must be scaled (and say so)"


async def test_ndvi_with_band_suffixes(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/RGB.byte.tif:1", "B": "raster/RGB.byte.tif:3"},
                          expression="(B - A) / (B + A)", output="out/ratio.tif")
    assert not err, res
    with rasterio.open(ws / "raster" / "RGB.byte.tif") as src, rasterio.open(ws / "out" / "ratio.tif") as out:
        a, b = src.read(1).astype("float64"), src.read(3).astype("float64")
        valid = (src.read(1) != 0) & (src.read(3) != 0)
        got = out.read(1)
        assert np.allclose(got[valid], ((b - a) / (b + a))[valid], atol=1e-6)
        assert (got[~valid] == out.nodata).all()


@pytest.mark.parametrize("expression", ["A.__class__", "__import__('os')", "open('/etc/passwd')", "A[0]", "2**10**10",
                                        "(lambda: 1)()", "'x'", "[a for a in A]"])
async def test_calculator_refuses_unsafe_expressions(client: Client, expression: str) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/slope.tif"}, expression=expression,
                          output="out/never.tif")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_calculator_grid_mismatch_says_how_to_fix(client: Client) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/RGB.byte.tif", "B": "raster/slope.tif"},
                          expression="A + B", output="out/never.tif")
    assert err and res["error"]["code"] == "invalid-argument" and "raster_reproject" in res["error"]["message"]


async def test_polygonize_shade(client: Client) -> None:
    err, four = await call(client, "raster_polygonize", input="raster/shade.tif", output="out/shade4.gpkg")
    err8, eight = await call(client, "raster_polygonize", input="raster/shade.tif", output="out/shade8.gpkg",
                             connectivity=8)
    assert not err and not err8
    assert (four["summary"]["feature_count"], eight["summary"]["feature_count"]) == (232, 214)
    assert four["summary"]["crs"] == "EPSG:3857" and four["summary"]["fields"] == ["value"]


async def test_rasterize_onto_slope_grid_then_zonal(client: Client, ws: Path) -> None:
    err, res = await call(client, "vector_rasterize", input="vector/polygons.shp", output="out/zones.tif",
                          attribute="id", like="raster/slope.tif")
    assert not err, res
    with rasterio.open(ws / "out" / "zones.tif") as ds, rasterio.open(ws / "raster" / "slope.tif") as like:
        values, counts = np.unique(ds.read(1), return_counts=True)
        assert ds.transform == like.transform and ds.shape == like.shape
    assert dict(zip(values.tolist(), counts.tolist(), strict=True))[1] == 75
    assert dict(zip(values.tolist(), counts.tolist(), strict=True))[2] == 50
    err, res = await call(client, "vector_rasterize", input="vector/polygons.shp", output="out/bad.tif",
                          burn_value=1, attribute="id", like="raster/slope.tif")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_zonal_stats_reference_facts(client: Client, ws: Path) -> None:
    err, res = await call(client, "zonal_stats", input="raster/slope.tif", zones="vector/polygons.shp", id_field="id")
    assert not err, res
    rows = {r["id"]: r for r in res["rows"]}
    assert (rows[1]["count"], rows[2]["count"]) == (75, 50)
    assert round(rows[1]["mean"], 2) == 14.66 and round(rows[2]["mean"], 4) == 56.6058
    err, res = await call(client, "zonal_stats", input="raster/slope.tif", zones="vector/polygons.shp",
                          stats=["count", "mean"], output="out/zonal.gpkg")
    assert not err and res["summary"]["feature_count"] == 2
    assert {"count", "mean"} <= set(res["summary"]["fields"])
    err, res = await call(client, "zonal_stats", input="raster/slope.tif", zones="vector/polygons.shp",
                          stats=["bogus"])
    assert err and res["error"]["code"] == "invalid-argument"
