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


# ---------------------------------------------------------------------------------------------- size and scale bar


def write_grid(path: Path, values: np.ndarray, crs: str, transform) -> None:
    import rasterio

    with rasterio.open(
        path, "w", driver="GTiff", width=values.shape[1], height=values.shape[0], count=1, dtype=values.dtype.name,
        crs=crs, transform=transform,
    ) as ds:  # fmt: skip
        ds.write(values, 1)


def bar_length(px: np.ndarray, box: list[int]) -> int:
    """The longest run of opaque black pixels on one row of the panel: the bar (glyph strokes are at most 10 px)."""
    x, y, w, h = box
    panel = px[:, y : y + h, x : x + w]
    black = (panel[:3] == 0).all(axis=0) & (panel[3] == 255)
    best = 0
    for row in black:
        run = 0
        for v in row:
            run = run + 1 if v else 0
            best = max(best, run)
    return best


def metres(label: str) -> float:
    value, unit = label.split()
    return float(value) * {"km": 1000.0, "m": 1.0, "cm": 0.01, "mm": 0.001}[unit]


async def test_small_raster_is_enlarged_to_max_size_pixel_for_pixel(client: Client, ws: Path) -> None:
    from rasterio.transform import from_origin

    values = np.random.default_rng(7).integers(0, 256, size=(40, 50), dtype=np.uint8)
    write_grid(ws / "small50x40.tif", values, "EPSG:32632", from_origin(500000, 5000000, 30, 30))
    args = {"input": "small50x40.tif", "max_size": 400, "stretch": "none", "colormap": "gray"}
    r = await client.call_tool("raster_preview", {**args, "scale_bar": False})
    px = decode(r.content[0].data)
    assert px.shape == (4, 320, 400) and (r.structured_content["width"], r.structured_content["height"]) == (400, 320)
    expected = np.repeat(np.repeat(values, 8, axis=0), 8, axis=1)  # each source pixel an 8x8 block
    assert all(np.array_equal(px[b], expected) for b in range(3)) and (px[3] == 255).all()
    assert "each pixel enlarged to 8x8" in r.content[1].text
    # With the scale bar (the default): the same pixels outside its panel, which sits in the bottom-left corner.
    r = await client.call_tool("raster_preview", args)
    px = decode(r.content[0].data)
    x, y, w, h = r.structured_content["scale_bar"]["box"]
    assert x < 20 and y + h > 300 and w < 200
    outside = np.ones((320, 400), dtype=bool)
    outside[y : y + h, x : x + w] = False
    assert np.array_equal(px[0][outside], expected[outside])


async def test_scale_bar_of_a_projected_raster(client: Client, ws: Path) -> None:
    from rasterio.transform import from_origin

    write_grid(ws / "utm50x40.tif", np.full((40, 50), 120, np.uint8), "EPSG:32632", from_origin(500000, 5000000, 30, 30))
    r = await client.call_tool("raster_preview", {"input": "utm50x40.tif", "max_size": 400})
    bar = r.structured_content["scale_bar"]
    length = bar_length(decode(r.content[0].data), bar["box"])
    ground = 30.0 * 50 / 400  # metres per image pixel: 30 m source pixels, 50 of them over 400 image pixels
    assert bar["label"] == "200 m" and length == bar["length_px"] == 53 and bar["method"] == "map units"
    assert abs(length * ground - metres(bar["label"])) <= ground / 2
    assert bar["metres_per_pixel"] == ground and "Scale bar (bottom left): 200 m = 53 image px" in r.content[1].text


async def test_scale_bar_of_a_lonlat_raster_is_geodesic_at_the_centre(client: Client, ws: Path) -> None:
    from pyproj import Geod
    from rasterio.transform import from_origin

    write_grid(ws / "ll300x200.tif", np.full((200, 300), 90, np.uint8), "EPSG:4326", from_origin(10, 61, 0.01, 0.01))
    r = await client.call_tool("raster_preview", {"input": "ll300x200.tif", "max_size": 600})
    bar = r.structured_content["scale_bar"]
    length = bar_length(decode(r.content[0].data), bar["box"])
    assert length == bar["length_px"] and bar["method"] == "geodesic"
    # The image is 600 px for 3 degrees of longitude; its centre is at (11.5 E, 60 N).
    deg = 3.0 / 600
    geod = Geod(ellps="WGS84")
    ground = geod.inv(11.5 - deg / 2, 60.0, 11.5 + deg / 2, 60.0)[2]
    span = geod.inv(11.5 - length * deg / 2, 60.0, 11.5 + length * deg / 2, 60.0)[2]
    assert abs(span - metres(bar["label"])) <= ground / 2 and abs(bar["metres_per_pixel"] - ground) < 1e-6 * ground
    assert 0.1 * 600 <= length <= 0.25 * 600 and bar["label"] in r.content[1].text


async def test_scale_bar_of_vector_previews(client: Client) -> None:
    from pyproj import Geod

    # box.shp: UTM metres; the image's extent and width give the ground size of a pixel.
    r = await client.call_tool("vector_preview", {"input": "vector/box.shp", "max_size": 600})
    s = r.structured_content
    bar = s["scale_bar"]
    ground = (s["extent"][2] - s["extent"][0]) / s["width"]
    length = bar_length(decode(r.content[0].data), bar["box"])
    assert length == bar["length_px"] and bar["method"] == "map units"
    assert abs(length * ground - metres(bar["label"])) <= ground / 2
    # naturalearth: lon/lat, geodesic along the parallel through the image centre.
    r = await client.call_tool("vector_preview", {"input": "vector/naturalearth_lowres.shp", "max_size": 700})
    s = r.structured_content
    bar = s["scale_bar"]
    minx, miny, maxx, maxy = s["extent"]
    deg, lon, lat = (maxx - minx) / s["width"], (minx + maxx) / 2, (miny + maxy) / 2
    length = bar_length(decode(r.content[0].data), bar["box"])
    geod = Geod(ellps="WGS84")
    ground = geod.inv(lon - deg / 2, lat, lon + deg / 2, lat)[2]
    span = geod.inv(lon - length * deg / 2, lat, lon + length * deg / 2, lat)[2]
    assert length == bar["length_px"] and bar["method"] == "geodesic"
    assert abs(span - metres(bar["label"])) <= ground / 2
    assert f"Scale bar (bottom left): {bar['label']}" in r.content[1].text
