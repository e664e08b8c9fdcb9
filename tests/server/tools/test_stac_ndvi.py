""" "NDVI of my area from the least cloudy scene of June" through an MCP client (issue 27): stac_search, then one
raster_calc on the chosen item's red and nir assets with a bbox: two calls, the answer equal to numpy on the same
pixels; from a catalog in the workspace, and from one served over HTTP (the COGs read by windows)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from fastmcp import Client
from rasterio.transform import from_origin
from rasterio.warp import transform_bounds

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import call
from tests.remote_servers import RangeServer

SIDE = 1024
CRS = "EPSG:32633"
ORIGIN = (500_000.0, 5_000_000.0)  # upper left, 10 m pixels
#: (id, date, cloud cover): the least cloudy of June is s2; s4 is clearer but in July
SCENES = [("s1", "2024-06-03", 40.0), ("s2", "2024-06-13", 7.5), ("s3", "2024-06-23", 22.0), ("s4", "2024-07-03", 1.0)]


def write_scenes(root: Path) -> dict[str, dict[str, Path]]:
    """A static catalog of four scenes, each a red and a nir COG (uint16, 512-px tiles) with its own pixels."""
    root.mkdir(parents=True, exist_ok=True)
    transform = from_origin(*ORIGIN, 10, 10)
    bounds = (ORIGIN[0], ORIGIN[1] - SIDE * 10, ORIGIN[0] + SIDE * 10, ORIGIN[1])
    lonlat = transform_bounds(CRS, "EPSG:4326", *bounds)
    catalog = pystac.Catalog(id="scenes", description="NDVI test scenes")
    collection = pystac.Collection(
        id="s2-test",
        description="test scenes",
        extent=pystac.Extent(
            pystac.SpatialExtent([list(lonlat)]),
            pystac.TemporalExtent([[dt.datetime(2024, 6, 1, tzinfo=dt.UTC), dt.datetime(2024, 7, 31, tzinfo=dt.UTC)]]),
        ),
    )
    catalog.add_child(collection)
    files: dict[str, dict[str, Path]] = {}
    rng = np.random.default_rng(2027)
    for scene, day, cloud in SCENES:
        folder = root / "s2-test" / scene
        folder.mkdir(parents=True, exist_ok=True)
        files[scene] = {}
        for band in ("red", "nir"):
            path = folder / f"{band}.tif"
            pixels = rng.integers(1, 10000, size=(1, SIDE, SIDE), dtype=np.uint16)
            with rasterio.open(
                path, "w", driver="COG", width=SIDE, height=SIDE, count=1, dtype="uint16", crs=CRS, transform=transform,
                blocksize=256, compress="deflate", nodata=0,
            ) as ds:  # fmt: skip
                ds.write(pixels)
            files[scene][band] = path
        x0, y0, x1, y1 = lonlat
        item = pystac.Item(
            id=scene,
            geometry={"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]},
            bbox=list(lonlat),
            datetime=dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC),
            properties={"eo:cloud_cover": cloud, "platform": "test-sat"},
        )
        for band, common in (("red", "red"), ("nir", "nir08")):
            item.add_asset(
                band,
                pystac.Asset(
                    href=str(files[scene][band]),
                    media_type=pystac.MediaType.COG,
                    roles=["data"],
                    extra_fields={"eo:bands": [{"name": band, "common_name": common}]},
                ),
            )
        collection.add_item(item)
    catalog.normalize_hrefs(str(root))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(catalog_type=pystac.CatalogType.SELF_CONTAINED)
    return files


def expected_ndvi(red: Path, nir: Path, bbox: list[float]) -> np.ndarray:
    """numpy on the same pixels: the window of the grid the bbox touches (outward to whole pixels)."""
    with rasterio.open(red) as r, rasterio.open(nir) as n:
        inv = ~r.transform
        cols = [c for c, _ in (inv * (bbox[0], bbox[1]), inv * (bbox[2], bbox[3]))]
        rows = [q for _, q in (inv * (bbox[0], bbox[1]), inv * (bbox[2], bbox[3]))]
        c0, c1 = math.floor(min(cols)), math.ceil(max(cols))
        r0, r1 = math.floor(min(rows)), math.ceil(max(rows))
        window = ((r0, r1), (c0, c1))
        red_px = r.read(1, window=window).astype(np.float64)
        nir_px = n.read(1, window=window).astype(np.float64)
    return ((nir_px - red_px) / (nir_px + red_px)).astype(np.float32)


# the area: 300 x 200 pixels well inside the scenes, in the scenes' own CRS
AREA = [ORIGIN[0] + 2000.5, ORIGIN[1] - 5000.5, ORIGIN[0] + 5000.5, ORIGIN[1] - 3000.5]


async def least_cloudy_june_ndvi(client: Client, catalog: str) -> tuple[dict, dict]:
    lon_lat = list(transform_bounds(CRS, "EPSG:4326", *AREA))
    err, found = await call(
        client,
        "stac_search",
        catalog=catalog,
        bbox=lon_lat,
        datetime="2024-06-01/2024-06-30",
        sortby="properties.eo:cloud_cover",
        limit=1,
    )
    assert not err, found
    item = found["items"][0]
    assets = {a["key"]: a for a in item["assets"]}
    err, ndvi = await call(
        client,
        "raster_calc",
        inputs={"R": assets["red"]["uri"], "N": assets["nir"]["uri"]},
        expression="(N - R) / (N + R)",
        bbox=AREA,
        output="ndvi.tif",
        overwrite=True,
    )
    assert not err, ndvi
    return item, ndvi


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, dict[str, Path]]]]:
    ws = tmp_path_factory.mktemp("ws-ndvi")
    files = write_scenes(ws / "scenes")
    yield ws, files


async def test_least_cloudy_june_ndvi_from_a_workspace_catalog_in_two_calls(scenes) -> None:
    ws, files = scenes
    mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            item, ndvi = await least_cloudy_june_ndvi(client, "scenes/catalog.json")
    finally:
        app.executor.close()
    assert item["id"] == "s2"  # s4 is clearer, but in July
    with rasterio.open(ws / "ndvi.tif") as out, rasterio.open(files["s2"]["red"]) as red:
        got = out.read(1)
        assert out.crs == red.crs and out.transform.a == red.transform.a
        assert (out.transform.c, out.transform.f) == (ORIGIN[0] + 2000, ORIGIN[1] - 3000)
    assert np.array_equal(got, expected_ndvi(files["s2"]["red"], files["s2"]["nir"], AREA))


async def test_the_same_from_a_catalog_served_over_http_reads_only_the_area(scenes) -> None:
    ws, files = scenes
    with RangeServer(ws / "scenes") as http:
        mcp, app = build_server(Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never", allow_remote=(http.url,)))
        try:
            async with Client(mcp) as client:
                http.log.clear()
                item, ndvi = await least_cloudy_june_ndvi(client, f"{http.url}/catalog.json")
        finally:
            app.executor.close()
    assert item["id"] == "s2" and item["assets"][0]["input"].startswith(http.url)
    with rasterio.open(ws / "ndvi.tif") as out:
        got = out.read(1)
    assert np.array_equal(got, expected_ndvi(files["s2"]["red"], files["s2"]["nir"], AREA))
    # raster_calc read the area's tiles of two COGs, not the scenes
    both = files["s2"]["red"].stat().st_size + files["s2"]["nir"].stat().st_size
    assert 0 < ndvi["remote"]["bytes"] < 0.5 * both
