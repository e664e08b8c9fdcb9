"""Resources (files, metadata, catalog) and prompts through an MCP client."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import McpError

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server


async def test_templates_and_catalog_are_listed(client: Client) -> None:
    templates = {t.uri_template for t in await client.list_resource_templates()}
    assert templates == {"gdal-mcp://files/{path*}", "gdal-mcp://info/raster/{path*}", "gdal-mcp://info/vector/{path*}"}
    assert "gdal-mcp://catalog" in {str(r.uri) for r in await client.list_resources()}


async def test_file_bytes_and_mime_types(client: Client, ws: Path) -> None:
    tif = (await client.read_resource("gdal-mcp://files/raster/float_nan.tif"))[0]
    assert tif.mime_type == "image/tiff" and base64.b64decode(tif.blob) == (ws / "raster" / "float_nan.tif").read_bytes()
    gj = (await client.read_resource("gdal-mcp://files/vector/trio.geojson"))[0]
    assert gj.mime_type == "application/geo+json"


@pytest.mark.parametrize(
    "uri",
    [
        "gdal-mcp://files/../../etc/passwd",
        "gdal-mcp://files/%2Fetc%2Fpasswd",
        "gdal-mcp://files/missing.tif",
        "gdal-mcp://files/raster",
        "gdal-mcp://info/raster/..%2F..%2Fetc%2Fpasswd",
    ],
)
async def test_outside_missing_and_directories_are_refused(client: Client, uri: str) -> None:
    with pytest.raises(McpError):
        await client.read_resource(uri)


async def test_link_to_outside_is_refused(client: Client, ws: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (ws / "leak.txt").symlink_to(secret)
    with pytest.raises(McpError, match="out-of-root"):
        await client.read_resource("gdal-mcp://files/leak.txt")


async def test_oversize_file_is_refused_with_advice(ws: Path) -> None:
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, max_resource_bytes=100_000))
    try:
        async with Client(mcp) as c:
            with pytest.raises(McpError, match="resource-limit.*preview"):
                await c.read_resource("gdal-mcp://files/raster/RGB.byte.tif")
            small = await c.read_resource("gdal-mcp://files/raster/float_nan.tif")
            assert small[0].blob
    finally:
        app.executor.close()


async def test_metadata_resources(client: Client) -> None:
    r = json.loads((await client.read_resource("gdal-mcp://info/raster/raster/RGB.byte.tif"))[0].text)
    assert (r["path"], r["width"], r["crs"]["epsg"]) == ("raster/RGB.byte.tif", 791, 32618)
    v = json.loads((await client.read_resource("gdal-mcp://info/vector/vector/test_gpx.gpx"))[0].text)
    assert v["layer_count"] == 5
    with pytest.raises(McpError, match="unsupported"):
        await client.read_resource("gdal-mcp://info/raster/vector/trio.geojson")


async def test_catalog_is_bounded_and_relative(client: Client, ws: Path) -> None:
    data = json.loads((await client.read_resource("gdal-mcp://catalog"))[0].text)
    paths = {e["path"]: e["kind"] for e in data["entries"]}
    assert paths["raster/RGB.byte.tif"] == "raster" and paths["vector/trio.geojson"] == "vector"
    assert str(ws) not in json.dumps(data) and "truncated" in data and "remaining" in data


async def test_prompts_render_real_metadata(client: Client) -> None:
    names = {p.name for p in await client.list_prompts()}
    assert names == {"choose_crs", "choose_resampling", "make_web_ready", "zonal_workflow"}
    text = (await client.get_prompt("choose_crs", {"path": "raster/RGB.byte.tif", "task": "area"})).messages[0].content.text
    assert "EPSG:32618" in text and "791 × 718" in text and "laea" in text
    text = (await client.get_prompt("choose_crs", {"path": "vector/naturalearth_lowres.shp"})).messages[0].content.text
    assert "177 features" in text and "too narrow" in text
    text = (await client.get_prompt("choose_crs", {"path": "raster/goes.tif"})).messages[0].content.text
    assert "outside the CRS's domain" in text
    text = (
        (await client.get_prompt("choose_resampling", {"path": "raster/slope.tif", "operation": "downsample"}))
        .messages[0]
        .content.text
    )
    assert "float32" in text and "continuous" in text
    text = (await client.get_prompt("make_web_ready", {"path": "raster/RGB.byte.tif"})).messages[0].content.text
    assert "not a valid COG" in text and "JPEG" in text
    text = (
        (await client.get_prompt("zonal_workflow", {"raster": "raster/slope.tif", "zones": "vector/polygons.shp"}))
        .messages[0]
        .content.text
    )
    assert "the same for both" in text and "id" in text


@pytest.mark.parametrize(
    "path",
    [
        "raster/RGB.byte.tif",
        "raster/float_nan.tif",
        "raster/two-subs.h5",
        "/vsizip/raster/N10W110.hgt.zip/N10W110.hgt",
        "raster/demo.jpg",
        "vector/test_gpx.gpx",
        "vector/sample.osm.pbf",
        "vector/line_zm.gpkg",
        "vector/points.shp",
    ],
)
async def test_choose_crs_renders_for_every_kind(client: Client, path: str) -> None:
    p = await client.get_prompt("choose_crs", {"path": path})
    assert "Dataset:" in p.messages[0].content.text


async def test_prompt_errors(client: Client) -> None:
    with pytest.raises(McpError, match="not-found"):
        await client.get_prompt("choose_crs", {"path": "nope.tif"})
    with pytest.raises(McpError, match="needs a raster"):
        await client.get_prompt("choose_resampling", {"path": "vector/trio.geojson"})
