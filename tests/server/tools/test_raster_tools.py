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
    # box.shp spans columns 243.35..493.33, rows 256.35..422.99 of RGB.byte.tif (MANIFEST): the pixels whose
    # centre is inside are columns 243..492, rows 256..422.
    assert (s["width"], s["height"], s["crs"]) == (250, 167, "EPSG:32618")
    assert res["window"] == {"col_off": 243, "row_off": 256, "width": 250, "height": 167}
    assert 174800 < s["bounds"]["left"] <= 175000 and 249850 <= s["bounds"]["right"] < 250150
    err, res = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip_x.tif", mask="vector/test_gpx.gpx")
    assert err and res["error"]["code"] == "invalid-argument" and "mask_layer" in res["error"]["message"]
    err, res = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip_y.tif", mask="../outside.shp")
    assert err and res["error"]["code"] == "out-of-root"


async def test_clip_by_bbox_equals_gdal_translate_projwin(client: Client, ws: Path, tmp_path: Path) -> None:
    """Aligned, fractional, partly outside and lon/lat bboxes: the pixels gdal_translate -projwin keeps, and the
    window the result reports is where they lie in the source grid; all_touched=true keeps every touched pixel."""
    from rasterio.transform import from_origin

    from tests.cli_reference import gdal_cli

    x0, y0, dx, dy = 1000000.0, 6000000.0, 300.0, 200.0
    with rasterio.open(
        ws / "clipgrid.tif", "w", driver="GTiff", width=60, height=50, count=1, dtype="int32", crs="EPSG:3857",
        transform=from_origin(x0, y0, dx, dy),
    ) as ds:  # fmt: skip
        ds.write(np.arange(1, 3001, dtype="int32").reshape(1, 50, 60))

    def px(c0: float, r0: float, c1: float, r1: float) -> list[float]:
        return [x0 + c0 * dx, y0 - r1 * dy, x0 + c1 * dx, y0 - r0 * dy]

    cases = [
        (px(5, 5, 20, 15), None),
        (px(5.3, 4.6, 20.4, 15.5), None),
        (px(5.7, 4.2, 20.7, 15.9), None),
        ([9.0, 47.3, 9.1, 47.34], "EPSG:4326"),
    ]
    for i, (bbox, bbox_crs) in enumerate(cases):
        ref = tmp_path / f"ref{i}.tif"
        extra = ["-projwin_srs", bbox_crs] if bbox_crs else []
        gdal_cli(
            "gdal_translate",
            "-projwin",
            *map(repr, (bbox[0], bbox[3], bbox[2], bbox[1])),
            *extra,
            str(ws / "clipgrid.tif"),
            str(ref),
        )
        err, res = await call(
            client, "raster_clip", input="clipgrid.tif", output=f"out/clipgrid{i}.tif", bbox=bbox, bbox_crs=bbox_crs
        )
        assert not err, res
        with rasterio.open(ref) as theirs, rasterio.open(ws / "out" / f"clipgrid{i}.tif") as ours:
            assert ours.shape == theirs.shape and ours.transform.almost_equals(theirs.transform, precision=1e-6), bbox
            assert np.array_equal(ours.read(), theirs.read())
            window = {
                "col_off": round((theirs.transform.c - x0) / dx),
                "row_off": round((y0 - theirs.transform.f) / dy),
                "width": theirs.width,
                "height": theirs.height,
            }
        assert res["window"] == window and res["warnings"] == []
    # Partly outside: gdal_translate's window (columns -3..7: floor(-2.599) and 11.4 rounded to 11; rows 45..53)
    # limited to the raster, with a warning.
    err, res = await call(
        client, "raster_clip", input="clipgrid.tif", output="out/clipgrid_edge.tif", bbox=px(-2.6, 45.2, 8.8, 54.4)
    )
    assert not err and res["window"] == {"col_off": 0, "row_off": 45, "width": 8, "height": 5}, res
    assert any("past the raster's edge" in w for w in res["warnings"])
    with rasterio.open(ws / "out" / "clipgrid_edge.tif") as ds:
        assert np.array_equal(ds.read(1), (np.arange(1, 3001).reshape(50, 60))[45:50, 0:8])
    # all_touched: every pixel the bbox overlaps (columns 5..20, rows 4..15).
    err, res = await call(
        client, "raster_clip", input="clipgrid.tif", output="out/clipgrid_t.tif", bbox=px(5.3, 4.6, 20.4, 15.5), all_touched=True
    )
    assert not err and res["window"] == {"col_off": 5, "row_off": 4, "width": 16, "height": 12}, res


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
