"""Analysis tools through an MCP client: terrain, calculator, polygonize, rasterize, zonal statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client

from tests.helpers import call


async def test_hillshade_of_zipped_srtm(client: Client, ws: Path) -> None:
    err, res = await call(
        client, "raster_terrain", input="/vsizip/raster/N10W110.hgt.zip/N10W110.hgt", output="out/hs.tif", product="hillshade"
    )
    assert not err, res
    assert res["summary"]["dtype"] == "uint8" and res["summary"]["nodata"] == 0
    assert any("111120" in w for w in res["warnings"]), "geographic DEM must be scaled (and say so)"


async def test_ndvi_with_band_suffixes(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_calc",
        inputs={"A": "raster/RGB.byte.tif:1", "B": "raster/RGB.byte.tif:3"},
        expression="(B - A) / (B + A)",
        output="out/ratio.tif",
    )
    assert not err, res
    with rasterio.open(ws / "raster" / "RGB.byte.tif") as src, rasterio.open(ws / "out" / "ratio.tif") as out:
        a, b = src.read(1).astype("float64"), src.read(3).astype("float64")
        valid = (src.read(1) != 0) & (src.read(3) != 0)
        got = out.read(1)
        assert np.allclose(got[valid], ((b - a) / (b + a))[valid], atol=1e-6)
        assert (got[~valid] == out.nodata).all()


@pytest.mark.parametrize(
    "expression",
    ["A.__class__", "__import__('os')", "open('/etc/passwd')", "A[0]", "2**10**10", "(lambda: 1)()", "'x'", "[a for a in A]"],
)
async def test_calculator_refuses_unsafe_expressions(client: Client, expression: str) -> None:
    err, res = await call(client, "raster_calc", inputs={"A": "raster/slope.tif"}, expression=expression, output="out/never.tif")
    assert err and res["error"]["code"] == "invalid-argument"


async def test_median_composite_of_an_input_pattern(client: Client, ws: Path) -> None:
    """Five "scenes" made from slope.tif with offsets and nodata holes of their own, reduced through the client."""
    (ws / "calc_scenes").mkdir(exist_ok=True)
    rng = np.random.default_rng(2)
    with rasterio.open(ws / "raster" / "slope.tif") as ds:
        slope, profile = ds.read(1, masked=True), ds.profile
    layers = []
    for i in range(5):
        values = slope.data.astype("float64") + 10 * i
        missing = np.ma.getmaskarray(slope) | (rng.random(slope.shape) < 0.3)
        with rasterio.open(ws / "calc_scenes" / f"s{i}.tif", "w", **profile) as out:
            out.write(np.where(missing, profile["nodata"], values).astype("float32"), 1)
        layers.append(np.where(missing, np.nan, values.astype("float32")))
    stack = np.stack(layers).astype("float64")
    err, res = await call(
        client,
        "raster_calc",
        input_pattern="calc_scenes/*.tif",
        expression=["median(S)", "count(S)"],
        output="out/composite.tif",
        output_type="Float64",
    )
    assert not err, res
    assert res["summary"]["count"] == 2
    count = np.sum(~np.isnan(stack), axis=0)
    empty = count == 0
    with (
        rasterio.open(ws / "out" / "composite.tif") as out,
        np.errstate(all="ignore"),
        pytest.warns(RuntimeWarning, match="All-NaN"),
    ):
        median = np.nanmedian(stack, axis=0)
        assert out.descriptions == ("median(S)", "count(S)")
        got = out.read(1)
        assert np.allclose(got[~empty], median[~empty], rtol=1e-12) and (got[empty] == out.nodata).all()
        assert np.array_equal(out.read(2), count)
    assert empty.any() and any(f"{int(empty.sum())} pixel(s) have no valid value" in w for w in res["warnings"])
    # The same as a list; a dict and a pattern together are refused.
    err, res = await call(
        client, "raster_calc", inputs=[f"calc_scenes/s{i}.tif:1" for i in range(5)], expression="max(S)", output="out/maximum.tif"
    )
    assert not err, res
    with (
        rasterio.open(ws / "out" / "maximum.tif") as out,
        np.errstate(all="ignore"),
        pytest.warns(RuntimeWarning, match="All-NaN"),
    ):
        assert np.array_equal(out.read(1)[~empty], np.nanmax(stack, axis=0).astype("float32")[~empty])
    err, res = await call(
        client,
        "raster_calc",
        inputs={"A": "calc_scenes/s0.tif"},
        input_pattern="calc_scenes/*.tif",
        expression="A",
        output="out/never.tif",
    )
    assert err and res["error"]["code"] == "invalid-argument" and "not both" in res["error"]["message"]
    err, res = await call(client, "raster_calc", input_pattern="calc_scenes/*.tif", expression="S * 2", output="out/never.tif")
    assert err and "reduce it per pixel first" in res["error"]["message"]


async def test_calculator_grid_mismatch_says_how_to_fix(client: Client) -> None:
    err, res = await call(
        client,
        "raster_calc",
        inputs={"A": "raster/RGB.byte.tif", "B": "raster/slope.tif"},
        expression="A + B",
        output="out/never.tif",
    )
    assert err and res["error"]["code"] == "invalid-argument" and "raster_reproject" in res["error"]["message"]


async def test_polygonize_shade(client: Client) -> None:
    err, four = await call(client, "raster_polygonize", input="raster/shade.tif", output="out/shade4.gpkg")
    err8, eight = await call(client, "raster_polygonize", input="raster/shade.tif", output="out/shade8.gpkg", connectivity=8)
    assert not err and not err8
    assert (four["summary"]["feature_count"], eight["summary"]["feature_count"]) == (232, 214)
    assert four["summary"]["crs"] == "EPSG:3857" and four["summary"]["fields"] == ["value"]


async def test_rasterize_onto_slope_grid_then_zonal(client: Client, ws: Path) -> None:
    err, res = await call(
        client, "vector_rasterize", input="vector/polygons.shp", output="out/zones.tif", attribute="id", like="raster/slope.tif"
    )
    assert not err, res
    with rasterio.open(ws / "out" / "zones.tif") as ds, rasterio.open(ws / "raster" / "slope.tif") as like:
        values, counts = np.unique(ds.read(1), return_counts=True)
        assert ds.transform == like.transform and ds.shape == like.shape
    assert dict(zip(values.tolist(), counts.tolist(), strict=True))[1] == 75
    assert dict(zip(values.tolist(), counts.tolist(), strict=True))[2] == 50
    err, res = await call(
        client,
        "vector_rasterize",
        input="vector/polygons.shp",
        output="out/bad.tif",
        burn_value=1,
        attribute="id",
        like="raster/slope.tif",
    )
    assert err and res["error"]["code"] == "invalid-argument"


async def test_rasterize_mask_bbox_crs_and_add(client: Client, ws: Path) -> None:
    # A 0/1 mask declares no nodata: its zeros stay data.
    err, res = await call(
        client, "vector_rasterize", input="vector/polygons.shp", output="out/mask01.tif", burn_value=1, like="raster/slope.tif"
    )
    assert not err and res["summary"]["nodata"] is None, res
    # bbox in lon/lat, grid in the layer's CRS (bbox_crs used to be refused).
    with rasterio.open(ws / "raster" / "slope.tif") as ds:
        from pyproj import Transformer

        ll = Transformer.from_crs(ds.crs, "EPSG:4326", always_xy=True).transform_bounds(*ds.bounds)
    err, res = await call(
        client,
        "vector_rasterize",
        input="vector/polygons.shp",
        output="out/bboxcrs.tif",
        burn_value=1,
        bbox=list(ll),
        bbox_crs="EPSG:4326",
        resolution=25,
        init=0,
        nodata=255,
        add=True,
    )
    assert not err, res
    with rasterio.open(ws / "out" / "bboxcrs.tif") as out:
        assert out.nodata == 255 and out.dtypes[0] == "uint32" and (out.read(1) == 1).sum() > 100
        assert ll[0] < out.lnglat()[0] < ll[2]
    err, res = await call(
        client,
        "vector_rasterize",
        input="vector/polygons.shp",
        output="out/bad2.tif",
        burn_value=0,
        nodata=0,
        like="raster/slope.tif",
    )
    assert err and res["error"]["code"] == "invalid-argument" and "equals nodata" in res["error"]["message"]


async def test_zonal_stats_reference_facts(client: Client, ws: Path) -> None:
    err, res = await call(client, "zonal_stats", input="raster/slope.tif", zones="vector/polygons.shp", id_field="id")
    assert not err, res
    rows = {r["id"]: r for r in res["rows"]}
    assert (rows[1]["count"], rows[2]["count"]) == (75, 50)
    assert round(rows[1]["mean"], 2) == 14.66 and round(rows[2]["mean"], 4) == 56.6058
    err, res = await call(
        client,
        "zonal_stats",
        input="raster/slope.tif",
        zones="vector/polygons.shp",
        stats=["count", "mean"],
        output="out/zonal.gpkg",
    )
    assert not err and res["summary"]["feature_count"] == 2
    assert {"count", "mean"} <= set(res["summary"]["fields"])
    err, res = await call(client, "zonal_stats", input="raster/slope.tif", zones="vector/polygons.shp", stats=["bogus"])
    assert err and res["error"]["code"] == "invalid-argument"
