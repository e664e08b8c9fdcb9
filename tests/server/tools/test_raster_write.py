"""Write tools through an MCP client: atomic outputs under cancel/kill/timeout, overwrite, read-only, resources."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import rasterio
from fastmcp import Client
from fastmcp.exceptions import McpError

from gdal_mcp.config import Settings
from gdal_mcp.sandbox import TMP_PREFIX
from gdal_mcp.server.build import build_server
from tests.helpers import call

BIG_JOB = {"input": "huge.vrt", "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"}}


def leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob(f"{TMP_PREFIX}*")]


async def wait_clean(root: Path, name: str) -> None:
    for _ in range(40):
        if not leftovers(root) and not (root / name).exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"left behind: {leftovers(root)} {(root / name).exists()}")


async def test_convert_returns_path_uri_summary_and_reads_back(client: Client, ws: Path) -> None:
    err, res = await call(
        client,
        "raster_convert",
        input="raster/RGB.byte.tif",
        output="out/rgb_cog.tif",
        format="COG",
        creation_options={"COMPRESS": "DEFLATE"},
    )
    assert not err, res
    assert res["output"] == "out/rgb_cog.tif" and res["uri"] == "gdal-mcp://files/out/rgb_cog.tif"
    assert res["summary"]["driver"] == "GTiff" and res["summary"]["compression"] == "deflate"
    assert res["summary"]["file_size"] == (ws / "out" / "rgb_cog.tif").stat().st_size
    blob = (await client.read_resource(res["uri"]))[0]
    assert blob.mime_type == "image/tiff"
    assert base64.b64decode(blob.blob) == (ws / "out" / "rgb_cog.tif").read_bytes()
    err, info = await call(client, "raster_info", path=res["output"])
    assert info["is_cog"] is True


async def test_overwrite_rules(client: Client, ws: Path) -> None:
    args = {"input": "raster/float_nan.tif", "output": "out/fn.tif"}
    assert not (await call(client, "raster_convert", **args))[0]
    before = (ws / "out" / "fn.tif").read_bytes()
    err, res = await call(client, "raster_convert", **{**args, "input": "raster/slope.tif"})
    assert err and res["error"]["code"] == "already-exists" and "overwrite=true" in res["error"]["message"]
    assert (ws / "out" / "fn.tif").read_bytes() == before
    err, res = await call(client, "raster_convert", **{**args, "input": "raster/slope.tif"}, overwrite=True)
    assert not err and res["summary"]["width"] == 84
    err, res = await call(client, "raster_convert", input="raster/slope.tif", output="raster/slope.tif", overwrite=True)
    assert err and res["error"]["code"] == "invalid-argument"
    err, res = await call(client, "raster_convert", input="raster/slope.tif", output="../escape.tif")
    assert err and res["error"]["code"] == "out-of-root"


async def test_failed_job_leaves_nothing(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_convert", input="bad/corrupt.tif", output="out/corrupt_copy.tif")
    assert err and res["error"]["code"] == "gdal-error"
    await wait_clean(ws, "out/corrupt_copy.tif")
    err, res = await call(
        client,
        "raster_reproject",
        input="raster/RGB.byte.tif",
        output="new_dir/sub/x.tif",
        dst_crs="EPSG:4326",
        resolution=1,
        size=[2, 2],
    )
    assert err and not (ws / "new_dir").exists()


@pytest.fixture
async def inline_client(server) -> AsyncIterator[Client]:  # noqa: ANN001
    """A 2025-11-25 client: its calls run inline (a 2026-07-28 FastMCP client runs write tools as MCP tasks,
    where a client-side timeout stops polling but not the job: tasks/cancel does, see tests/e2e/test_tasks.py)."""
    async with Client(server[0], mode="legacy") as c:
        yield c


async def test_client_cancel_removes_the_partial_output(inline_client: Client, ws: Path) -> None:
    client = inline_client
    with pytest.raises(McpError, match="timed out"):
        await client.call_tool("raster_convert", {**BIG_JOB, "output": "out/cancelled.tif"}, timeout=1.5)
    await wait_clean(ws, "out/cancelled.tif")
    err, info = await call(client, "raster_info", path="raster/slope.tif")
    assert not err


async def test_killed_worker_mid_write_leaves_nothing(client: Client, server, ws: Path) -> None:
    _, app = server
    task = asyncio.create_task(client.call_tool("raster_convert", {**BIG_JOB, "output": "out/killed.tif"}, raise_on_error=False))
    busy: list[int] = []
    for _ in range(100):
        await asyncio.sleep(0.05)
        busy = app.executor.busy_pids()
        if busy and leftovers(ws):
            break
    assert len(busy) == 1
    await asyncio.sleep(0.3)  # let it write part of the output
    (busy,) = busy
    os.kill(busy, signal.SIGKILL)
    r = await task
    assert r.is_error and r.structured_content["error"]["code"] == "internal-error"
    await wait_clean(ws, "out/killed.tif")
    err, info = await call(client, "raster_info", path="raster/RGB.byte.tif")
    assert not err and info["count"] == 3


async def test_timeout_stops_job_and_cleans_up(ws: Path) -> None:
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=1.0))
    try:
        async with Client(mcp) as c:
            err, res = await call(c, "raster_convert", **BIG_JOB, output="out/timeout.tif")
            assert err and res["error"]["code"] == "timeout"
            await wait_clean(ws, "out/timeout.tif")
            # the server answers the next call: with a 1 s limit, a worker started afresh on a loaded machine (four test
            # processes on 2 cores) may itself need more than 1 s once, so a timeout is retried; any other error fails
            for _ in range(5):
                err, info = await call(c, "raster_info", path="raster/slope.tif")
                if not err or info["error"]["code"] != "timeout":
                    break
            assert not err, info
    finally:
        app.executor.close()


async def test_read_only_refuses_writes(ws: Path) -> None:
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, read_only=True))
    try:
        async with Client(mcp) as c:
            for tool, args in [
                ("raster_convert", {"input": "raster/slope.tif", "output": "ro.tif"}),
                ("raster_reproject", {"input": "raster/slope.tif", "output": "ro.tif", "dst_crs": "4326"}),
                ("raster_mosaic", {"inputs": ["raster/rgb1.tif"], "output": "ro.tif"}),
                ("raster_clip", {"input": "raster/RGB.byte.tif", "output": "ro.tif", "mask": "vector/box.shp"}),
                ("raster_to_xyz", {"input": "raster/slope.tif", "output": "ro.tif"}),
                ("raster_overviews", {"input": "raster/slope.tif", "action": "add"}),
            ]:
                err, res = await call(c, tool, **args)
                assert err and res["error"]["code"] == "read-only", res
            assert not (ws / "ro.tif").exists()
            err, info = await call(c, "raster_info", path="raster/slope.tif")
            assert not err
            err, res = await call(c, "raster_overviews", input="raster/slope.tif")
            assert err and res["error"]["code"] == "read-only", "raster_overviews always writes"
    finally:
        app.executor.close()


async def test_progress_audit_and_list_changed(server, ws: Path, audit_path: Path) -> None:
    from fastmcp.client.messages import MessageHandler

    changed: list[str] = []

    class Notes(MessageHandler):
        async def on_resource_list_changed(self, message) -> None:  # noqa: ANN001
            changed.append("changed")

    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with Client(server[0], message_handler=Notes(), mode="legacy") as c:  # inline: progress as notifications
        r = await c.call_tool(
            "raster_reproject",
            {"input": "raster/RGB.byte.tif", "output": "out/prog.tif", "dst_crs": "EPSG:3857"},
            progress_handler=on_progress,
        )
    assert not r.is_error
    assert any(m and "warping" in m for m in seen)
    await asyncio.sleep(0.1)
    assert changed
    lines = [json.loads(x) for x in audit_path.read_text().splitlines()]
    assert any(x["tool"] == "raster_reproject" and x["outputs"] == ["out/prog.tif"] for x in lines)


async def test_mosaic_through_mcp_is_pixel_identical(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_mosaic", inputs=[f"raster/rgb{i}.tif" for i in (1, 2, 3, 4)], output="out/mosaic.tif")
    assert not err, res
    with rasterio.open(ws / "out" / "mosaic.tif") as a, rasterio.open(ws / "raster" / "RGB.byte.tif") as b:
        assert (a.read() == b.read()).all() and a.transform == b.transform
    err, res = await call(client, "raster_mosaic", inputs=["raster/rgb1.tif", "raster/rgb2.tif"], output="out/m2.vrt")
    assert not err and "rgb1.tif" in (ws / "out" / "m2.vrt").read_text()
    err, info = await call(client, "raster_info", path="out/m2.vrt", stats=True)
    assert not err and info["bands"][0]["statistics"]["valid_count"] > 0


async def test_mosaic_input_pattern_src_nodata_and_bbox(client: Client, ws: Path) -> None:
    # A glob instead of a list: the four tiles (sorted) rebuild RGB.byte.tif.
    err, res = await call(client, "raster_mosaic", input_pattern="raster/rgb[1-4].tif", output="out/pattern.tif")
    assert not err, res
    with rasterio.open(ws / "out" / "pattern.tif") as a, rasterio.open(ws / "raster" / "RGB.byte.tif") as b:
        assert (a.read() == b.read()).all() and a.transform == b.transform
    err, res = await call(client, "raster_mosaic", input_pattern="../*.tif", output="out/never.tif")
    assert err and res["error"]["code"] == "out-of-root", res
    err, res = await call(client, "raster_mosaic", input_pattern="raster/nothing_*.tif", output="out/never.tif")
    assert err and res["error"]["code"] == "not-found", res
    err, res = await call(
        client, "raster_mosaic", inputs=["raster/rgb1.tif"], input_pattern="raster/rgb*.tif", output="out/never.tif"
    )
    assert err and res["error"]["code"] == "invalid-argument", res
    assert not (ws / "out" / "never.tif").exists()
    # src_nodata and a bbox in lon/lat.
    err, res = await call(
        client,
        "raster_mosaic",
        input_pattern="raster/rgb[1-4].tif",
        output="out/te.tif",
        src_nodata=0,
        bbox=[-78.0, 24.0, -77.0, 25.0],
        bbox_crs="EPSG:4326",
    )
    assert not err, res
    from rasterio.warp import transform_bounds

    with rasterio.open(ws / "out" / "te.tif") as ds:
        left, bottom, right, top = transform_bounds(ds.crs, "EPSG:4326", *ds.bounds)
        assert ds.nodata == 0 and left < -77.99 and right > -77.01 and bottom < 24.01 and top > 24.99


async def test_cancelled_reproject_leaves_nothing(inline_client: Client, ws: Path) -> None:
    with pytest.raises(McpError, match="timed out"):
        await inline_client.call_tool(
            "raster_reproject",
            {
                "input": "huge.vrt",
                "src_crs": "EPSG:32618",
                "dst_crs": "EPSG:4326",
                "resolution": 0.00002,  # under --max-pixels: 8e9 pixels
                "output": "out/cancelled_warp.tif",
                "creation_options": {"COMPRESS": "DEFLATE", "TILED": "YES"},
            },
            timeout=2.0,
        )
    await wait_clean(ws, "out/cancelled_warp.tif")


async def test_netcdf_subdataset_input(client: Client, ws: Path) -> None:
    err, res = await call(client, "raster_convert", input="raster/slope.tif", output="out/slope.nc")
    assert not err and res["summary"]["driver"] == "netCDF"
    err, info = await call(client, "raster_info", path="out/slope.nc")
    assert not err
    name = 'NETCDF:"out/slope.nc":Band1'
    err, info = await call(client, "raster_info", path=name, stats=True)
    assert not err, info
    assert info["path"] == name and (info["width"], info["height"]) == (84, 78)
    assert round(info["bands"][0]["statistics"]["mean"], 3) == 56.813
    err, res = await call(client, "raster_convert", input=name, output="out/from_nc.tif")
    assert not err and res["summary"]["width"] == 84
    err, res = await call(client, "raster_info", path='NETCDF:"../outside.nc":Band1')
    assert err and res["error"]["code"] == "out-of-root"
