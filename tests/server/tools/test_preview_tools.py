"""raster_preview / vector_preview through an MCP client: a PNG image block the model can see, plus a legend."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
from fastmcp import Client
from rasterio.io import MemoryFile

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server


def decode(data: str) -> np.ndarray:
    with MemoryFile(base64.b64decode(data)) as mem, mem.open() as ds:
        assert ds.driver == "PNG"
        return ds.read()


async def test_raster_preview_returns_an_image_and_legend(client: Client, ws: Path) -> None:
    r = await client.call_tool(
        "raster_preview", {"input": "raster/RGB.byte.tif", "max_size": 400, "output": "out/rgb_preview.png"}
    )
    assert not r.is_error
    image, legend = r.content
    assert image.type == "image" and image.mime_type == "image/png"
    px = decode(image.data)
    assert px.shape[0] == 4 and max(px.shape[1:]) == 400
    assert (px[3] == 0).any() and (px[3] == 255).any(), "nodata collar transparent, data opaque"
    assert "EPSG:32618" in legend.text and r.structured_content["mode"] == "rgb"
    assert r.structured_content["dst"] == "out/rgb_preview.png"
    assert (ws / "out" / "rgb_preview.png").read_bytes() == base64.b64decode(image.data)


async def test_single_band_colormap_and_geostationary(client: Client) -> None:
    gray = await client.call_tool("raster_preview", {"input": "raster/slope.tif"})
    terrain = await client.call_tool("raster_preview", {"input": "raster/slope.tif", "colormap": "terrain"})
    a, b = decode(gray.content[0].data), decode(terrain.content[0].data)
    assert a.shape == b.shape and not np.array_equal(a[:3], b[:3])
    goes = await client.call_tool("raster_preview", {"input": "raster/goes.tif"}, raise_on_error=False)
    assert not goes.is_error


async def test_vector_preview_and_errors(client: Client) -> None:
    r = await client.call_tool("vector_preview", {"input": "vector/naturalearth_lowres.shp", "color_by": "continent"})
    assert not r.is_error and "Africa" in r.content[1].text
    r = await client.call_tool("vector_preview", {"input": "vector/test_gpx.gpx"}, raise_on_error=False)
    assert r.is_error and r.structured_content["error"]["code"] == "invalid-argument"
    r = await client.call_tool("vector_preview", {"input": "vector/test_gpx.gpx", "layer": "tracks"})
    assert not r.is_error and decode(r.content[0].data).shape[0] == 4


async def test_preview_output_refused_when_read_only(ws: Path) -> None:
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, read_only=True))
    try:
        async with Client(mcp) as c:
            r = await c.call_tool("raster_preview", {"input": "raster/slope.tif", "output": "ro.png"}, raise_on_error=False)
            assert r.is_error and r.structured_content["error"]["code"] == "read-only"
            r = await c.call_tool("raster_preview", {"input": "raster/slope.tif"}, raise_on_error=False)
            assert not r.is_error
    finally:
        app.executor.close()
