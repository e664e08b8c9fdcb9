"""raster_info, vector_info, list_datasets through an MCP client: facts, envelope, progress, audit, cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import McpError

from tests.helpers import call

ENVELOPE_KEYS = {"success", "error"}


def assert_envelope(is_error: bool, content: dict, code: str) -> str:
    assert is_error
    assert set(content) == ENVELOPE_KEYS and content["success"] is False
    assert set(content["error"]) == {"code", "message"}
    assert content["error"]["code"] == code, content
    return content["error"]["message"]


async def test_tools_are_listed_with_annotations_and_schemas(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert {"raster_info", "vector_info", "list_datasets"} <= set(tools)
    for name in ("raster_info", "vector_info", "list_datasets"):
        t = tools[name]
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
        assert t.title and t.description and t.output_schema
        for prop in t.input_schema["properties"].values():
            assert prop.get("description"), f"{name} has an undocumented parameter"


async def test_raster_info_facts(client: Client, ws: Path) -> None:
    err, info = await call(client, "raster_info", path="raster/RGB.byte.tif", stats=True)
    assert not err
    assert info["path"] == "raster/RGB.byte.tif"
    assert [round(b["statistics"]["mean"], 4) for b in info["bands"]] == [44.4345, 66.0220, 71.3932]
    assert info["crs"]["epsg"] == 32618 and (info["width"], info["height"]) == (791, 718)
    assert str(ws) not in json.dumps(info)


async def test_subdatasets_come_back_as_usable_workspace_paths(client: Client, ws: Path) -> None:
    err, info = await call(client, "raster_info", path="raster/two-subs.h5")
    assert not err and len(info["subdatasets"]) == 2
    assert str(ws) not in json.dumps(info)
    err, sub = await call(client, "raster_info", path=info["subdatasets"][1])
    assert not err and (sub["width"], sub["height"]) == (3, 3)


async def test_vsizip_input(client: Client) -> None:
    err, info = await call(client, "raster_info", path="/vsizip/raster/N10W110.hgt.zip/N10W110.hgt")
    assert not err and info["driver"] == "SRTMHGT" and info["path"] == "/vsizip/raster/N10W110.hgt.zip/N10W110.hgt"


@pytest.mark.parametrize(
    "path,code",
    [
        ("../../etc/passwd", "out-of-root"),
        ("/etc/passwd", "out-of-root"),
        ("missing.tif", "not-found"),
        ("bad/RGB.byte.truncated.tif", "gdal-error"),
        ("vector/trio.geojson", "unsupported"),
        ("/vsicurl/https://example.com/x.tif", "unsupported"),
        ("PG:dbname=gis", "unsupported"),
    ],
)
async def test_raster_info_failures_use_the_envelope(client: Client, ws: Path, path: str, code: str) -> None:
    r = await client.call_tool("raster_info", {"path": path}, raise_on_error=False)
    message = assert_envelope(r.is_error, r.structured_content, code)
    assert json.loads(r.content[0].text) == r.structured_content
    assert str(ws) not in message and "Traceback" not in message


async def test_corrupt_pixels_are_a_gdal_error_with_gdal_message(client: Client) -> None:
    err, content = await call(client, "raster_info", path="bad/corrupt.tif", stats=True)
    assert "TIFFFillTile" in assert_envelope(err, content, "gdal-error")
    err, content = await call(client, "raster_info", path="bad/corrupt.tif")
    assert not err and content["count"] == 3


async def test_schema_violations_are_invalid_argument(client: Client) -> None:
    err, content = await call(client, "raster_info", path="raster/RGB.byte.tif", band=0)
    assert "band" in assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "raster_info", path="raster/RGB.byte.tif", bogus=1)
    assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "list_datasets", limit=100000)
    assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "no_such_tool")
    assert_envelope(err, content, "not-found")


async def test_vector_info_multi_layer(client: Client) -> None:
    err, info = await call(client, "vector_info", path="vector/test_gpx.gpx")
    assert not err and info["layer_count"] == 5
    err, content = await call(client, "vector_info", path="vector/test_gpx.gpx", layer="points")
    message = assert_envelope(err, content, "not-found")
    assert "track_points" in message and "waypoints" in message
    err, info = await call(client, "vector_info", path="vector/test_gpx.gpx", layer="track_points")
    assert not err and len(info["sample"]["features"]) == 5 and info["layers"][0]["feature_count"] == 19


async def test_list_datasets_is_bounded_and_relative(client: Client, ws: Path) -> None:
    err, listing = await call(client, "list_datasets", path="raster", pattern="*.tif", limit=4)
    assert not err and len(listing["entries"]) == 4 and listing["truncated"] and listing["remaining"] > 0
    assert all(e["path"].startswith("raster/") and e["kind"] == "raster" for e in listing["entries"])
    err, content = await call(client, "list_datasets", path="..")
    assert_envelope(err, content, "out-of-root")
    err, content = await call(client, "list_datasets", path="raster/RGB.byte.tif")
    assert_envelope(err, content, "invalid-argument")


async def test_progress_notifications_carry_messages(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def handler(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    r = await client.call_tool("raster_info", {"path": "raster/shade.tif", "stats": True}, progress_handler=handler)
    assert not r.is_error
    assert seen and seen[-1][0] == 100 and seen[-1][1] == 100 and "statistics" in seen[-1][2]


async def test_audit_log_records_calls(client: Client, audit_path: Path, ws: Path) -> None:
    await call(client, "raster_info", path=str(ws / "raster" / "slope.tif"))
    await call(client, "raster_info", path="nope.tif")
    lines = [json.loads(line) for line in audit_path.read_text().splitlines()]
    ok = [x for x in lines if x["tool"] == "raster_info" and x["arguments"].get("path") == "raster/slope.tif"]
    assert ok and ok[-1]["outcome"] == "ok" and ok[-1]["duration_ms"] >= 0 and "time" in ok[-1]
    assert any(x["arguments"].get("path") == "nope.tif" and x["outcome"] == "not-found" for x in lines)
    assert str(ws) not in audit_path.read_text()


async def test_client_timeout_cancels_the_job_and_server_keeps_serving(client: Client, server) -> None:
    _, app = server
    before = set(app.executor.pids())
    with pytest.raises(McpError, match="timed out"):
        await client.call_tool("raster_info", {"path": "huge.vrt", "stats": True}, timeout=1.5)
    for _ in range(30):
        if set(app.executor.pids()) != before:
            break
        await asyncio.sleep(0.1)
    assert set(app.executor.pids()) != before, "the worker running the cancelled job was not replaced"
    err, info = await call(client, "raster_info", path="raster/float_nan.tif")
    assert not err and info["width"] == 3


async def test_sidecar_georeferencing_survives_the_worker(client: Client) -> None:
    # 0.1 defect: workers opened files with GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR, so GDAL never saw a PNG's
    # .aux.xml or a JPEG's world file: raster_info through the server reported no CRS and a pixel transform.
    err, png = await call(client, "raster_info", path="raster/gadas-export.png")
    assert not err and png["crs"]["name"] == "WGS 84 / Pseudo-Mercator"
    assert png["transform"][0] == pytest.approx(7698736.858, abs=1e-3)
    err, jpg = await call(client, "raster_info", path="raster/demo.jpg")
    assert not err and jpg["crs"]["epsg"] == 4326
    assert jpg["transform"] == pytest.approx([69.1589, 0.021938, 0, 11.8187, 0, -0.021938], abs=1e-4)
