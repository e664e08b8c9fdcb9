"""The hydrology tools through an MCP client: their answers (areas, snapped points, links), and their refusals as
error envelopes that say what to do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyogrio
import rasterio
from fastmcp import Client
from pyproj import Geod

from tests.helpers import call

DEM = "raster/jacksboro_dem.tif"


async def test_the_largest_catchment_is_the_accumulated_area_at_its_outlet(client: Client, ws: Path) -> None:
    err, res = await call(client, "flow_accumulation", input=DEM, output="out/hy_acc_m2.tif", measure="m2")
    assert not err, res
    assert res["uri"].startswith("gdal-mcp://files/") and res["summary"]["product"].startswith("flow accumulation (m2")
    with rasterio.open(ws / "out" / "hy_acc_m2.tif") as ds:
        acc = ds.read(1)
        row, col = np.unravel_index(int(np.argmax(acc)), acc.shape)
        x, y = ds.xy(row, col)
    assert acc.max() == res["summary"]["max_accumulation"]
    err, res = await call(client, "watershed", input=DEM, output="out/hy_main.gpkg", points=[[x, y]])
    assert not err, res
    basin = res["basins"][0]
    assert basin["moved_m"] < 100 and basin["area_m2"] == acc.max()
    geom = pyogrio.read_dataframe(ws / "out" / "hy_main.gpkg").geometry[0]
    area = abs(Geod(ellps="WGS84").geometry_area_perimeter(geom.segmentize(0.0001))[0])
    assert abs(area - basin["area_m2"]) / area < 1e-4  # the polygon's geodesic area, computed by pyproj


async def test_refusals_say_what_to_do(client: Client, ws: Path) -> None:
    err, res = await call(client, "watershed", input=DEM, output="out/hy_off.gpkg", points=[[0.0, 0.0]], points_crs="EPSG:4326")
    assert err and res["error"]["code"] == "invalid-argument" and "outside" in res["error"]["message"]
    err, res = await call(client, "stream_network", input=DEM, output="out/hy_s.gpkg")
    assert err and res["error"]["code"] == "invalid-argument" and "threshold_km2" in res["error"]["message"]
    err, res = await call(client, "flow_accumulation", input=DEM, output="out/hy_x.tif", input_type="flow_direction")
    assert err and res["error"]["code"] == "invalid-argument" and "input_type='dem'" in res["error"]["message"]
    assert not (ws / "out" / "hy_x.tif").exists() and not (ws / "out" / "hy_off.gpkg").exists()
    err, res = await call(client, "dem_condition", input=DEM, output="out/hy_c.tif")
    assert not err
    err, res = await call(client, "dem_condition", input=DEM, output="out/hy_c.tif")
    assert err and res["error"]["code"] == "already-exists"


async def test_stream_network_answers_with_its_preview_image(client: Client, ws: Path) -> None:
    r = await client.call_tool("stream_network", {"input": DEM, "output": "out/hy_streams.gpkg", "threshold_km2": 3})
    kinds = [c.type for c in r.content]
    assert kinds[0] == "image" and "resource_link" in kinds and "text" in kinds
    assert r.structured_content["max_order"] >= 2
    assert (ws / "out" / "hy_streams.gpkg").exists()


async def test_rasters_keep_the_dems_codec_unless_told(client: Client, ws: Path) -> None:
    with rasterio.open(ws / DEM) as src:
        profile = src.profile | {"compress": "lzw", "predictor": 2, "tiled": True, "blockxsize": 128, "blockysize": 128}
        with rasterio.open(ws / "out" / "hy_lzw.tif", "w", **profile) as out:
            out.write(src.read())
    err, res = await call(client, "dem_condition", input="out/hy_lzw.tif", output="out/hy_lzw_filled.tif")
    assert not err and res["summary"]["creation_options"].get("COMPRESS") == "LZW"
    err, res = await call(
        client, "flow_direction", input="out/hy_lzw.tif", output="out/hy_d8_zstd.tif", creation_options={"COMPRESS": "ZSTD"}
    )
    assert not err
    with rasterio.open(ws / "out" / "hy_lzw_filled.tif") as a, rasterio.open(ws / "out" / "hy_d8_zstd.tif") as b:
        assert a.compression.name.upper() == "LZW" and b.compression.name.upper() == "ZSTD"


async def test_a_pour_point_beside_a_stream_is_told_how_far_to_snap(client: Client, ws: Path) -> None:
    """A point two cells off a stream, without snap_distance: its few-cell catchment comes with a warning naming the
    distance to the stream, and that distance gives the stream's catchment (found by an agent run)."""
    err, res = await call(client, "watershed", input=DEM, output="out/hy_hill.gpkg", points=[[-84.25, 36.6]])
    assert not err, res
    hill = res["basins"][0]["snapped_cells"]
    note = next(w for w in res["warnings"] if w.startswith("pour point 1 drains only"))
    suggested = int(note.split("snap_distance=")[1].split(" ")[0])
    err, res = await call(
        client, "watershed", input=DEM, output="out/hy_stream.gpkg", points=[[-84.25, 36.6]], snap_distance=suggested
    )
    assert not err, res
    assert res["basins"][0]["snapped_cells"] >= 10 * hill and res["basins"][0]["moved_m"] <= suggested
    assert not any(w.startswith("pour point 1 drains only") for w in res["warnings"])
