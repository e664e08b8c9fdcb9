"""raster_clip, raster_overviews, raster_stats, raster_sample, raster_to_xyz through an MCP client."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import rasterio
from fastmcp import Client

from tests.helpers import call


async def test_clip_by_box_mask(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip_box.tif", mask="vector/box.shp")
    assert not err, res
    s = res["summary"]
    assert (s["width"], s["height"], s["crs"]) == (251, 167, "EPSG:32618")
    assert 174800 < s["bounds"]["left"] <= 175000 and 250000 <= s["bounds"]["right"] < 250400
    err, res = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip_x.tif", mask="vector/test_gpx.gpx")
    assert err and res["error"]["code"] == "invalid-argument" and "mask_layer" in res["error"]["message"]
    err, res = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip_y.tif", mask="../outside.shp")
    assert err and res["error"]["code"] == "out-of-root"


async def test_overviews_add_delete_in_place(client: Client, ws: Path) -> None:
    shutil.copy(ws / "raster" / "RGB.byte.tif", ws / "ovr.tif")
    err, res = await call(client, "raster_info", path="ovr.tif")
    assert not err and res["bands"][0]["overviews"] == []
    err, res = await call(client, "raster_overviews", input="ovr.tif", action="list")
    assert err and res["error"]["code"] == "invalid-argument", "list moved to raster_info: the tool only writes"
    err, res = await call(client, "raster_overviews", input="ovr.tif", action="add", resampling="average")
    assert not err and res["levels"] == [2, 4], res
    with rasterio.open(ws / "ovr.tif") as ds, rasterio.open(ws / "raster" / "RGB.byte.tif") as src:
        assert ds.overviews(1) == [2, 4] and (ds.read() == src.read()).all()
    assert not list(ws.glob(".gdal-mcp-tmp-*"))
    err, res = await call(client, "raster_overviews", input="ovr.tif", action="delete")
    assert not err and res["levels"] == []
    err, res = await call(client, "raster_overviews", input="ovr.tif", action="add", levels=[1])
    assert err and res["error"]["code"] == "invalid-argument"


async def test_overviews_external_leaves_the_file_untouched(client: Client, ws: Path) -> None:
    shutil.copy(ws / "raster" / "RGB.byte.tif", ws / "ext.tif")
    before = (ws / "ext.tif").read_bytes()
    err, res = await call(client, "raster_overviews", input="ext.tif", external=True, levels=[2, 4])
    assert not err, res
    assert res["levels"] == [2, 4] and res["path"] == "ext.tif" and any("ext.tif.ovr" in w for w in res["warnings"])
    assert (ws / "ext.tif").read_bytes() == before and (ws / "ext.tif.ovr").is_file()
    assert not list(ws.glob(".gdal-mcp-tmp-*")) and not (ws / "ext.tif.ovr.aux.xml").exists()
    with rasterio.open(ws / "ext.tif") as ds:
        assert ds.overviews(1) == [2, 4]
    err, res = await call(client, "raster_overviews", input="ext.tif", action="delete", external=True)
    assert err and res["error"]["code"] == "invalid-argument"


async def test_stats_with_percentiles_and_histogram(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_stats", input="raster/slope.tif", percentiles=[50, 97.5], histogram_bins=10)
    assert not err, res
    with rasterio.open(ws / "raster" / "slope.tif") as ds:
        v = ds.read(1, masked=True).compressed()
    b = res["bands"][0]
    assert b["percentiles"]["50"] == float(np.percentile(v, 50))
    assert b["histogram"]["counts"] == np.histogram(v, 10, range=(v.min(), v.max()))[0].tolist()
    assert round(b["mean"], 3) == 56.813


async def test_sample_and_xyz(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_sample", input="raster/RGB.byte.tif", points=[[250000, 2700000], [0, 0]])
    assert not err
    with rasterio.open(ws / "raster" / "RGB.byte.tif") as ds:
        expect = next(ds.sample([(250000, 2700000)]))
    assert res["points"][0]["values"] == [float(x) if x else None for x in expect]
    assert res["points"][1]["inside"] is False
    err, res = await call(client, "raster_sample", input="raster/RGB.byte.tif", points=[[1, 2, 3]])
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_to_xyz", input="raster/slope.tif", output="out/slope.csv")
    assert not err and res["columns"] == ["x", "y", "band_1"]
    lines = (ws / "out" / "slope.csv").read_text().splitlines()
    assert len(lines) == res["rows"] + 1 and res["file_size"] == (ws / "out" / "slope.csv").stat().st_size
    with rasterio.open(ws / "raster" / "slope.tif") as ds:
        assert res["rows"] == int((~ds.read(1, masked=True).mask).sum())
